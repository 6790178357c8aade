"""The Messages table reads through the engine's getMessage pages and shows the engine's verdict
on every unit: on a queue with filler, expired and damaged units among real ones, each row is
what MessageStore.get_message answers for that queue offset (the compiled page reader, or its
pure-Python twin under RMQSTORE_PURE_PYTHON=1)."""
from __future__ import annotations

from engine import WHY_EXPIRED, WHY_FILLER, WHY_INVALID, MessageStore
from engine.format.cq_unit import CQ_UNIT_SIZE, FILLER_UNIT
from gui.models import message_table as mt
from gui.models.queue_rows import EXPIRED, FILLER, INVALID, OK, read_rows
from guitest_support import dialogs, open_and_wait, settings, wait_idle, window  # noqa: F401

STATUS = {WHY_FILLER: FILLER, WHY_EXPIRED: EXPIRED, WHY_INVALID: INVALID}


def damaged_queue(root):
    """TopicTest/0 of `small` after its first two commitlog files expired, with units past
    its new min offset turned into a filler, a unit below the commitlog minimum (expired),
    one into the middle of a record and one past the commitlog's end (invalid)."""
    for f in sorted((root / "commitlog").iterdir())[:2]:
        f.unlink()
    with MessageStore.open(root) as s:
        cq = s.find_queue("TopicTest", 0)
        mn, mx = cq.min_offset, cq.max_offset
        assert mx - mn >= 8, "the fixture's queue is too short for this test"
        where = {q: (cq.file_for(q).path, q * CQ_UNIT_SIZE - cq.file_for(q).file_from_offset) for q in range(mn, mx)}
        phy_mid = int(cq.unit(mn + 1)[0]) + 7

    def put(q, raw):
        path, at = where[q]
        with open(path, "r+b") as fh:
            fh.seek(at)
            fh.write(raw)

    put(mn + 2, FILLER_UNIT)
    put(mn + 3, (5).to_bytes(8, "big"))               # below the commitlog minimum: expired
    put(mn + 5, phy_mid.to_bytes(8, "big"))           # inside a record: invalid
    put(mn + 6, (10 ** 12).to_bytes(8, "big"))        # past the commitlog: invalid
    return mn, mx


def engine_answer(store, topic, qid, q):
    """(status, commitLogOffset, msgId) the engine gives for queue offset q alone."""
    res = store.get_message(topic, qid, q, 1)
    why = dict(res.skipped).get(q)
    if why is not None:
        return STATUS[why], None, ""
    m = res.messages[0]
    return OK, m.commitLogOffset, m.msgId


def test_rows_are_the_engines_page_answer(fixture_copy):
    root = fixture_copy("small")
    mn, mx = damaged_queue(root)
    with MessageStore.open(root) as store:
        rows = read_rows(store, "TopicTest", 0, mn - 3, mx + 3)
        assert [r.queueOffset for r in rows] == list(range(mn, mx))
        got = [(r.status, r.commitLogOffset if r.ok else None, r.msgId) for r in rows]
        want = [engine_answer(store, "TopicTest", 0, q) for q in range(mn, mx)]
        assert got == want
        statuses = [r.status for r in rows]
        assert statuses[2:7] == [FILLER, EXPIRED, OK, INVALID, INVALID]
        # block boundaries do not change the answer: rows read in blocks of 3 are the same
        blocks = [r for lo in range(mn, mx, 3) for r in read_rows(store, "TopicTest", 0, lo, lo + 3)]
        assert blocks == rows


def test_table_model_shows_the_engines_rows(qtbot, window, fixture_copy):
    root = fixture_copy("small")
    mn, mx = damaged_queue(root)
    store = open_and_wait(qtbot, window, root)
    window.show_queue("TopicTest", 0, None)
    model = window.browser.model
    qtbot.waitUntil(lambda: model.is_loaded(0), timeout=5000)
    wait_idle(qtbot, window)
    assert model.rowCount() == mx - mn
    for row in range(mx - mn):
        status, phy, msg_id = engine_answer(store, "TopicTest", 0, mn + row)
        qtbot.waitUntil(lambda: model.row_data(row) is not None, timeout=5000)  # its block, read lazily
        r = model.data(model.index(row, 0), mt.ROW_ROLE)
        assert r.status == status
        assert model.data(model.index(row, mt.COL_MSGID)) == (msg_id if status == OK else "")
        if status == OK:
            assert model.data(model.index(row, mt.COL_PHY)) == str(phy)
