"""Message objects as pages and key queries hand them out: built lazily by the compiled reader
(fields made from the mapped record when first read), they must equal the reference decode
(check_record, every field), outlive the store that read them, pickle, and compare like the
dataclass. CommitLog.messages_at (a key query's lookMessageByOffset in one call) must answer
what get_message answers offset by offset, misses included. Run compiled and with
RMQSTORE_PURE_PYTHON=1 (TWIN_TESTS)."""
from __future__ import annotations

import pickle

import pytest

from conftest import unpack
from engine import MessageStore
from engine.format.message import FIELD_NAMES, Message, PyMessage, RecordStatus, check_record

STORES = ["default", "v5", "crashed_badcrc", "v5_lmq", "dledger"]


def fields(m) -> tuple:
    return tuple(getattr(m, n) for n in FIELD_NAMES)


def reference(store, m):
    """check_record's Message for the record m came from."""
    f = store.commitlog.queue.find(m.commitLogOffset)
    r = check_record(f.buf, m.commitLogOffset - f.file_from_offset, f.wrote_position, m.commitLogOffset,
                     store.commitlog.read_opts)
    assert r.status is RecordStatus.MESSAGE
    return r.message


def queue_messages(store):
    for topic, qid in sorted(store.queues):
        cq = store.find_queue(topic, qid)
        off = cq.min_offset
        while off < cq.max_offset:
            res = store.get_message(topic, qid, off, 32, broker=True)
            if res.status != "FOUND":
                break
            yield from res.messages
            off = res.nextBeginOffset


@pytest.mark.parametrize("name", STORES)
def test_page_messages_equal_the_reference_decode_field_by_field(name):
    with MessageStore.open(unpack(name)) as store:
        seen = 0
        for m in queue_messages(store):
            ref = reference(store, m)
            assert fields(m) == fields(ref), m.commitLogOffset
            assert m == ref and not (m != ref)
            assert (m.msgId, m.uniqKey, m.tags, m.keys, m.bornHost, m.storeHost) == \
                (ref.msgId, ref.uniqKey, ref.tags, ref.keys, ref.bornHost, ref.storeHost)
            seen += 1
        assert seen > 50


READ_NAMES = FIELD_NAMES + ("bornHost", "storeHost", "msgId", "uniqKey", "tags", "keys", "transactionType",
                             "end_offset", "is_v2", "key_list")


@pytest.mark.parametrize("name", ["default", "dledger"])
def test_every_read_answers_the_same_by_the_name_code_uses_and_by_any_equal_str(name):
    """The compiled Message answers its fields by the interned name objects code uses (a table
    in its getattro); a str equal to a name but another object takes the descriptors: both
    must give the same value, first read or later, and unknown names still raise."""
    with MessageStore.open(unpack(name)) as store:
        for i, m in enumerate(queue_messages(store)):
            if i >= 150:
                break
            twin = reference(store, m)
            for n in (READ_NAMES if i % 2 else reversed(READ_NAMES)):   # lazy parts made in either order
                other = "".join(list(n))
                assert other is not n
                assert getattr(m, n) == getattr(m, other) == getattr(twin, n), (m.commitLogOffset, n)
            with pytest.raises(AttributeError):
                m.noSuchField
            with pytest.raises(AttributeError):
                getattr(m, "".join(list("noSuchField")))
        m.topic, m.body = "Changed", b"changed"
        assert (m.topic, m.body) == (getattr(m, "".join(list("topic"))), b"changed") == ("Changed", b"changed")


def test_messages_outlive_the_store_and_pickle():
    with MessageStore.open(unpack("default")) as store:
        msgs = list(queue_messages(store))[:200]
        expected = [fields(reference(store, m)) for m in msgs]
    # the store is closed: the maps the messages point into stay readable
    assert [fields(m) for m in msgs] == expected
    back = pickle.loads(pickle.dumps(msgs))
    assert back == msgs and [fields(m) for m in back] == expected
    assert repr(msgs[0]).startswith("Message(topic=" + repr(msgs[0].topic))
    with pytest.raises(TypeError):
        hash(msgs[0])


def test_eager_constructor_and_dataclass_agree():
    args = ("T", 1, 2, 3, 4, 5, 6, 7, 8, b"\x7f\0\0\1\0\0\0\1", 9, b"\x7f\0\0\1\0\0\0\2", 0, 0, b"body",
            "KEYS\x01k1 k2\x02TAGS\x01t", {"KEYS": "k1 k2", "TAGS": "t"}, -626843481, 3)
    a, b = Message(*args), PyMessage(*args)
    assert fields(a) == fields(b) == args + (0,)
    assert (a.keys, a.tags, a.key_list, a.msgId, a.bornHost) == (b.keys, b.tags, b.key_list, b.msgId, b.bornHost)
    assert Message(*args, tagsCode=11).tagsCode == 11
    assert Message(*args) == Message(*args) and Message(*args) != Message(*args, tagsCode=1)
    assert a.to_json() == b.to_json()


@pytest.mark.parametrize("name", ["default", "crashed_badcrc", "dledger"])
def test_messages_at_answers_as_get_message(name):
    with MessageStore.open(unpack(name)) as store:
        cl = store.commitlog
        starts = [m.commitLogOffset for m in queue_messages(store)][:400]
        probes = starts + [o + 1 for o in starts[:50]] + [-5, cl.min_offset - 1, cl.max_offset, cl.max_offset + 10**9]
        expected = [m for m in map(cl.get_message, probes) if m is not None]
        got = cl.messages_at(probes)
        assert len(got) == len(expected) == len(starts)
        assert [fields(m) for m in got] == [fields(m) for m in expected]
        first = store.query_message(got[0].topic, got[0].keys.split()[0], raw=True).messages if got[0].keys else []
    # the store is closed: the key query's messages (on the map, as a page's) read as before
    assert [fields(m) for m in got] == [fields(m) for m in expected]
    assert all(m.body is not None and m.msgId for m in first)


def test_a_single_read_is_a_snapshot_and_a_page_reads_the_map(tmp_path):
    """get_message copies the record (tools compare what they read before and after changing a
    file); a page's messages and a key query's (messages_at: the broker's answer is slices of
    the map too) read the map they point into."""
    with MessageStore.create(tmp_path / "s") as store:
        r = store.put_message("SnapTopic", b"original body", queue_id=0, keys="k1")
        store.flush()
        single = store.commitlog.get_message(r.commitLogOffset)
        queried = store.commitlog.messages_at([r.commitLogOffset])[0]
        page = store.get_message("SnapTopic", 0, 0, 1, broker=True).messages
        f = store.commitlog.queue.find(r.commitLogOffset)
        at = bytes(f.buf).index(b"original body")
        f.buf[at:at + 8] = b"ALTERED "
        assert single.body == b"original body"
        for m in (page[0], queried):
            assert m.body in (b"ALTERED  body", b"original body")  # compiled: the map; pure: decoded at once
        assert store.commitlog.get_message(r.commitLogOffset) is None or \
            store.commitlog.get_message(r.commitLogOffset).body == b"ALTERED  body"


def test_hosts_and_topics_that_change_from_message_to_message(tmp_path):
    """The decoder keeps the last host and topic text it made and hands it out again when the
    next record's bytes are the same: records whose born host, port, topic or store host change
    from one to the next must each read as their own bytes say (IPv4, another port, IPv6)."""
    from engine import StoreConfig
    hosts = ["10.0.0.1:4000", "10.0.0.1:4001", "10.0.0.2:4000", "[2001:db8::7]:4242", "10.0.0.1:4000"]
    topics = ["TopicA", "TopicB", "TopicA", "TopicAB", "TopicA"]
    root = tmp_path / "s"
    with MessageStore.create(root, StoreConfig()) as s:
        for i in range(40):
            s.put_message(topics[i % 5], b"body%d" % i, 0, tags="t", born_host=hosts[(i // 2) % 5])
    for broker_ip in ("10.1.1.1", "10.1.1.2"):   # a second store host: the same file, another broker
        cfg = StoreConfig.from_mapping({"brokerIP1": broker_ip})
        with MessageStore.open(root, cfg, read_only=False) as s:
            for i in range(10):
                s.put_message(topics[i % 5], b"late%d" % i, 0, born_host=hosts[i % 5])
    with MessageStore.open(root) as store:
        seen = set()
        order = []
        for topic in sorted({t for t, _ in store.queues}):
            res = store.get_message(topic, 0, 0, 64, broker=True)
            order += list(res.messages)
        order.sort(key=lambda m: m.commitLogOffset)
        for m in order:   # in log order: every neighbour differs in something
            ref = reference(store, m)
            got = (m.bornHost, m.storeHost, m.topic, m.msgId)
            assert got == (ref.bornHost, ref.storeHost, ref.topic, ref.msgId), m.commitLogOffset
            seen.add(got[:3])
        assert len({b for b, _, _ in seen}) == 4 and len({s for _, s, _ in seen}) == 3
        assert len({t for _, _, t in seen}) == 3
