"""The cyclic collector never runs on a pool thread once Qt is up (gui.gc_guard)."""
import gc
import threading

from gui import gc_guard


def _collections_by_thread():
    seen: list[str] = []

    def note(phase, info):
        if phase == "start":
            seen.append(threading.current_thread().name)
    return seen, note


def _make_cycles(n: int) -> None:
    for _ in range(n):
        a: list = []
        a.append(a)


def test_pool_threads_never_collect_and_the_ui_thread_does(qapp, qtbot):
    gc_guard.install(qapp)
    assert not gc.isenabled()
    seen, note = _collections_by_thread()
    gc.callbacks.append(note)
    try:
        worker = threading.Thread(target=_make_cycles, args=(50 * gc.get_threshold()[0],), name="pool")
        worker.start()
        worker.join()
        assert "pool" not in seen
        assert gc.get_count()[0] > gc.get_threshold()[0]
        qtbot.waitUntil(lambda: gc.get_count()[0] <= gc.get_threshold()[0], timeout=3000)  # the timer
        assert seen and set(seen) == {threading.main_thread().name}
    finally:
        gc.callbacks.remove(note)


def test_collect_due_does_nothing_off_the_main_thread(qapp):
    gc_guard.install(qapp)
    _make_cycles(2 * gc.get_threshold()[0])
    out: list = []
    t = threading.Thread(target=lambda: out.append(gc_guard.collect_due()))
    t.start()
    t.join()
    assert out == [0] and gc.get_count()[0] > gc.get_threshold()[0]
    assert gc_guard.collect_due() > 0
