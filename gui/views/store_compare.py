"""Compare the open store (A) with another store folder (B): `rmqstore diff` in the browser.

The comparison (engine.analysis.compare_task: B opened read-only, byte ranges compared, the
differing files walked, the rest matched by UNIQ_KEY and store time) runs on the session's
runner with progress and Cancel; the summary and the onlyInA / onlyInB / changed / queue tables
show what it found."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QTabWidget, QVBoxLayout, QWidget)

from engine.analysis import compare_task

from ..timefmt import format_ms
from ..workers import Lane
from . import dialogs
from .progress import ProgressRow
from .tables import fill_table, make_table

ROWS = 5000  # messages listed per side (the counts stay exact)
MESSAGE_COLUMNS = ["Topic", "Queue", "Queue offset", "commitLogOffset", "Stored", "msgId", "UNIQ_KEY"]


def _message_rows(refs: list[dict], utc: bool) -> list[list]:
    return [[r["topic"], r["queueId"], r["queueOffset"], r["commitLogOffset"], format_ms(r["storeTimestamp"], utc),
             r["msgId"], r["uniqKey"] or ""] for r in refs]


def _range(lo, hi) -> str:
    return "absent" if lo is None else f"[{lo:,}, {hi:,})"


def summary_text(d: dict) -> str:
    cl = d["commitlog"]
    head = ("IDENTICAL: same commitlog bytes, messages and queues" if d["identical"] else
            "DIFFERENT" + (f": first divergence at commitlog offset {d['firstDivergence']:,}"
                           if d["firstDivergence"] is not None else ": same commitlog bytes"))
    return (f"{head}\n"
            f"commitlog  A {_range(cl['a']['minOffset'], cl['a']['maxOffset'])}   "
            f"B {_range(cl['b']['minOffset'], cl['b']['maxOffset'])}\n"
            f"only in A {d['onlyInACount']:,} · only in B {d['onlyInBCount']:,} · changed {len(d['changed']):,} · "
            f"queues that differ {len(d['queues']):,} · matched by UNIQ_KEY and store time {d['matchedByKey']:,} · "
            f"{d['filesWalked']} file(s) walked, {d['bytesCompared']:,} bytes compared")


class CompareDialog(QDialog):
    def __init__(self, session, parent: QWidget | None = None, utc: bool = False):
        super().__init__(parent)
        self.session = session
        self.utc = utc
        self.lane = Lane(session.runner)
        self.task = None
        self.result: dict | None = None
        self.setWindowTitle("Compare with store")
        a = QLabel(f"A (open store): {session.path}")
        a.setTextFormat(Qt.PlainText)
        self.other = QLineEdit()
        self.other.setPlaceholderText("the store folder to compare with (B)")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.compare_button = QPushButton("Compare")
        self.compare_button.setDefault(True)
        self.compare_button.clicked.connect(self.start)
        row = QHBoxLayout()
        row.addWidget(QLabel("B:"))
        row.addWidget(self.other, 1)
        row.addWidget(browse)
        row.addWidget(self.compare_button)
        self.busy_row = ProgressRow(self.cancel)
        self.progress, self.cancel_button = self.busy_row.progress, self.busy_row.cancel_button
        self.summary = QLabel("Choose a store folder and press Compare. Both stores are read, never written.")
        self.summary.setTextFormat(Qt.PlainText)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.summary.setWordWrap(True)
        self.tabs = QTabWidget()
        self.only_a = make_table(MESSAGE_COLUMNS)
        self.only_b = make_table(MESSAGE_COLUMNS)
        self.changed = make_table(MESSAGE_COLUMNS)
        self.queues = make_table(["Topic", "Queue", "A [min, max)", "B [min, max)"])
        for t, title in ((self.only_a, "Only in A"), (self.only_b, "Only in B"), (self.changed, "Changed"),
                         (self.queues, "Queues that differ")):
            self.tabs.addTab(t, title)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(a)
        lay.addLayout(row)
        lay.addWidget(self.busy_row)
        lay.addWidget(self.summary)
        lay.addWidget(self.tabs, 1)
        lay.addWidget(buttons)
        self.resize(1100, 640)

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Store folder to compare with",
                                                self.other.text() or str(Path(self.session.path or ".").parent))
        if path:
            self.other.setText(path)

    # ---- the task -------------------------------------------------------------------------
    def start(self) -> None:
        other = self.other.text().strip()
        if not other:
            dialogs.warning(self, "Compare with store", "Choose the store folder to compare with.")
            return
        if not self.session.is_open:
            dialogs.warning(self, "Compare with store", "Open a store first: it is A of the comparison.")
            return
        self._busy(True)
        self.summary.setText(f"comparing with {other}…")
        self.task = self.session.submit(compare_task, Path(other).expanduser(), None, ROWS, lane=self.lane,
                                        pass_cancel=True, on_result=self.show_result, on_error=self._failed,
                                        on_progress=self._progress, on_cancelled=self._cancelled,
                                        on_done=lambda: self._busy(False))

    def cancel(self) -> None:
        self.lane.cancel()
        self._busy(False)
        self.summary.setText("cancelled")

    def _cancelled(self) -> None:
        self.summary.setText("cancelled")

    def _busy(self, on: bool) -> None:
        self.busy_row.busy(on)
        self.compare_button.setEnabled(not on)

    def _progress(self, p) -> None:
        self.busy_row.show_progress(p)

    def _failed(self, exc) -> None:
        self.summary.setText(f"could not compare: {dialogs.one_line(exc)}")
        dialogs.error(self, "Compare with store", exc)

    def show_result(self, diff) -> None:
        d = diff.to_json() if hasattr(diff, "to_json") else diff
        self.result = d
        self.summary.setText(summary_text(d))
        fill_table(self.only_a, _message_rows(d["onlyInA"], self.utc), numeric={1, 2, 3})
        fill_table(self.only_b, _message_rows(d["onlyInB"], self.utc), numeric={1, 2, 3})
        fill_table(self.changed, _message_rows(d["changed"], self.utc), numeric={1, 2, 3})
        fill_table(self.queues, [[q["topic"], q["queueId"], _range(q["minOffsetA"], q["maxOffsetA"]),
                                  _range(q["minOffsetB"], q["maxOffsetB"])] for q in d["queues"]], numeric={1})
        for i, (n, shown, title) in enumerate(((d["onlyInACount"], len(d["onlyInA"]), "Only in A"),
                                               (d["onlyInBCount"], len(d["onlyInB"]), "Only in B"),
                                               (len(d["changed"]), len(d["changed"]), "Changed"),
                                               (len(d["queues"]), len(d["queues"]), "Queues that differ"))):
            self.tabs.setTabText(i, f"{title} ({n:,}" + (f", first {shown:,} listed)" if shown < n else ")"))
        first = next((i for i, t in enumerate((self.only_a, self.only_b, self.changed, self.queues)) if t.rowCount()), 0)
        self.tabs.setCurrentIndex(first)

    def closeEvent(self, ev) -> None:
        self.lane.cancel()
        super().closeEvent(ev)


def open_compare_dialog(win) -> CompareDialog | None:
    """Store ▸ Compare with Store…: the dialog over the window's session (A = the open store)."""
    if not win.session.is_open:
        dialogs.info(win, "Compare with store", "Open a store first: it is A of the comparison.")
        return None
    dlg = CompareDialog(win.session, win, utc=getattr(win, "utc", False))
    dlg.setAttribute(Qt.WA_DeleteOnClose)
    dlg.show()
    win.compare_dlg = dlg
    return dlg
