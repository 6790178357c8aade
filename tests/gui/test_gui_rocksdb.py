"""A RocksDB-CQ store (v5_rocksdb_cq) in the browser: its topics and queues in the tree,
messages browsed like any store, the Overview says where the queues are; nothing in the store
folder changes. Screenshot: build/screenshots/rocksdb-store.png."""
from __future__ import annotations

from PySide6.QtWidgets import QTabWidget

from conftest import manifest, unpack
from gui.models import message_table as mt
from guitest_support import dialogs, open_and_wait, screenshot, settings, tree_hashes, wait_idle, window  # noqa: F401


def _select_queue(window, topic, qid):
    item = window.tree_model.find_queue_item(topic, qid)
    assert item is not None, (topic, qid)
    window.tree.setCurrentIndex(window.tree_model.indexFromItem(item))
    window.tabs.setCurrentWidget(window.browser)
    return window.browser.model


def test_rocksdb_store_browses_like_any_store(qtbot, window, dialogs, fixture_copy):
    root = fixture_copy("v5_rocksdb_cq")
    before = tree_hashes(root)
    store = open_and_wait(qtbot, window, root)
    m = manifest("v5_rocksdb_cq")
    for q in m["consume_queues"]:
        assert window.tree_model.find_queue_item(q["topic"], q["queueId"]) is not None
    model = _select_queue(window, "RocksTopic", 0)
    want = next(q for q in m["consume_queues"] if (q["topic"], q["queueId"]) == ("RocksTopic", 0))
    assert model.rowCount() == want["maxOffset"] - want["minOffset"] == 42
    qtbot.waitUntil(lambda: model.is_loaded(0), timeout=5000)
    wait_idle(qtbot, window)
    for row in range(model.rowCount()):
        if model.is_loaded(row):
            assert model.data(model.index(row, mt.COL_PHY)) == str(want["units"][row][2])
            assert model.data(model.index(row, mt.COL_SIZE)) == str(want["units"][row][3])
    window.tree.setCurrentIndex(window.tree_model.indexFromItem(window.tree_model.find_queue_item("RocksTopic", 0)))
    screenshot(window, "rocksdb-store.png")
    ov = window.overview
    qtbot.waitUntil(lambda: ov.overview is not None, timeout=5000)
    assert "RocksDB" in ov.values["ConsumeQueues"].text()
    assert "101635" in ov.values["ConsumeQueues"].text()
    assert ov.values["Messages"].text().startswith("400")
    window.tabs.setCurrentWidget(ov)
    screenshot(window, "rocksdb-overview.png")
    assert not [c for c in dialogs.calls if c[0] == "critical"], dialogs.calls
    window.session.close()
    window.session.wait_open()
    assert tree_hashes(root) == before
    assert store is not None


def test_rocksdb_store_internals_and_read_write_refusal(qtbot, window, dialogs, fixture_copy):
    root = fixture_copy("v5_rocksdb_cq")
    before = tree_hashes(root)
    open_and_wait(qtbot, window, root)
    window.tabs.setCurrentWidget(window.internals)
    qtbot.wait(300)
    wait_idle(qtbot, window, timeout=20000)
    panel = window.internals.findChild(QTabWidget)
    cq_tab = next(i for i in range(panel.count()) if "ConsumeQueue" in panel.tabText(i))
    panel.setCurrentIndex(cq_tab)
    qtbot.wait(300)
    wait_idle(qtbot, window, timeout=20000)
    qtbot.waitUntil(lambda: "in RocksDB" in panel.currentWidget().summary.text(), timeout=10000)
    screenshot(window, "rocksdb-internals.png")
    assert not [c for c in dialogs.calls if c[0] == "critical"], dialogs.calls
    window.open_store(root, read_only=False)
    qtbot.waitUntil(lambda: any(c[0] == "critical" for c in dialogs.calls), timeout=10000)
    assert any("RocksDB" in c[2] for c in dialogs.calls if c[0] == "critical"), dialogs.calls
    window.session.close()
    window.session.wait_open()
    assert tree_hashes(root) == before
