"""Background work for the internals views: a QRunnable plus a signals QObject, and a
per-channel generation token so that only the newest result of a channel is delivered
(older ones are dropped on arrival; long jobs can poll `is_current` to stop early)."""
from __future__ import annotations

import functools
import threading
import traceback
from typing import Any, Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal

from engine.tasks import CancelToken

_POOL: QThreadPool | None = None


def internals_pool() -> QThreadPool:
    """A pool of our own, so a long commitlog walk never starves the browser's workers."""
    global _POOL
    if _POOL is None:
        _POOL = QThreadPool()
        _POOL.setMaxThreadCount(2)
    return _POOL


class _Signals(QObject):
    done = Signal(object, object)     # token, result
    failed = Signal(object, str)      # token, traceback text


class _Job(QRunnable):
    def __init__(self, fn: Callable, args: tuple, token: tuple, signals: _Signals):
        super().__init__()
        self.setAutoDelete(False)     # the Background keeps it until the result is in
        self.fn, self.args, self.token, self.signals = fn, args, token, signals
        self.returned = threading.Event()

    def run(self) -> None:
        try:
            result = self.fn(*self.args)
        except BaseException:  # reported to the UI thread, never swallowed
            self.signals.failed.emit(self.token, traceback.format_exc())
        else:
            self.signals.done.emit(self.token, result)
        finally:
            self.returned.set()


class Background(QObject):
    """Owner of a view's background jobs. `submit(channel, fn, *args, on_done=...)` runs
    fn(*args) on the pool; `on_done(result)` runs on the UI thread only if no newer job
    was submitted on that channel (and the channel was not cancelled) meanwhile."""
    failed = Signal(str, str)         # channel, traceback
    idle = Signal()                   # no job left running

    def __init__(self, parent: QObject | None = None, pool: QThreadPool | None = None):
        super().__init__(parent)
        self.pool = pool or internals_pool()
        self._generation: dict[str, int] = {}
        self._tokens: dict[str, CancelToken] = {}   # the cancel token of each channel's newest job
        self._live: dict[tuple, tuple[_Job, Callable[[Any], None] | None]] = {}
        self.dropped = 0              # stale results thrown away (for tests and curiosity)
        # finished jobs are kept until the next submit: their signals object is the sender of
        # the slot being run and the pool thread may still be returning from run()
        self._finished: list[_Job] = []

    def submit(self, channel: str, fn: Callable, *args, on_done: Callable[[Any], None] | None = None,
               cancellable: bool = False) -> tuple:
        """Run fn(*args) on the pool (with `cancel=` an engine CancelToken, set once the job is
        stale, if `cancellable`); `on_done(result)` on the UI thread if still current."""
        self._finished = [j for j in self._finished if not j.returned.is_set()]
        gen = self._generation.get(channel, 0) + 1
        self._generation[channel] = gen
        token = (channel, gen)
        self._cancel_token(channel)
        if cancellable:
            self._tokens[channel] = CancelToken()
            fn = functools.partial(fn, cancel=self._tokens[channel])
        signals = _Signals()
        signals.done.connect(self._on_done)
        signals.failed.connect(self._on_failed)
        job = _Job(fn, args, token, signals)
        self._live[token] = (job, on_done)
        self.pool.start(job)
        return token

    def is_current(self, token: tuple) -> bool:
        """Safe to call from the worker: a plain dict read."""
        return self._generation.get(token[0]) == token[1]

    def cancel(self, channel: str | None = None) -> None:
        """Drop whatever is running on `channel` (all channels if None) when it arrives."""
        for ch in ([channel] if channel else list(self._generation)):
            self._generation[ch] = self._generation.get(ch, 0) + 1
            self._cancel_token(ch)

    def _cancel_token(self, channel: str) -> None:
        old = self._tokens.pop(channel, None)
        if old is not None:
            old.cancel()

    @property
    def busy(self) -> bool:
        return bool(self._live)

    def wait(self, msecs: int = 30000) -> bool:
        """Block until the pool is idle (tests and shutdown only; results still arrive as events)."""
        return self.pool.waitForDone(msecs)

    def _finish(self, token: tuple):
        job, cb = self._live.pop(token, (None, None))
        if job is not None:
            self._finished.append(job)
        return cb

    def _on_done(self, token: tuple, result: Any) -> None:
        cb = self._finish(token)
        if self.is_current(token):
            if cb is not None:
                cb(result)
        else:
            self.dropped += 1
        if not self._live:
            self.idle.emit()

    def _on_failed(self, token: tuple, text: str) -> None:
        self._finish(token)
        if self.is_current(token):
            self.failed.emit(token[0], text)
        if not self._live:
            self.idle.emit()


class RefreshWhenShown:
    """Mixin for views that compute in the background: a new store marks them stale, and they
    recompute as soon as they are (or become) visible, never while hidden."""
    _dirty = False

    def mark_stale(self, stale: bool) -> None:
        self._dirty = stale
        if stale and self.isVisible():
            self.refresh()

    def showEvent(self, ev) -> None:
        super().showEvent(ev)
        if self._dirty:
            self.refresh()
