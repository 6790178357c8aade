"""The index files' in-memory chain copies for key queries, made in the background after a
store opens (engine: IndexService.accelerate_task; a key query then costs one or two cache
misses per file instead of one per chain entry).

Low priority: it starts once the open's own work (first page, overview) has left the session's
runner idle and runs on a one-thread pool of its own (so a close waits for it alone). It does
not take the session's lock: it only reads the index files' maps (a put meanwhile leaves a copy
the walker sees as stale, never a wrong answer), and a page read must not wait behind a copy. Its progress and its
outcome are a label in the status bar. A close (another store, quitting) cancels it and waits
for the file being copied; the copies are memory only, so a read-only store is never written.
Store ▸ "Make In-Memory Index Copies for Key Queries" (a setting, on by default) turns it off,
which also lets go of the copies made."""
from __future__ import annotations

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel

from engine import StoreError

from . import settings as st
from .views.dialogs import one_line
from .workers import Lane, TaskRunner



def short_bytes(n: int) -> str:
    for unit, div in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= div:
            return f"{n / div:.0f} {unit}" if n >= 10 * div else f"{n / div:.1f} {unit}"
    return f"{n} B"


def _files(n: int) -> str:
    return f"{n} index file{'s' if n != 1 else ''}"


def summary(result: dict, total: int) -> str:
    """The status line of a finished run ({"built", "refused", "bytes", "seconds"})."""
    built, refused = len(result["built"]), len(result["refused"])
    over = max(0, total - built - refused - result.get("kept", 0))
    made = built + result.get("kept", 0)
    secs = result["seconds"]
    took = f"{secs:.1f} s" if secs >= 1 else f"{secs * 1000:.0f} ms"
    parts = [f"Key queries: chain copies of {_files(made)} ({short_bytes(result['bytes'])}) in {took}"
             if made else "Key queries: no chain copy made"]
    if refused:
        parts.append(f"{refused} file{'s' if refused != 1 else ''} walked in place (not in the writer's shape)")
    if over:
        parts.append(f"{over} file{'s' if over != 1 else ''} walked in place (over the memory budget)")
    return "; ".join(parts)


class ChainCopies(QObject):
    """Follows a StoreSession; `label` is the status bar widget it writes to."""
    status = Signal(str)            # each text the label gets ("" once the store closes)

    def __init__(self, session, settings, parent=None):
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self.runner = TaskRunner(self, max_threads=1)
        self.lane = Lane(self.runner)
        self.label = QLabel()
        self.label.setTextFormat(Qt.PlainText)
        self.label.setStyleSheet("padding:0 6px")
        self.result: dict | None = None      # the last finished run's answer (tests, curiosity)
        self.error: str = ""                 # the last run's failure, one line
        self._pending = False                # waiting for the session's runner to go idle
        session.runner.idle.connect(self._maybe_start)
        session.aboutToClose.connect(self.stop)

    def _say(self, text: str) -> None:
        self.label.setText(text)
        self.status.emit(text)

    @property
    def enabled(self) -> bool:
        return st.make_chain_copies(self.settings)

    @property
    def busy(self) -> bool:
        return self._pending or self.lane.busy

    def schedule(self) -> None:
        """After an open: start once the session's own work is done (the first page is shown)."""
        self._pending = self.enabled and self._index_files() > 0
        if self._pending:
            QTimer.singleShot(0, self._maybe_start)   # the first page's reads are asked for on paint

    def _index_files(self) -> int:
        index = getattr(self.session.store, "index", None)
        return len(index.files) if index is not None else 0

    def _maybe_start(self) -> None:
        if not self._pending or self.session.runner.active:
            return
        self._pending = False
        self._start()

    def _start(self) -> None:
        store = self.session.store
        index = getattr(store, "index", None)
        if index is None or not index.files or not self.enabled:
            return
        gen, total = self.session.generation, len(index.files)
        self.error = ""
        self.label.setStyleSheet("padding:0 6px")
        self.label.setToolTip("")
        self._say(f"Key queries: making chain copies of {_files(total)}…")

        def progress(p):
            self._say(f"Key queries: chain copies {p.done}/{p.total} index files…")

        def done(result):
            self.result = result
            self._say(summary(result, total))
            names = result["refused"]
            self.label.setToolTip("In-memory copies of the index files' hash chains: a key query costs one or "
                                  "two cache misses per file (Store ▸ Make In-Memory Index Copies)."
                                  + (f"\nWalked in place: {', '.join(names)}" if names else ""))

        def failed(exc):
            self.error = one_line(exc) if isinstance(exc, (StoreError, OSError)) else \
                f"{type(exc).__name__}: {one_line(exc)}"
            self.label.setStyleSheet("color:#b00020; padding:0 6px")
            self._say(f"Key queries: chain copies failed ({self.error}); index files walked in place")

        def job(cancel):
            return index.accelerate_task(cancel=cancel)

        self.lane.submit(job, pass_cancel=True, on_result=done, on_error=failed, on_progress=progress,
                         on_cancelled=lambda: self._say("Key queries: chain copies stopped"),
                         stale=lambda: self.session.generation != gen)

    def stop(self, *_) -> None:
        """The store closes (or the setting went off): cancel the run and wait for it; keeps
        the copies made, which go with the store."""
        self._pending = False
        self.lane.invalidate()
        self.runner.wait()
        self._say("")
        self.label.setToolTip("")

    def set_enabled(self, on: bool) -> None:
        """The setting changed: remember it; off stops the run and lets go of the copies made,
        on makes them for the open store."""
        st.set_make_chain_copies(self.settings, on)
        if on:
            self.schedule()
            return
        self.stop()
        index = getattr(self.session.store, "index", None)
        if index is not None:
            self.session.call(lambda s: index.release_accel())
            self._say("Key queries: walked in the index files (chain copies off)")
