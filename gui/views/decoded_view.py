"""The detail pane's Decoded view: a body through engine.format.body_decode as a tree (field,
value, type), a chooser to override the detected format, and the schema a store's topic is
read with (Protobuf descriptor set + message type, or Avro schema), kept per store and topic.
Only the body shown is decoded; tree items are made when a node is expanded."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QLabel, QLineEdit, QPushButton, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget)

from engine.format import body_decode as bd

from .. import body_format as bf

_PENDING = Qt.UserRole + 1    # the value whose children are made on first expansion


class DecodedView(QWidget):
    formatChosen = Signal()      # the chooser changed: the owner decodes again
    schemaChanged = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.decoded: bd.DecodedBody | None = None
        self.nodes = 0
        self.format = QComboBox(self)
        for f, label in bf.FORMAT_LABELS.items():
            self.format.addItem(label, f)
        self.format.setToolTip("Decode the body as this format (Detected: the most specific format that fits)")
        self.schema_button = QPushButton("Schema…", self)
        self.schema_button.setToolTip("The Protobuf descriptor set and message type, or the Avro schema, "
                                      "this topic's bodies are written with")
        self.info = QLabel(self)
        self.info.setTextFormat(Qt.PlainText)
        self.info.setWordWrap(True)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["Field", "Value", "Type"])
        self.tree.setUniformRowHeights(True)
        self.tree.itemExpanded.connect(self._expand)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Format:"))
        bar.addWidget(self.format)
        bar.addWidget(self.schema_button)
        bar.addStretch(1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.info)
        lay.addWidget(self.tree, 1)
        self.format.currentIndexChanged.connect(self.formatChosen)

    def chosen_format(self) -> str | None:
        return self.format.currentData()

    def show_decoded(self, d: bd.DecodedBody, schema_note: str = "") -> None:
        self.decoded = d
        comp = f", decompressed from {d.compression}" if d.compression else ""
        note = f" — {d.note}" if d.note else ""
        self.info.setText(f"{bf.FORMAT_LABELS.get(d.format, d.format)} (confidence {d.confidence:.2f}{comp}){note}"
                          + (f"\nschema not used: {schema_note}" if schema_note else ""))
        self.tree.clear()
        self.nodes = 0
        root = self.tree.invisibleRootItem()
        kids = bf.children(d.value)
        if kids is None:
            self._add(root, "(body)", d.value)
        else:
            self._fill(root, kids)
        for i in range(min(self.tree.topLevelItemCount(), 50)):   # the first level open, like protoc prints it
            it = self.tree.topLevelItem(i)
            if it.childIndicatorPolicy() == QTreeWidgetItem.ShowIndicator:
                it.setExpanded(True)
        self.tree.resizeColumnToContents(0)
        self.tree.resizeColumnToContents(1)
        self.tree.setColumnWidth(1, min(self.tree.columnWidth(1), max(200, self.tree.viewport().width() * 3 // 5)))

    def _fill(self, parent: QTreeWidgetItem, kids) -> None:
        for label, v in kids:
            if self.nodes >= bf.TREE_NODES:
                parent.addChild(QTreeWidgetItem([f"… {len(kids)} members, not all shown", "", ""]))
                return
            self._add(parent, label, v)

    def _add(self, parent: QTreeWidgetItem, label: str, v) -> QTreeWidgetItem:
        self.nodes += 1
        kids = bf.children(v)
        if kids is None:
            text, typ = bf.leaf_text(v)
            item = QTreeWidgetItem([label, text, typ])
        else:
            kind = "message" if isinstance(v, dict) and self.decoded and self.decoded.format == bd.PROTOBUF \
                else "map" if isinstance(v, dict) else "array"
            item = QTreeWidgetItem([label, f"{len(kids)} {'fields' if kind == 'message' else 'members'}", kind])
            item.setData(0, _PENDING, v)
            item.setChildIndicatorPolicy(QTreeWidgetItem.ShowIndicator if kids else
                                         QTreeWidgetItem.DontShowIndicator)
        parent.addChild(item)
        return item

    def _expand(self, item: QTreeWidgetItem) -> None:
        v = item.data(0, _PENDING)
        if v is None or item.childCount():
            return
        item.setData(0, _PENDING, None)
        self.nodes = 0   # each expansion makes at most TREE_NODES items
        self._fill(item, bf.children(v) or [])

    def clear(self) -> None:
        self.decoded = None
        self.tree.clear()
        self.info.setText("")


class SchemaDialog(QDialog):
    """The schema of one store's topic: a Protobuf descriptor set and its message type, or an
    Avro schema file. Empty fields: detect the format, no field names."""

    def __init__(self, topic: str, schema: dict, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(f"Body schema for {topic}")
        self.desc = QLineEdit(schema.get("protoDesc", ""), self)
        self.type = QComboBox(self)
        self.type.setEditable(True)
        self.avro = QLineEdit(schema.get("avroSchema", ""), self)
        self.problem = QLabel(self)
        self.problem.setTextFormat(Qt.PlainText)
        self.problem.setWordWrap(True)
        form = QFormLayout()
        form.addRow("Protobuf descriptor set (.desc):", self._with_browse(self.desc, "Descriptor sets (*.desc *.pb);;All files (*)"))
        form.addRow("Message type:", self.type)
        form.addRow("Avro schema (.avsc):", self._with_browse(self.avro, "Avro schemas (*.avsc *.json);;All files (*)"))
        buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.problem)
        lay.addWidget(buttons)
        self.desc.editingFinished.connect(self._types)
        self._types()
        if schema.get("protoType"):
            self.type.setCurrentText(schema["protoType"])

    def _with_browse(self, edit: QLineEdit, filt: str) -> QWidget:
        w = QWidget(self)
        h = QHBoxLayout(w)
        h.setContentsMargins(0, 0, 0, 0)
        h.addWidget(edit, 1)
        b = QPushButton("Browse…", w)
        h.addWidget(b)

        def browse():
            path, _ = QFileDialog.getOpenFileName(self, "Choose a schema file", edit.text(), filt)
            if path:
                edit.setText(path)
                self._types()
        b.clicked.connect(browse)
        return w

    def _types(self) -> None:
        current = self.type.currentText()
        self.type.clear()
        self.type.addItems(bf.proto_types(self.desc.text()) if self.desc.text() else [])
        if current:
            self.type.setCurrentText(current)

    def schema(self) -> dict:
        return {"protoDesc": self.desc.text().strip(), "protoType": self.type.currentText().strip(),
                "avroSchema": self.avro.text().strip()}

    def accept(self) -> None:
        s = self.schema()
        if s["protoDesc"] and not s["protoType"]:
            self.problem.setText("Choose the message type the bodies are.")
            return
        _, why = bf.schemas_for(s)
        if why:
            self.problem.setText(why)
            return
        super().accept()
