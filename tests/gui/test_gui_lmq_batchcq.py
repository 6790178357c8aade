"""The browser on 5.x LMQ and BatchCQ stores (the real v5_lmq / v5_batchcq fixtures): the tree
groups the %LMQ% queues and marks BatchCQ topics; an LMQ queue browses like any queue and the
detail's "LMQ / Batch" tab shows where the record went (positions from the CQs, the mismatch
RocketMQ's [bug] leaves flagged); a BatchCQ queue has one row per inner message, and the
detail shows that inner message with its batch."""
from __future__ import annotations

from conftest import unpack
from gui.models import message_table as mt
from gui.models.topic_tree import KIND_ROLE, TOPIC_ROLE
from guitest_support import dialogs, open_and_wait, screenshot, settings, wait_idle, window  # noqa: F401


def _children(item):
    return [item.child(i) for i in range(item.rowCount())]


def test_lmq_queue_browses_and_shows_its_dispatch(qtbot, window):
    open_and_wait(qtbot, window, unpack("v5_lmq"))
    tm = window.tree.tree_model
    assert tm.lmq_item is not None and tm.lmq_item.data(KIND_ROLE) == "lmqs"
    assert sorted(c.data(TOPIC_ROLE) for c in _children(tm.lmq_item)) == ["%LMQ%a", "%LMQ%b", "%LMQ%c", "%LMQ%room-1"]
    assert not any(c.data(TOPIC_ROLE).startswith("%LMQ%") for c in _children(tm.topics_item))
    window.show_queue("%LMQ%c", 0, None)
    b, d = window.browser, window.browser.detail
    qtbot.waitUntil(lambda: b.model.rowCount() == 41 and b.model.is_loaded(4), timeout=5000)
    wait_idle(qtbot, window)
    assert b.model.data(b.model.index(4, mt.COL_PHY)) == "9646"
    b.select_row(4)
    qtbot.waitUntil(lambda: d.message is not None and d.message.commitLogOffset == 9646, timeout=5000)
    qtbot.waitUntil(lambda: "LMQ dispatch" in d.dispatch.toPlainText(), timeout=5000)
    text = d.dispatch.toPlainText()
    assert "%LMQ%c / 0" in text and "MISMATCH" in text
    d.tabs.setCurrentWidget(d.dispatch)
    window.tree.select_queue("%LMQ%c", 0)
    qtbot.wait(50)
    screenshot(window, "lmq-queue.png")


def test_batchcq_queue_one_row_per_inner_message(qtbot, window):
    store = open_and_wait(qtbot, window, unpack("v5_batchcq"))
    tm = window.tree.tree_model
    names = {c.data(TOPIC_ROLE): c.text() for c in _children(tm.topics_item)}
    assert names["BatchTopic"].endswith("[BatchCQ]") and names["TopicTest"] == "TopicTest"
    window.show_queue("BatchTopic", 1, None)
    b, d = window.browser, window.browser.detail
    qtbot.waitUntil(lambda: b.model.rowCount() == 102 and b.model.is_loaded(0), timeout=5000)
    wait_idle(qtbot, window)
    rows = store.inner_messages("BatchTopic", 1, 0, 102)
    for row in (0, 1, 2, 7, 101):
        qtbot.waitUntil(lambda: b.model.row_data(row) is not None, timeout=5000)
        r = b.model.row_data(row)
        assert (r.queueOffset, r.commitLogOffset, r.uniqKey) == (row, rows[row].record.commitLogOffset,
                                                                 rows[row].uniqKey)
    b.select_row(5)
    qtbot.waitUntil(lambda: d.message is not None and d.inner is not None, timeout=5000)
    assert d.inner.queueOffset == 5 and d.message.commitLogOffset == 20278
    assert d.body.body == rows[5].body and "inner message #4 of the batch" in d.title.text()
    qtbot.waitUntil(lambda: "Inner batch" in d.dispatch.toPlainText(), timeout=5000)
    assert "msgBaseOffset 2  batchSize 6" in d.dispatch.toPlainText()
    d.tabs.setCurrentWidget(d.dispatch)
    window.tree.select_queue("BatchTopic", 1)
    qtbot.wait(50)
    screenshot(window, "batchcq-queue.png")


def test_filter_finds_an_inner_message_by_its_own_key():
    from engine import MessageStore
    from engine.tasks import run
    from gui.models.filters import MessageFilter, scan_queue
    with MessageStore.open(unpack("v5_batchcq")) as store:
        rows = store.inner_messages("BatchTopic", 1, 0, 102)
        want = rows[33]
        assert want.inner is not None and want.uniqKey != want.record.uniqKey
        for flt in (MessageFilter(key=want.uniqKey), MessageFilter(key=want.keys.split()[0])):
            matches, end = run(scan_queue(store, "BatchTopic", 1, 0, 102, flt, page=10))
            assert [m.queueOffset for m in matches] == [33] and end == 102
        matches, _ = run(scan_queue(store, "BatchTopic", 1, 0, 102, MessageFilter(tags="TagS")))
        assert [m.queueOffset for m in matches] == [101]  # the plain record: a batch of one


def test_overview_counts_lmq_copies_once_and_batch_messages():
    from engine import MessageStore
    from gui.models.overview import compute_overview
    with MessageStore.open(unpack("v5_lmq")) as store:
        ov = compute_overview(store)
        assert ov.message_count == 220  # the records, not their 267 LMQ copies again
        assert {t.topic: t.messages for t in ov.topics}["%LMQ%a"] == 99
    with MessageStore.open(unpack("v5_batchcq")) as store:
        ov = compute_overview(store)
        assert ov.message_count == 650 + 51  # inner messages of the BatchCQ topics, plus the plain ones
        bt = {t.topic: t for t in ov.topics}["BatchTopic"]
        assert bt.messages == 350 and bt.first_time > 0 and bt.last_time >= bt.first_time
