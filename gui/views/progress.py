"""A progress dialog for one long task (opening a store, writing the demo store): busy until
the task reports a total, the task's message as its label, and Cancel. It appears only when
the task takes longer than a moment, so quick work never flashes a window."""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QProgressBar, QProgressDialog, QPushButton, QWidget

from engine.tasks import Progress

SHOW_AFTER_MS = 400


class TaskProgressDialog(QProgressDialog):
    def __init__(self, parent: QWidget | None, title: str, text: str, on_cancel: Callable[[], None],
                 show_after_ms: int = SHOW_AFTER_MS):
        super().__init__(text, "Cancel", 0, 0, parent)
        self.setWindowTitle(title)
        self.setWindowModality(Qt.WindowModal)
        self.setAutoClose(False)
        self.setAutoReset(False)
        self.setMinimumWidth(460)
        self.setMinimumDuration(show_after_ms)
        self._on_cancel = on_cancel
        self.canceled.connect(self._cancel)
        self.finished_ = False

    def show_progress(self, p: Progress) -> None:
        if p.total:
            self.setRange(0, p.total)
            self.setValue(min(p.done, p.total))
        else:
            self.setRange(0, 0)
        text = p.message or (f"{p.done:,} of {p.total:,} {p.unit}".rstrip() if p.total else "")
        if text:
            self.setLabelText(text)

    def _cancel(self) -> None:
        if not self.finished_:
            self.setLabelText("Cancelling…")
            self._on_cancel()

    def finish(self) -> None:
        """The task ended (done, failed or cancelled): the dialog goes away."""
        self.finished_ = True
        self.canceled.disconnect(self._cancel)
        self.reset()
        self.close()
        self.deleteLater()


class ProgressRow(QWidget):
    """An inline progress bar with Cancel for a view's own long task: hidden while idle, busy
    until the task reports a total, then the fraction done with the task's phase."""

    def __init__(self, on_cancel: Callable[[], None], fmt: str = "%p%", parent: QWidget | None = None):
        super().__init__(parent)
        self.fmt = fmt
        self.progress = QProgressBar()
        self.progress.setFormat(fmt)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(on_cancel)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.progress, 1)
        lay.addWidget(self.cancel_button)
        self.hide()

    def busy(self, on: bool) -> None:
        self.setVisible(on)
        if on:
            self.progress.setRange(0, 0)
            self.progress.setFormat(self.fmt)

    def show_progress(self, p: Progress) -> None:
        if p.total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(p.fraction * 1000))
        if p.phase:
            self.progress.setFormat(f"{p.phase}: %p%")
