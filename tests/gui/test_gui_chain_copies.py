"""The index chain copies the window makes in the background after an open (gui/chain_copies.py,
engine IndexService.accelerate_task): every index file gets one (or is walked in place when not
in the writer's shape), key searches answer as RocketMQ did, the status bar says what was made,
a close during the run cancels it cleanly, the setting turns it off, and a read-only store keeps
every byte."""
from __future__ import annotations

import threading
import time

import numpy as np

from conftest import manifest, unpack
from engine import MessageStore
from engine.config import INDEX_SLOT_SIZE
from engine.format.index_layout import INDEX_ENTRY_DTYPE, INDEX_HEADER_SIZE
from guitest_support import dialogs, open_and_wait, screenshot, settings, tree_hashes, wait_idle, window  # noqa: F401
from test_gui_search import _search as search_panel


def _case(label_start, topic, key):
    return next(c for c in manifest("small")["key_queries"]["cases"]
                if c["label"].startswith(label_start) and c["topic"] == topic and c["key"] == key)


def _search(qtbot, window, topic, key, cap=64):
    return search_panel(qtbot, window.search, topic, key, cap=cap)


def _wait_copies(qtbot, window, timeout=10000):
    qtbot.waitUntil(lambda: not window.chain_copies.busy, timeout=timeout)
    wait_idle(qtbot, window)


def test_copies_made_after_open_and_store_untouched(qtbot, window, dialogs):
    root = unpack("small")
    before = tree_hashes(root)
    said, order = [], []
    window.chain_copies.status.connect(said.append)
    window.chain_copies.status.connect(lambda t: order.append(("copies", window.session.runner.active)))
    window.browser.model.rowsLoaded.connect(lambda a, b: order.append("page"))
    store = open_and_wait(qtbot, window, root)
    _wait_copies(qtbot, window)
    files = store.index.files
    assert len(files) == 22
    result = window.chain_copies.result
    assert result is not None and not result["refused"] and sorted(result["built"]) == [f.name for f in files]
    assert all(f.accel is not None and f.accel.index_count == f.header.indexCount for f in files)
    assert result["bytes"] == sum(f.accel.nbytes for f in files) > 0
    text = window.chain_copies.label.text()
    assert text.startswith("Key queries: chain copies of 22 index files (") and "walked in place" not in text
    # the first page and the open's own work (overview) came first: nothing else was running
    assert order[0] == "page" and next(o for o in order if o != "page") == ("copies", 0)
    # a status line a file, then the outcome
    assert said == (["Key queries: making chain copies of 22 index files…"]
                    + [f"Key queries: chain copies {i}/22 index files…" for i in range(1, 23)] + [text])
    case = _case("dup key, full range, maxNum 64", "TopicTest", "order-dup-001")
    assert sorted(_search(qtbot, window, "TopicTest", "order-dup-001")) == sorted(case["queryMessage_phyOffsets"])
    assert dialogs.calls == []
    window.close_store()
    assert window.chain_copies.label.text() == "" and said[-1] == ""
    assert tree_hashes(root) == before        # read-only: the copies are memory only


def test_setting_off_makes_no_copy_and_on_again_same_answers(qtbot, window, settings):
    from gui import settings as st
    window.act_chain_copies.setChecked(False)
    assert st.make_chain_copies(settings) is False
    store = open_and_wait(qtbot, window, unpack("small"))
    wait_idle(qtbot, window)
    qtbot.wait(100)
    assert not window.chain_copies.busy and window.chain_copies.result is None
    assert all(f.accel is None for f in store.index.files)
    case = _case("dup key, full range, maxNum 64", "TopicTest", "order-dup-001")
    walked = _search(qtbot, window, "TopicTest", "order-dup-001", cap=0)
    assert len(walked) > 64 and set(case["queryMessage_phyOffsets"]) <= set(walked)
    # on again: the open store gets its copies, and the same answer in the same order
    window.act_chain_copies.setChecked(True)
    assert st.make_chain_copies(settings) is True
    _wait_copies(qtbot, window)
    assert all(f.accel is not None for f in store.index.files)
    assert _search(qtbot, window, "TopicTest", "order-dup-001", cap=0) == walked
    window.resize(1440, 900)
    shot = screenshot(window, "chain_copy_status.png")
    assert shot.stat().st_size > 0
    # off with a store open: the copies are let go of
    window.act_chain_copies.setChecked(False)
    assert all(f.accel is None for f in store.index.files)
    assert "chain copies off" in window.chain_copies.label.text()
    assert _search(qtbot, window, "TopicTest", "order-dup-001", cap=0) == walked


def test_a_damaged_file_is_walked_in_place_and_said(qtbot, window, fixture_copy):
    root = fixture_copy("small")
    names = sorted(p.name for p in (root / "index").iterdir())
    with MessageStore.open(root) as s:
        f = s.index.files[3]
        slot_num, index_num = f.slot_num, f.index_num
        assert f.name == names[3] and f.entry_count > 100
    e = np.memmap(root / "index" / names[3], dtype=INDEX_ENTRY_DTYPE, mode="r+",
                  offset=INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * slot_num, shape=(index_num,))
    e["timeDiff"][100] = -1          # never what the writer makes (a message older than the file's begin)
    e.flush()
    del e
    before = tree_hashes(root)
    store = open_and_wait(qtbot, window, root)
    _wait_copies(qtbot, window)
    result = window.chain_copies.result
    assert result["refused"] == [names[3]] and len(result["built"]) == len(names) - 1
    assert [f.name for f in store.index.files if f.accel is None] == [names[3]]
    text = window.chain_copies.label.text()
    assert "chain copies of 21 index files" in text
    assert text.endswith("; 1 file walked in place (not in the writer's shape)")
    assert names[3] in window.chain_copies.label.toolTip()
    screenshot(window, "chain_copy_refused.png")
    window.close_store()
    assert tree_hashes(root) == before


def _close_while_running(qtbot, window, monkeypatch, how):
    """Start a run whose first copy waits until the run is cancelled, `how()` (a close), and
    check it ended clean: the close came while the run was certainly running (the copy runs
    without the session's lock, so nothing else can hold it). Returns the store it ran for."""
    from engine.store import index_service
    real, started, token = index_service.build_accel, threading.Event(), []

    def slow_build(f, *a, **k):
        started.set()
        deadline = time.monotonic() + 10
        while not (token and token[0].cancelled) and time.monotonic() < deadline:
            time.sleep(0.005)
        return real(f, *a, **k)

    monkeypatch.setattr(index_service, "build_accel", slow_build)
    window.act_chain_copies.setChecked(False)
    store = open_and_wait(qtbot, window, unpack("small"))
    wait_idle(qtbot, window)
    window.act_chain_copies.setChecked(True)       # the run starts, and its first copy waits
    qtbot.waitUntil(lambda: window.chain_copies.lane.busy, timeout=3000)
    token.append(window.chain_copies.lane.task.cancel)
    assert started.wait(5)
    how()                                          # cancels the run, waits for its step to end
    assert token[0].cancelled
    assert store.index.files and sum(f.accel is not None for f in store.index.files) <= 1  # stopped after its first file
    monkeypatch.setattr(index_service, "build_accel", real)
    return store


def test_close_during_the_run_cancels_it(qtbot, window, dialogs, monkeypatch):
    _close_while_running(qtbot, window, monkeypatch, window.close_store)
    assert window.session.store is None
    assert window.chain_copies.runner.pool.activeThreadCount() == 0     # the run has ended
    qtbot.waitUntil(lambda: window.chain_copies.runner.active == 0, timeout=2000)  # its signals, delivered
    assert not window.chain_copies.busy and window.chain_copies.runner.dropped >= 1
    assert window.chain_copies.result is None and window.chain_copies.error == ""
    assert window.chain_copies.label.text() == "" and dialogs.calls == []


def test_quit_during_the_run_cancels_it(qtbot, window, dialogs, monkeypatch):
    _close_while_running(qtbot, window, monkeypatch, window.close)
    assert window.session.store is None and window.chain_copies.runner.pool.activeThreadCount() == 0
    qtbot.wait(50)
    assert window.chain_copies.result is None and window.chain_copies.error == "" and dialogs.calls == []


def test_opening_another_store_during_the_run_cancels_it(qtbot, window, dialogs, monkeypatch):
    other = unpack("v5")

    def open_other():
        with qtbot.waitSignal(window.storeOpened, timeout=10000):
            window.open_store(other)

    old = _close_while_running(qtbot, window, monkeypatch, open_other)
    new = window.session.store
    assert new is not old and new.root == other
    _wait_copies(qtbot, window)                    # the new store gets its own copies
    assert window.chain_copies.result["built"] == [f.name for f in reversed(new.index.files)]
    assert all(f.accel is not None for f in new.index.files) and sum(f.accel is not None for f in old.index.files) <= 1
    assert window.chain_copies.label.text().startswith(f"Key queries: chain copies of {len(new.index.files)} ")
    assert window.chain_copies.error == "" and dialogs.calls == []


def test_summary_line_says_refused_and_over_budget_files():
    from gui.chain_copies import summary
    r = {"built": ["3", "2", "1"], "refused": ["0"], "bytes": 975_123_456, "seconds": 4.21}
    assert summary(r, 5) == ("Key queries: chain copies of 3 index files (975 MB) in 4.2 s; "
                             "1 file walked in place (not in the writer's shape); "
                             "1 file walked in place (over the memory budget)")
    r = {"built": [], "refused": ["1", "0"], "bytes": 0, "seconds": 0.012}
    assert summary(r, 2) == ("Key queries: no chain copy made; "
                             "2 files walked in place (not in the writer's shape)")
    r = {"built": ["0"], "refused": [], "bytes": 91_232, "seconds": 0.0034}
    assert summary(r, 1) == "Key queries: chain copies of 1 index file (91 KB) in 3 ms"


def test_a_crashed_store_serves_the_rebuilt_index_in_the_browser(qtbot, window, dialogs):
    """A crashed store opened read-only: the window's index is what the restarted broker
    serves (engine/store/crash_view.py): chain copies over it, the raw search in RocketMQ's
    order after its recovery, the slot map and the chain view over the in-memory file, and
    not one byte of the store changed."""
    from engine.store.crash_view import CrashIndexService
    from gui.internals.collision_chain import CollisionChainView
    from gui.internals.slot_heatmap import SlotHeatmapView
    root = unpack("crashed")
    before = tree_hashes(root)
    store = open_and_wait(qtbot, window, root)
    _wait_copies(qtbot, window)
    assert isinstance(store.index, CrashIndexService) and dialogs.calls == []
    case = next(c for c in manifest("crashed")["key_queries"]["cases"] if c["queryOffset_phyOffsets"].count(122722) > 1)
    raw = search_panel(qtbot, window.search, case["topic"], case["key"], cap=case["maxNum"], raw=True)
    assert raw == case["queryMessage_phyOffsets"]
    window.resize(1440, 900)
    screenshot(window, "crashed-store-raw-search.png")
    for view in (SlotHeatmapView(), CollisionChainView()):
        qtbot.addWidget(view)
        view.set_store(store)
        view.resize(900, 600)
        view.show()
        qtbot.wait(50)
    window.close_store()
    assert tree_hashes(root) == before
