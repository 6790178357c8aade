"""Store ▸ Check Store…: `rmqstore check` in the browser. The check (engine.analysis.check_task:
commitlog records, ConsumeQueues, index, checkpoint and config; nothing is written) runs on the
session's runner with one progress bar over its phases and Cancel; the verdict and every
problem (kind, what is wrong, file, offset) are listed; apart from them, what crash recovery
will still do (a killed writer's leftovers, which are no damage) and the notes."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine.analysis import check_task
from engine.tasks import Progress

from ..workers import Lane
from . import dialogs
from .progress import ProgressRow
from .tables import fill_table, make_table

MAX_PROBLEMS = 1000
COMMITLOG_SHARE = 0.85   # of the bar: the commitlog is read once, the later phases work on its columns


def overall(p: Progress) -> Progress:
    """One bar for the whole check: the commitlog's bytes, then the phases after it."""
    if p.unit == "bytes":
        frac = COMMITLOG_SHARE * p.fraction
    else:
        frac = COMMITLOG_SHARE + (1 - COMMITLOG_SHARE) * p.fraction
    return Progress(int(frac * 1000), 1000, p.phase)


def verdict_text(r: dict) -> str:
    head = "OK" if r["ok"] else f"PROBLEMS: {r['problemCount']:,}"
    if r["problemCount"] > len(r["problems"]):
        head += f" (first {len(r['problems']):,} listed)"
    pending = r.get("recoveryPending") or []
    if pending:
        head += f" (recovery pending: {len(pending)} crash leftovers, listed below)"
    notes = "".join(f"\nnote: {n['detail']}" for n in r.get("notes") or [])
    return (f"{head} — {r['messages']:,} messages, {r['cqUnits']:,} CQ units, {r['indexEntries']:,} index entries"
            + (f", {r['dledgerEntries']:,} DLedger entries" if "dledgerEntries" in r else "") + " checked\n"
            f"crc rule: {r['crcRule']} (by the store's generation)" + notes)


class CheckDialog(QDialog):
    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.lane = Lane(session.runner)
        self.result: dict | None = None
        self.setWindowTitle("Check store")
        where = QLabel(f"{session.path}  (read, never written)")
        where.setTextFormat(Qt.PlainText)
        self.check_button = QPushButton("Check Again")
        self.check_button.clicked.connect(self.start)
        top = QHBoxLayout()
        top.addWidget(where, 1)
        top.addWidget(self.check_button)
        self.busy_row = ProgressRow(self.cancel)
        self.progress, self.cancel_button = self.busy_row.progress, self.busy_row.cancel_button
        self.summary = QLabel("")
        self.summary.setTextFormat(Qt.PlainText)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.summary.setWordWrap(True)
        self.problems = make_table(["Kind", "Problem", "File", "Offset"])
        self.pending_label = QLabel("Recovery pending: what `rmqstore recover` or the next read-write open will do "
                                    "(a killed writer's leftovers, not damage)")
        self.pending = make_table(["Kind", "Left by the crash", "Recovery will", "File", "Offset"])
        for w in (self.pending_label, self.pending):
            w.setVisible(False)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.busy_row)
        lay.addWidget(self.summary)
        lay.addWidget(self.problems, 1)
        lay.addWidget(self.pending_label)
        lay.addWidget(self.pending, 1)
        lay.addWidget(buttons)
        self.resize(1000, 520)

    def start(self) -> None:
        if not self.session.is_open:
            dialogs.warning(self, "Check store", "Open a store first.")
            return
        self.result = None
        self._busy(True)
        self.summary.setText("checking…")
        self.session.submit(check_task, MAX_PROBLEMS, lane=self.lane, pass_cancel=True, on_result=self.show_result,
                            on_error=self._failed, on_progress=lambda p: self.busy_row.show_progress(overall(p)),
                            on_cancelled=self._cancelled, on_done=lambda: self._busy(False))

    def cancel(self) -> None:
        self.lane.cancel()
        self._busy(False)
        self._cancelled()

    def _cancelled(self) -> None:
        self.summary.setText("cancelled: no verdict (press Check Again)")

    def _busy(self, on: bool) -> None:
        self.busy_row.busy(on)
        self.check_button.setEnabled(not on)

    def _failed(self, exc) -> None:
        self.summary.setText(f"could not check: {dialogs.one_line(exc)}")
        dialogs.error(self, "Check store", exc)

    def show_result(self, r: dict) -> None:
        self.result = r
        self.summary.setText(verdict_text(r))
        fill_table(self.problems, [[p["kind"], p["detail"], p["file"], "" if p["offset"] is None else p["offset"]]
                                   for p in r["problems"]], numeric={3})
        pending = r.get("recoveryPending") or []
        fill_table(self.pending, [[p["kind"], p["detail"], p["recovery"], p["file"],
                                   "" if p["offset"] is None else p["offset"]] for p in pending], numeric={4})
        for w in (self.pending_label, self.pending):
            w.setVisible(bool(pending))
        self.problems.setVisible(bool(r["problems"]) or not pending)   # an empty table only says "none"

    def closeEvent(self, ev) -> None:
        self.lane.cancel()
        super().closeEvent(ev)


def open_check_dialog(win) -> CheckDialog | None:
    """Store ▸ Check Store…: the dialog over the window's session, started at once."""
    if not win.session.is_open:
        dialogs.info(win, "Check store", "Open a store first.")
        return None
    dlg = CheckDialog(win.session, win)
    dlg.setAttribute(Qt.WA_DeleteOnClose)
    dlg.show()
    win.check_dlg = dlg
    dlg.start()
    return dlg
