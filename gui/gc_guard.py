"""Python's cyclic garbage collector runs only on the UI thread while Qt is up.

The collector starts in whichever thread happens to allocate past its threshold; on a pool
thread it can finalize a Qt wrapper (a signal holder, a widget's Python side) whose C++ object
belongs to the UI thread, and Qt crashes. CI saw exactly that: a segfault "Garbage-collecting"
on a worker thread opening a store. So once Qt is up, automatic collection is off and the UI
thread collects on a timer, generation by generation, with the thresholds Python would use.
Reference counting still frees everything without cycles at once, on any thread."""
from __future__ import annotations

import gc
import threading
import time

from PySide6.QtCore import QObject, QTimer

__all__ = ["collect_due", "install"]

_THRESHOLDS = gc.get_threshold()
_guard: list[QObject] = []


FULL_EVERY = 5.0   # seconds at least between full collections (CPython puts them off on a large heap)
_last_full = [0.0]


def collect_due() -> int:
    """Collect the oldest generation whose count is past its threshold, as CPython's collector
    picks one, full collections at most every FULL_EVERY seconds (CPython's own rule, a
    quarter of the heap new since the last, cannot be read from Python); nothing on any
    thread but the main one. Returns what was found unreachable."""
    if threading.current_thread() is not threading.main_thread():
        return 0
    counts = gc.get_count()
    for gen in (2, 1, 0):
        if counts[gen] > _THRESHOLDS[gen]:
            if gen == 2:
                now = time.monotonic()
                if now - _last_full[0] < FULL_EVERY:
                    continue
                _last_full[0] = now
            return gc.collect(gen)
    return 0


def install(parent: QObject, interval_ms: int = 500) -> None:
    """Turn automatic collection off and collect from the UI thread's event loop (idempotent;
    call it on the UI thread with the application as `parent`)."""
    gc.disable()
    if _guard:
        return
    timer = QTimer(parent)
    timer.setObjectName("rmqstore-gc-guard")
    timer.timeout.connect(collect_due)
    timer.start(interval_ms)
    _guard.append(timer)
