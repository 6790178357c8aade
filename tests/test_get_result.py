"""GetMessageResult: the compiled record (engine/accel/_results.pyx) against its pure twin
(engine/format/get_result.py's PyGetMessageResult): the same fields, defaults, equality, JSON,
repr and pickling; and MessageStore.get_message is the compiled page loop itself when built."""
from __future__ import annotations

import pickle

import pytest

from conftest import unpack
from engine import GetMessageResult, MessageStore
from engine import accel
from engine.format import get_result as GR
from engine.store import page as PG
from engine.store import page_reader as PR

KINDS = [GR.PyGetMessageResult] + ([accel.load("_results").GetMessageResult] if accel.load("_results") else [])
FULL = dict(status="FOUND", nextBeginOffset=7, minOffset=1, maxOffset=9, messages=["m"], bufferTotalSize=12,
            skipped=[(3, "why")], messageQueueOffset=[4], messageCount=2, cqType="BatchCQ", innerMessages=[],
            source="local", damaged=[{"queueOffset": 3}])


@pytest.mark.parametrize("cls", KINDS, ids=lambda c: c.__module__)
def test_fields_defaults_and_json_are_the_twins(cls):
    r = cls("NO_MESSAGE_IN_QUEUE", 0, 0, 0)
    assert tuple(getattr(r, n) for n in GR.FIELD_NAMES) == (
        "NO_MESSAGE_IN_QUEUE", 0, 0, 0, [], 0, [], None, None, "SimpleCQ", None, None, None)
    assert r.messages is not cls("x", 0, 0, 0).messages   # a fresh list each
    assert r.to_json() == GR.PyGetMessageResult("NO_MESSAGE_IN_QUEUE", 0, 0, 0).to_json()
    full = cls(**FULL)
    assert tuple(getattr(full, n) for n in GR.FIELD_NAMES) == tuple(FULL.values())
    assert full == cls(*FULL.values()) and full != r and (full == object()) is False
    if cls is GetMessageResult:   # (the twin not chosen has the chosen one's name)
        assert pickle.loads(pickle.dumps(full)) == full
    assert repr(full) == repr(GR.PyGetMessageResult(**FULL))
    assert repr(full).startswith("GetMessageResult(status='FOUND', nextBeginOffset=7")
    assert GR.replaced(full, messages=[], damaged=None) == cls(**{**FULL, "messages": [], "damaged": None})
    with pytest.raises(TypeError):
        hash(full)
    with pytest.raises(AttributeError):
        full.not_a_field = 1   # a record of RocketMQ's fields, nothing else


def test_the_engine_answers_the_built_kind():
    assert GetMessageResult is KINDS[-1]
    if PG.KERNEL is not None:
        assert MessageStore.get_message is PG.KERNEL.get_message   # no Python frame around the loop
    else:
        assert MessageStore.get_message is PR.get_message_reference


@pytest.mark.skipif(PG.KERNEL is None, reason="engine.accel._page not built or RMQSTORE_PURE_PYTHON=1")
def test_compiled_and_reference_answers_are_equal_records(monkeypatch):
    """The same read by the compiled loop and the reference: equal as records (status, offsets,
    sizes, skipped) and in JSON, every status the queue's bounds give."""
    with MessageStore.open(unpack("small")) as s:
        (topic, qid), cq = sorted(s.queues.items())[0]
        mn, mx = cq.min_offset, cq.max_offset
        for off in (mn - 1, mn, mx - 1, mx, mx + 3):
            for broker in (False, True):
                a = s.get_message(topic, qid, off, 4, broker=broker)
                b = PR.get_message_reference(s, topic, qid, off, 4, broker)
                assert type(a) is GetMessageResult
                assert a.to_json() == b.to_json(), (off, broker)
                assert (a.status, a.nextBeginOffset, a.minOffset, a.maxOffset, a.bufferTotalSize, a.skipped) == \
                       (b.status, b.nextBeginOffset, b.minOffset, b.maxOffset, b.bufferTotalSize, b.skipped)
        s.pages_compiled = False   # a queue store the loop does not read: the reference answers
        assert s.get_message(topic, qid, mn, 4).to_json() == PR.get_message_reference(s, topic, qid, mn, 4).to_json()


def test_a_page_answers_its_states_list_with_either_twin():
    """MessagePage's len, bool, [i] and iteration are its state's: the compiled functions
    (engine/accel/_state.pyx, no Python frame) when built, else the page module's own."""
    with MessageStore.open(unpack("small")) as s:
        (topic, qid), cq = sorted(s.queues.items())[0]
        page = s.get_message(topic, qid, cq.min_offset, 5).messages
        empty = PG.MessagePage()
        assert len(page) == 5
        for twin in (PG._BY_STATE, (PG._state_len, PG._state_bool, PG._state_item, PG._state_iter)):
            n, b, item, it = twin
            assert (n(page), b(page), n(empty), b(empty)) == (5, True, 0, False)
            assert [m.queueOffset for m in it(page)] == [item(page, i).queueOffset for i in range(5)]
            assert item(page, -1).queueOffset == item(page, 4).queueOffset
            with pytest.raises(IndexError):
                item(page, 5)
    built = accel.load("_state")
    assert PG.MessagePage.__len__ is (built.state_len if built is not None else PG._state_len)
