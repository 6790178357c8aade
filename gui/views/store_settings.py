"""The store settings dialog: RocketMQ's own property names (MessageStoreConfig fields), one
field each, empty meaning "detect from the files" (file sizes) or RocketMQ's default. Values
can be imported from a broker.conf (only the names that file sets). Every edit is checked as
the engine will check it; the reason is shown in the dialog, and OK waits for valid values.
The dialog only edits a mapping: the window remembers it and reopens the store."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QFontDatabase
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QGridLayout, QGroupBox,
                               QHBoxLayout, QLabel, QLineEdit, QPushButton, QScrollArea, QVBoxLayout, QWidget)

from engine.errors import ConfigError

from .. import store_config as sc
from ..textsafe import tip

DETECT = "detected from the files"


class StoreSettingsDialog(QDialog):
    """Edit one store's settings; `values()` is the mapping when accepted."""
    imported = Signal(str)   # the broker.conf path

    def __init__(self, store_path, values: dict[str, str] | None = None, parent: QWidget | None = None,
                 reason: str = ""):
        super().__init__(parent)
        self.store_path = str(store_path)
        self.setWindowTitle("Store settings")
        self.editors: dict[str, QLineEdit | QComboBox] = {}
        self.labels: dict[str, QLabel] = {}
        self.from_file: set[str] = set()

        head = QLabel(self)
        head.setTextFormat(Qt.PlainText)
        head.setWordWrap(True)
        head.setText(f"Settings for {self.store_path}\n"
                     "RocketMQ's property names (broker.conf). Leave a field empty to detect the size from "
                     "the files, or to use RocketMQ's default. The settings are remembered for this store.")
        self.reason = QLabel(self)
        self.reason.setTextFormat(Qt.PlainText)
        self.reason.setWordWrap(True)
        self.reason.setStyleSheet("color:#8a1c1c")
        self.reason.setText(f"The store did not open: {reason}" if reason else "")
        self.reason.setVisible(bool(reason))

        self.import_button = QPushButton("Import broker.conf…", self)
        self.import_button.setToolTip("Fill the fields from a broker.conf (only the settings the file sets)")
        self.clear_button = QPushButton("Clear all", self)
        self.clear_button.setToolTip("Empty every field: detect everything from the files")
        self.import_info = QLabel(self)
        self.import_info.setTextFormat(Qt.PlainText)
        self.import_info.setWordWrap(True)
        tools = QHBoxLayout()
        tools.addWidget(self.import_button)
        tools.addWidget(self.clear_button)
        tools.addWidget(self.import_info, 1)

        sizes = QGroupBox("File sizes (not recorded in any file: detected from the files when empty)", self)
        others = QGroupBox("Other settings (RocketMQ's default when empty)", self)
        grids = {True: QGridLayout(sizes), False: QGridLayout(others)}
        mono = QFontDatabase.systemFont(QFontDatabase.FixedFont)
        for s in sc.SETTINGS:
            grid = grids[s.detected]
            row = grid.rowCount()
            label = QLabel(s.name, self)
            label.setTextFormat(Qt.PlainText)
            label.setFont(mono)
            label.setToolTip(tip(f"{s.name}: {s.hint}; RocketMQ's default {s.default}"))
            editor = self._editor(s)
            hint = QLabel(s.hint, self)
            hint.setTextFormat(Qt.PlainText)
            hint.setStyleSheet("color:#666")
            grid.addWidget(label, row, 0)
            grid.addWidget(editor, row, 1)
            grid.addWidget(hint, row, 2)
            self.editors[s.name] = editor
            self.labels[s.name] = label
        name_width = max(lb.sizeHint().width() for lb in self.labels.values())
        for g in grids.values():
            g.setColumnMinimumWidth(0, name_width)  # both groups' fields line up
            g.setColumnStretch(1, 1)
            g.setColumnMinimumWidth(1, 260)
            g.setVerticalSpacing(3)
        body = QWidget(self)
        bl = QVBoxLayout(body)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(sizes)
        bl.addWidget(others)
        bl.addStretch(1)
        scroll = QScrollArea(self)
        scroll.setWidget(body)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.NoFrame)

        self.error = QLabel(self)
        self.error.setTextFormat(Qt.PlainText)
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color:#b00020; font-weight:bold")
        self.buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel, self)
        self.ok_button = self.buttons.button(QDialogButtonBox.Ok)
        self.ok_button.setText("Open with these settings")
        lay = QVBoxLayout(self)
        lay.addWidget(head)
        lay.addWidget(self.reason)
        lay.addLayout(tools)
        lay.addWidget(scroll, 1)
        lay.addWidget(self.error)
        lay.addWidget(self.buttons)

        self.import_button.clicked.connect(self.choose_file)
        self.clear_button.clicked.connect(lambda: self.set_values({}))
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.set_values(values or {})
        self.resize(880, 840)

    def _editor(self, s: sc.Setting):
        placeholder = DETECT if s.detected else f"default: {s.default}"
        if s.choices:
            box = QComboBox(self)
            box.addItem("", "")
            for c in s.choices:
                box.addItem(c, c)
            box.setItemText(0, f"({placeholder})")
            box.currentIndexChanged.connect(self._changed)
            return box
        edit = QLineEdit(self)
        edit.setPlaceholderText(placeholder)
        edit.textChanged.connect(self._changed)
        return edit

    # ---- values --------------------------------------------------------------------------
    def values(self) -> dict[str, str]:
        out = {}
        for name, ed in self.editors.items():
            v = ed.currentData() if isinstance(ed, QComboBox) else ed.text()
            if v and v.strip():
                out[name] = v.strip()
        return sc.clean(out)

    def set_values(self, values: dict[str, str]) -> None:
        values = dict(values)
        for name, ed in self.editors.items():
            v = str(values.get(name, "") or "")
            ed.blockSignals(True)
            if isinstance(ed, QComboBox):
                i = ed.findData(v)
                if i < 0 and v:  # a value the list does not have (the engine will judge it)
                    ed.addItem(v, v)
                    i = ed.count() - 1
                ed.setCurrentIndex(max(i, 0))
            else:
                ed.setText(v)
            ed.blockSignals(False)
        self.from_file &= set(values)
        self._mark()
        self._changed()

    def set_value(self, name: str, value: str) -> None:
        self.set_values({**self.values(), name: value})

    # ---- import ---------------------------------------------------------------------------
    def choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import broker.conf", str(Path(self.store_path).parent),
                                              "broker.conf (*.conf *.properties);;All files (*)")
        if path:
            self.import_file(path)

    def import_file(self, path) -> bool:
        """Fill the fields with the settings `path` sets (the others are emptied)."""
        try:
            imp = sc.import_file(path)
        except ConfigError as e:
            self.import_info.setText(f"Not imported: {e}")
            self.import_info.setStyleSheet("color:#b00020")
            return False
        self.from_file = set(imp.values)
        self.set_values(imp.values)
        names = ", ".join(imp.values) or "no store setting"
        text = f"Imported from {Path(imp.path).name}: {names}"
        if imp.ignored:
            text += f"  (ignored: {', '.join(imp.ignored)}: the store is the folder opened)"
        self.import_info.setText(text)
        self.import_info.setToolTip(tip(imp.path))
        self.import_info.setStyleSheet("color:#1a5e1a")
        self.imported.emit(imp.path)
        return True

    # ---- checking ---------------------------------------------------------------------------
    def _mark(self) -> None:
        for name, label in self.labels.items():
            f = QFont(label.font())
            f.setBold(name in self.from_file)
            label.setFont(f)
            label.setToolTip(label.toolTip().split("\n(from")[0] +
                             ("\n(from the imported broker.conf)" if name in self.from_file else ""))

    def _changed(self, *args) -> None:
        problem = sc.check(self.values())
        self.error.setText(problem)
        self.error.setVisible(bool(problem))
        self.ok_button.setEnabled(not problem)

    @property
    def problem(self) -> str:
        return self.error.text()

    def accept(self) -> None:
        self._changed()
        if self.problem:
            return
        super().accept()
