"""Background work for the GUI: a QRunnable plus a signals QObject (superqt / napari style).

- `Worker` runs a function on a thread pool. If the function returns a generator, each value
  it yields is a progress report `(done, total)` and its return value is the result; the
  cancel token is checked between yields.
- `TaskRunner` owns a private QThreadPool, keeps workers alive until they finish, and
  delivers results on the UI thread (its slots live there), dropping results a caller marks
  stale. Callbacks therefore always run on the UI thread, and only the UI thread touches Qt.
- `Lane` is a "newest request wins" channel: submitting bumps a generation token, cancels the
  previous task, and results tagged with an older generation are dropped.

Never calls processEvents(): the event loop keeps running while work happens elsewhere."""
from __future__ import annotations

import inspect
import itertools
import threading
from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from engine.tasks import Cancelled, CancelToken  # noqa: F401  (re-exported for the views)


class WorkerSignals(QObject):
    result = Signal(int, object)          # task id, value
    error = Signal(int, object)           # task id, exception
    progress = Signal(int, int, int)      # task id, done, total
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
                gen = out
                try:
                    while True:
                        step = next(gen)
                        if self.cancel.cancelled:
                            gen.close()
                            raise Cancelled()
                        if isinstance(step, tuple) and len(step) == 2:
                            sig.progress.emit(tid, int(step[0]), int(step[1]))
                except StopIteration as stop:
                    out = stop.value
            sig.result.emit(tid, out)
        except BaseException as exc:  # delivered to the UI thread, which decides what to show
            sig.error.emit(tid, exc)
        finally:
            sig.finished.emit(tid)


@dataclass
class Task:
    id: int
    cancel: CancelToken
    on_result: Callable[[Any], None] | None = None
    on_error: Callable[[BaseException], None] | None = None
    on_progress: Callable[[int, int], None] | None = None
    on_done: Callable[[], None] | None = None
    stale: Callable[[], bool] | None = None
    worker: Worker | None = None
    done: bool = False

    def is_stale(self) -> bool:
        return self.cancel.cancelled or (self.stale is not None and self.stale())


class TaskRunner(QObject):
    """Runs tasks on its own pool; callbacks run on the UI thread; stale results are dropped."""
    idle = Signal()

    def __init__(self, parent: QObject | None = None, max_threads: int = 3):
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        self._ids = itertools.count(1)
        self._tasks: dict[int, Task] = {}
        self._retired: list[Worker] = []  # finished workers kept a moment (their thread may still be unwinding)

    def submit(self, fn: Callable, *args, on_result=None, on_error=None, on_progress=None, on_done=None,
               stale: Callable[[], bool] | None = None, cancel: CancelToken | None = None, **kwargs) -> Task:
        task = Task(next(self._ids), cancel or CancelToken(), on_result, on_error, on_progress, on_done, stale)
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

    def wait(self, msecs: int = -1) -> bool:
        """Block until every started task has returned (used before closing a store, whose
        maps must not go away under a running read). Queued tasks not yet started are
        cancelled first and so finish at once."""
        self.cancel_all()
        return self.pool.waitForDone(msecs)

    # ---- delivery on the UI thread -----------------------------------------------------
    @Slot(int, object)
    def _on_result(self, tid: int, value: object) -> None:
        t = self._tasks.get(tid)
        if t is None or t.is_stale():
            return
        if t.on_result:
            t.on_result(value)

    @Slot(int, object)
    def _on_error(self, tid: int, exc: object) -> None:
        t = self._tasks.get(tid)
        if t is None or isinstance(exc, Cancelled) or t.is_stale():
            return
        if t.on_error:
            t.on_error(exc)
        else:
            raise exc  # not swallowed: surfaces through the app's exception hook

    @Slot(int, int, int)
    def _on_progress(self, tid: int, done: int, total: int) -> None:
        t = self._tasks.get(tid)
        if t is None or t.is_stale():
            return
        if t.on_progress:
            t.on_progress(done, total)

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

    @property
    def busy(self) -> bool:
        return self.task is not None and not self.task.done
