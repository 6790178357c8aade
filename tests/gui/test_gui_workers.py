"""Workers: results and progress arrive on the UI thread, cancel stops a generator between
steps, a newer request makes an older result stale, errors reach their callback."""
from __future__ import annotations

import threading
import time

from gui.workers import Lane, TaskRunner


def test_generator_progress_and_result_on_the_ui_thread(qtbot):
    runner = TaskRunner()
    seen = {"progress": [], "threads": set()}
    result = []

    def work(n):
        for i in range(n):
            yield i + 1, n
        return sum(range(n)), threading.current_thread() is threading.main_thread()

    def on_progress(p):
        seen["progress"].append((p.done, p.total))
        seen["threads"].add(threading.current_thread() is threading.main_thread())

    with qtbot.waitSignal(runner.idle, timeout=5000):
        runner.submit(work, 5, on_result=result.append, on_progress=on_progress)
    assert result == [(10, False)]  # computed off the UI thread ...
    assert seen["progress"] == [(i, 5) for i in range(1, 6)] and seen["threads"] == {True}  # ... shown on it


def test_cancel_stops_a_generator_between_steps(qtbot):
    runner = TaskRunner()
    steps, closed, result = [], [], []

    def forever():
        try:
            while True:
                steps.append(1)
                time.sleep(0.005)
                yield len(steps), 0
        finally:
            closed.append(True)

    task = runner.submit(forever, on_result=result.append)
    qtbot.waitUntil(lambda: len(steps) > 3, timeout=5000)
    with qtbot.waitSignal(runner.idle, timeout=5000):
        task.cancel.cancel()
    n = len(steps)
    time.sleep(0.05)
    assert len(steps) == n and closed == [True] and result == []


def test_lane_keeps_only_the_newest_result(qtbot):
    runner = TaskRunner()
    lane = Lane(runner)
    got = []
    release = threading.Event()

    def slow():
        release.wait(5)
        return "old"

    lane.submit(slow, on_result=got.append)
    lane.submit(lambda: "new", on_result=got.append)
    release.set()
    qtbot.waitUntil(lambda: runner.active == 0, timeout=5000)
    assert got == ["new"]


def test_errors_reach_their_callback(qtbot):
    runner = TaskRunner()
    errors = []

    def boom():
        raise ValueError("bad bytes at offset 42")

    with qtbot.waitSignal(runner.idle, timeout=5000):
        runner.submit(boom, on_error=errors.append)
    assert len(errors) == 1 and str(errors[0]) == "bad bytes at offset 42"


def test_session_generators_hold_the_lock_per_step(qtbot):
    from gui.workers import _locked_generator
    lock = threading.RLock()
    holds = []

    def gen():
        for i in range(3):
            holds.append(lock._is_owned())
            yield i, 3
        return "done"

    wrapped = _locked_generator(gen(), lock)
    assert list(wrapped) == [(0, 3), (1, 3), (2, 3)]
    assert holds == [True, True, True] and not lock._is_owned()
