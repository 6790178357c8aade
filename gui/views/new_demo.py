"""File ▸ New Demo Store…: a demo store of any size (the facade's demo_task) written off the UI
thread, with a progress bar (messages written, rate, time left) and Cancel. A cancelled demo
leaves no half store behind (the task removes what it wrote); a finished one opens read-only."""
from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QVBoxLayout, QWidget)

from engine.tasks import Progress

DEFAULT_MESSAGES = 100_000
MAX_MESSAGES = 100_000_000


def folder_problem(text: str) -> str:
    """Why `text` cannot take a new demo store ("" when it can: a new or empty folder)."""
    if not text.strip():
        return "choose a folder for the new store"
    p = Path(text).expanduser()
    if p.exists() and not p.is_dir():
        return "this is a file, not a folder"
    if p.is_dir() and any(p.iterdir()):
        return "this folder is not empty: the demo writes new stores only"
    return ""


class NewDemoDialog(QDialog):
    """Where and how big: a new (or empty) folder, the number of messages, the seed."""

    def __init__(self, parent: QWidget | None, start: str = ""):
        super().__init__(parent)
        self.setWindowTitle("New demo store")
        self.setMinimumWidth(520)
        self.folder = QLineEdit(start)
        self.folder.setPlaceholderText("a new or empty folder")
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        self.messages = QSpinBox()
        self.messages.setRange(0, MAX_MESSAGES)
        self.messages.setSingleStep(10_000)
        self.messages.setGroupSeparatorShown(True)
        self.messages.setValue(DEFAULT_MESSAGES)
        self.seed = QSpinBox()
        self.seed.setRange(0, 2 ** 31 - 1)
        self.seed.setValue(7)
        self.seed.setToolTip("the same seed writes the same messages (their times aside)")
        form = QFormLayout()
        form.addRow("Folder", row)
        form.addRow("Messages", self.messages)
        form.addRow("Seed", self.seed)
        self.problem = QLabel()
        self.problem.setStyleSheet("color: #b00020")
        note = QLabel("Orders, payments and inventory topics with JSON bodies, keys, CJK tags, a retry "
                      "topic, delayed messages and consumer offsets with lag. Opens read-only when written.")
        note.setWordWrap(True)
        self.buttons = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        self.buttons.button(QDialogButtonBox.Ok).setText("Write")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(note)
        lay.addWidget(self.problem)
        lay.addWidget(self.buttons)
        self.folder.textChanged.connect(self._check)
        self._check()

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Folder for the new demo store", self.folder.text())
        if path:
            self.folder.setText(path)

    def _check(self) -> None:
        problem = folder_problem(self.folder.text())
        self.problem.setText(problem)
        self.buttons.button(QDialogButtonBox.Ok).setEnabled(not problem)

    def values(self) -> tuple[Path, int, int]:
        return Path(self.folder.text()).expanduser(), self.messages.value(), self.seed.value()


def progress_text(p: Progress, seconds: float) -> str:
    """ "120,000 of 2,000,000 messages · 48,210 messages/s · about 39 s left" """
    if p.message or not p.total:
        return p.message
    text = f"{p.done:,} of {p.total:,} {p.unit}"
    if p.done and seconds > 0:
        rate = p.done / seconds
        left = (p.total - p.done) / rate
        text += f" · {rate:,.0f} {p.unit}/s · about " + (f"{left:.0f} s" if left < 120 else f"{left / 60:.0f} min") \
            + " left"
    return text


def new_demo_store(win, root: Path | None = None, messages: int | None = None, seed: int = 7):
    """Ask where and how big (unless given), then write the demo store with progress and Cancel
    and open it read-only. Returns the runner's task, or None when nothing was started."""
    from engine import demo_task

    from . import dialogs
    from .progress import TaskProgressDialog
    if root is None:
        dlg = NewDemoDialog(win)
        if dlg.exec() != QDialog.Accepted:
            return None
        root, messages, seed = dlg.values()
    problem = folder_problem(str(root))
    if problem:
        dialogs.error(win, "New demo store", f"{root}: {problem}")
        return None
    messages = DEFAULT_MESSAGES if messages is None else messages
    task = None
    progress = TaskProgressDialog(win, "New demo store", f"writing {messages:,} messages to {root}…",
                                  lambda: task.cancel.cancel())
    started = time.monotonic()

    def show(p: Progress) -> None:
        progress.show_progress(p)
        text = progress_text(p, time.monotonic() - started)
        if text:
            progress.setLabelText(text)

    def written(path):
        progress.finish()
        win.open_store(path, read_only=True)

    def failed(exc):
        progress.finish()
        dialogs.error(win, "New demo store", exc, detail="The demo store could not be written.")

    def cancelled():
        progress.finish()
        win.statusBar().showMessage(f"demo store not written (cancelled): {root} left as it was", 10000)

    win.statusBar().showMessage(f"writing a demo store of {messages:,} messages to {root}…")
    task = win.session.runner.submit(demo_task, root, messages, seed, pass_cancel=True, on_result=written,
                                     on_error=failed, on_progress=show, on_cancelled=cancelled)
    return task
