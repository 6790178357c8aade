"""The GUI's one task runner: engine work (engine.tasks: a generator yielding Progress and
returning its result, or a plain function) on a pool thread, delivered on the UI thread.

- `Worker` runs one task; each value a generator yields is a progress report (a Progress;
  a `(done, total)` pair is taken as one), its return value is the result, and the cancel
  token is checked between yields (a cancelled generator is closed, so its cleanup runs).
- `TaskRunner` owns (or shares) a QThreadPool, keeps workers alive until they finish and
  calls back on the UI thread, dropping results a caller marks stale. Only the UI thread
  touches Qt, and processEvents() is never called.
- `Lane`: "newest request wins" for one view: a submit cancels the previous task and makes
  its results stale.
- `Background`: named lanes for the internals views (their results dropped when a newer job
  of the same channel was asked for; failures as a signal with the traceback).
- `RefreshWhenShown`: views that recompute only while visible."""
from __future__ import annotations

import functools
import inspect
import itertools
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from engine.tasks import Cancelled, CancelToken, Progress

__all__ = ["Background", "Cancelled", "CancelToken", "Lane", "Progress", "RefreshWhenShown", "TaskRunner",
           "internals_pool"]


def as_progress(step) -> Progress | None:
    """What a task yielded, as a Progress (None when it is not a report)."""
    if isinstance(step, Progress):
        return step
    if isinstance(step, tuple) and len(step) == 2:
        return Progress(int(step[0]), int(step[1]))
    return None


class WorkerSignals(QObject):
    result = Signal(int, object)          # task id, value
    error = Signal(int, object)           # task id, exception
    progress = Signal(int, object)        # task id, Progress
    finished = Signal(int)                # task id


class Worker(QRunnable):
    def __init__(self, task_id: int, fn: Callable, args: tuple, kwargs: dict, cancel: CancelToken):
        super().__init__()
        self.setAutoDelete(False)  # the runner owns the Python object until `finished`
        self.task_id = task_id
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.cancel = cancel
        self.signals = WorkerSignals()

    def run(self) -> None:  # runs on a pool thread
        tid, sig = self.task_id, self.signals
        try:
            self.cancel.raise_if_cancelled()
            out = self.fn(*self.args, **self.kwargs)
            if inspect.isgenerator(out):
                out = self._drive(out)
            sig.result.emit(tid, out)
        except BaseException as exc:  # delivered to the UI thread, which decides what to show
            sig.error.emit(tid, exc)
        finally:
            sig.finished.emit(tid)

    def _drive(self, gen):
        try:
            while True:
                step = next(gen)
                if self.cancel.cancelled:
                    gen.close()
                    raise Cancelled()
                p = as_progress(step)
                if p is not None:
                    self.signals.progress.emit(self.task_id, p)
        except StopIteration as stop:
            return stop.value


@dataclass
class Task:
    id: int
    cancel: CancelToken
    on_result: Callable[[Any], None] | None = None
    on_error: Callable[[BaseException], None] | None = None
    on_progress: Callable[[Progress], None] | None = None
    on_done: Callable[[], None] | None = None
    stale: Callable[[], bool] | None = None
    on_cancelled: Callable[[], None] | None = None
    on_dropped: Callable[[Any], None] | None = None
    worker: Worker | None = None
    done: bool = False

    def superseded(self) -> bool:
        return self.stale is not None and self.stale()

    def is_stale(self) -> bool:
        return self.cancel.cancelled or self.superseded()


class TaskRunner(QObject):
    """Runs tasks on a pool; callbacks run on the UI thread; stale results are dropped.
    `on_cancelled` runs when a task ended by its Cancel (not when a newer request replaced it)."""
    idle = Signal()

    def __init__(self, parent: QObject | None = None, max_threads: int = 3, pool: QThreadPool | None = None):
        super().__init__(parent)
        if pool is None:
            pool = QThreadPool(self)
            pool.setMaxThreadCount(max_threads)
        self.pool = pool
        self._ids = itertools.count(1)
        self._tasks: dict[int, Task] = {}
        self._retired: list[Worker] = []  # finished workers kept a moment (their thread may still be unwinding)
        self.dropped = 0                  # stale results thrown away (tests and curiosity)

    def submit(self, fn: Callable, *args, on_result=None, on_error=None, on_progress=None, on_done=None,
               on_cancelled=None, on_dropped=None, stale: Callable[[], bool] | None = None,
               cancel: CancelToken | None = None, pass_cancel: bool = False, **kwargs) -> Task:
        """Run fn(*args, **kwargs) (with `cancel=` the task's CancelToken if `pass_cancel`).
        `on_dropped(result)` gets a result nobody wants any more (to close what it holds)."""
        task = Task(next(self._ids), cancel or CancelToken(), on_result, on_error, on_progress, on_done, stale,
                    on_cancelled, on_dropped)
        if pass_cancel:
            kwargs["cancel"] = task.cancel
        w = Worker(task.id, fn, args, kwargs, task.cancel)
        w.signals.result.connect(self._on_result)
        w.signals.error.connect(self._on_error)
        w.signals.progress.connect(self._on_progress)
        w.signals.finished.connect(self._on_finished)
        task.worker = w
        self._tasks[task.id] = task
        self.pool.start(w)
        return task

    @property
    def active(self) -> int:
        return len(self._tasks)

    def cancel_all(self) -> None:
        for t in self._tasks.values():
            t.cancel.cancel()

    def wait(self, msecs: int = -1, cancel: bool = True) -> bool:
        """Block until every started task has returned (before closing a store, whose maps must
        not go away under a running read). With `cancel`, tasks are cancelled first, so queued
        ones finish at once and generators stop at their next step."""
        if cancel:
            self.cancel_all()
        return self.pool.waitForDone(msecs)

    # ---- delivery on the UI thread -----------------------------------------------------
    @Slot(int, object)
    def _on_result(self, tid: int, value: object) -> None:
        t = self._tasks.get(tid)
        if t is None or t.is_stale():
            self.dropped += 1
            if t is not None and t.on_dropped:
                t.on_dropped(value)
            return
        if t.on_result:
            t.on_result(value)

    @Slot(int, object)
    def _on_error(self, tid: int, exc: object) -> None:
        t = self._tasks.get(tid)
        if t is None or t.superseded():
            self.dropped += 1
            return
        if isinstance(exc, Cancelled) or t.cancel.cancelled:
            self.dropped += 1
            if t.on_cancelled:
                t.on_cancelled()
            return
        if t.on_error:
            t.on_error(exc)
        else:
            raise exc  # not swallowed: surfaces through the app's exception hook

    @Slot(int, object)
    def _on_progress(self, tid: int, p: Progress) -> None:
        t = self._tasks.get(tid)
        if t is None or t.is_stale():
            return
        if t.on_progress:
            t.on_progress(p)

    @Slot(int)
    def _on_finished(self, tid: int) -> None:
        t = self._tasks.pop(tid, None)
        if t is None:
            return
        t.done = True
        self._retired = self._retired[-15:] + [t.worker]
        t.worker = None
        if t.on_done and not t.is_stale():
            t.on_done()
        if not self._tasks:
            self.idle.emit()


class Lane:
    """Newest wins: a new submit cancels the previous task and makes its results stale."""

    def __init__(self, runner: TaskRunner):
        self.runner = runner
        self.generation = 0
        self.task: Task | None = None

    def submit(self, fn: Callable, *args, **kw) -> Task:
        self.invalidate()
        gen = self.generation
        outer_stale = kw.pop("stale", None)
        kw["stale"] = (lambda: self.generation != gen or bool(outer_stale and outer_stale()))
        self.task = self.runner.submit(fn, *args, **kw)
        return self.task

    def invalidate(self) -> None:
        self.generation += 1
        if self.task is not None:
            self.task.cancel.cancel()
            self.task = None

    def cancel(self) -> None:
        """Stop the running task; its `on_cancelled` runs (unlike `invalidate`, which drops it)."""
        if self.task is not None:
            self.task.cancel.cancel()

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done


_POOL: QThreadPool | None = None


def internals_pool() -> QThreadPool:
    """A pool of the internals views' own, so a long commitlog walk never starves the browser."""
    global _POOL
    if _POOL is None:
        _POOL = QThreadPool()
        _POOL.setMaxThreadCount(2)
    return _POOL


def _locked_generator(gen, lock):
    """Drive `gen` one step at a time holding `lock`; closing the wrapper closes `gen` under
    the lock too (so a cancelled writer finishes its cleanup before anyone else reads)."""
    try:
        while True:
            with lock:
                try:
                    step = next(gen)
                except StopIteration as stop:
                    return stop.value
            yield step
    finally:
        with lock:
            gen.close()


def holding(lock, fn: Callable) -> Callable:
    """fn run holding `lock` (the session's: no write lands mid-read); a task holds it per step."""
    def job(*a, **k):
        with lock:
            out = fn(*a, **k)
        return _locked_generator(out, lock) if inspect.isgenerator(out) else out
    return job


class Background(QObject):
    """A view's background jobs in named channels. `submit(channel, fn, *args, on_done=...)`
    runs fn(*args) on the internals pool; `on_done(result)` runs on the UI thread only if no
    newer job was submitted on that channel (nor the channel cancelled) meanwhile. fn may be
    a task (a generator yielding Progress): `on_progress` gets its reports, and a newer job
    stops it at its next step."""
    failed = Signal(str, str)         # channel, traceback
    idle = Signal()                   # no job left running

    def __init__(self, parent: QObject | None = None, pool: QThreadPool | None = None):
        super().__init__(parent)
        self.runner = TaskRunner(self, pool=pool or internals_pool())
        self.runner.idle.connect(self.idle)
        self._generation: dict[str, int] = {}
        self._lanes: dict[str, Lane] = {}
        self.lock = None              # the session's lock, once a panel follows a session

    def submit(self, channel: str, fn: Callable, *args, on_done: Callable[[Any], None] | None = None,
               cancellable: bool = False, on_progress: Callable[[Progress], None] | None = None,
               pass_cancel: bool = False) -> tuple:
        """Run fn(*args) (with `cancel=` a callable that turns True once the job is stale, if
        `cancellable`: plain functions poll it; or the job's CancelToken, if `pass_cancel`:
        engine tasks take it); `on_done(result)` on the UI thread if current."""
        gen = self._generation.get(channel, 0) + 1
        self._generation[channel] = gen
        token = (channel, gen)
        if cancellable:
            fn = functools.partial(fn, cancel=lambda: not self.is_current(token))
        if self.lock is not None:
            fn = holding(self.lock, fn)
        lane = self._lanes.setdefault(channel, Lane(self.runner))
        lane.submit(fn, *args, on_result=on_done, on_progress=on_progress, pass_cancel=pass_cancel,
                    on_error=lambda exc: self.failed.emit(channel, "".join(traceback.format_exception(exc))),
                    stale=lambda: not self.is_current(token))
        return token

    def is_current(self, token: tuple) -> bool:
        """Safe to call from the worker: a plain dict read."""
        return self._generation.get(token[0]) == token[1]

    def cancel(self, channel: str | None = None) -> None:
        """Stop whatever runs on `channel` (all channels if None); its result is dropped."""
        for ch in ([channel] if channel else list(self._generation)):
            self._generation[ch] = self._generation.get(ch, 0) + 1
            if ch in self._lanes:
                self._lanes[ch].invalidate()

    @property
    def dropped(self) -> int:
        return self.runner.dropped

    @property
    def busy(self) -> bool:
        return self.runner.active > 0

    def wait(self, msecs: int = 30000) -> bool:
        """Block until the pool is idle (tests and shutdown only; results still arrive as events)."""
        return self.runner.wait(msecs, cancel=False)


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
