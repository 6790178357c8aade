"""The one task model for long engine work: open, recover, check, rebuild, demo, fill, scan.

Long work is a generator that yields `Progress` and returns its result (StopIteration.value).
The CLI prints the progress, the GUI runs the generator on a pool thread; both cancel it the
same way, with a `CancelToken` the work polls between steps. `run` drives a generator to its
end for callers that only want the answer."""
from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engine.errors import StoreError

T = TypeVar("T")


class Cancelled(StoreError):
    """The work was cancelled before it finished; nothing it would have written is half-done."""

    def __init__(self, message: str = "cancelled", **kw: Any) -> None:
        super().__init__(message, **kw)


class CancelToken:
    """Set once by whoever asked for the work; polled by the work between two steps."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def is_set(self) -> bool:  # threading.Event's spelling, so an Event-shaped caller still works
        return self._event.is_set()

    def cancel(self) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self._event.set()
            hooks = list(self._hooks)
        for hook in hooks:
            hook()

    set = cancel  # threading.Event's spelling

    def on_cancel(self, hook: Callable[[], None]) -> None:
        """Run `hook` on cancel (at once if already cancelled): stops work the token cannot poll."""
        with self._lock:
            if not self._event.is_set():
                self._hooks.append(hook)
                return
        hook()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()


NEVER = CancelToken()  # the token of work nobody can cancel


@dataclass
class StageProgress:
    """One stage of a multi-stage job (Spark's stages; local slices are one stage)."""
    stage_id: int
    name: str
    completed: int
    active: int
    total: int


@dataclass
class Progress:
    """`done` of `total` units (bytes, records, files, tasks: `unit` says which) in `phase`."""
    done: int
    total: int
    phase: str = ""
    unit: str = ""
    message: str = ""
    stages: list[StageProgress] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total else 0.0


Task = Generator[Progress, None, T]
ProgressFn = Callable[[Progress], None]


def run(task: Task[T], on_progress: ProgressFn | None = None) -> T:
    """Drive `task` to its end, handing each progress to `on_progress`; return its result."""
    while True:
        try:
            p = next(task)
        except StopIteration as stop:
            return stop.value
        if on_progress is not None:
            on_progress(p)



def steps(items: list[T], cancel: CancelToken | None, phase: str, unit: str = "") -> Iterator[tuple[T, Progress]]:
    """Each item with the progress after it, checking `cancel` before each one."""
    total = len(items)
    for i, item in enumerate(items):
        if cancel is not None:
            cancel.raise_if_cancelled()
        yield item, Progress(i + 1, total, phase, unit)
