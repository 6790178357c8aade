"""The write path: encoding golden vectors, round trips, rebuild equality with RocketMQ's
own files, crash recovery results of the real store, locking."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import CLEAN, CRASHED, assert_same_file_bytes, manifest, unpack
from engine import MessageStore, StoreConfig
from engine.errors import MessageRejectedError, ReadOnlyStoreError, StoreLockedError
from engine.store.index_file import IndexFile
from engine.format.message import MessageDraft, check_record, encode_record

SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64, maxIndexNum=256)


def small_cfg(**kw):
    return StoreConfig.from_mapping({**SMALL, **kw})


def test_encode_matches_spec_vector_16_4():
    d = MessageDraft(topic="TopicTest", body=b"Hello RocketMQ", queueId=3, flag=0,
                     properties={"KEYS": "order-1001", "UNIQ_KEY": "C0A8010A1F9018B4AAC20A1B2C3D0001",
                                 "WAIT": "true", "TAGS": "TagA"},
                     bornTimestamp=1700000000000, bornHost=bytes([192, 168, 1, 10]) + (54321).to_bytes(4, "big"),
                     storeHost=bytes([10, 0, 0, 5]) + (10911).to_bytes(4, "big"))
    rec = encode_record(d, props_trailing=True)
    rec.patch(42, 4660, 1700000000123)
    expected = bytes.fromhex(
        "000000c0daa320a769c865ed00000003" "00000000000000000000002a00000000"
        "0000123400000000000001 8bcfe56800".replace(" ", "") +
        "c0a8010a0000d4310000018bcfe5687b" "0a00000500002a9f0000000000000000"
        "000000000000000e48656c6c6f20526f" "636b65744d5109546f70696354657374"
        "004e4b455953016f726465722d313030" "3102554e49515f4b45590143304138 30".replace(" ", "") +
        "313041314639303138423441414332 30".replace(" ", "") + "41314232433344303030310257414954"
        "017472756502544147530154616741 02".replace(" ", ""))
    assert bytes(rec.data) == expected
    r = check_record(rec.data, 0, len(rec.data), 4660)
    assert r.size == 192 and r.message.tagsCode == 2598919
    assert r.message.msgId == "0A00000500002A9F0000000000001234"


def test_encode_v2_ipv6_spec_vector_16_5():
    topic = "%RETRY%" + "g" * 123
    d = MessageDraft(topic=topic, body=b"x", queueId=0, properties={"TAGS": "TagB"}, reconsumeTimes=1,
                     bornTimestamp=1700000000000,
                     bornHost=bytes.fromhex("20010db8000000000000000000000001") + (40000).to_bytes(4, "big"),
                     storeHost=bytes.fromhex("00000000000000000000000000000001") + (10911).to_bytes(4, "big"))
    rec = encode_record(d, v2=True, props_trailing=True)
    rec.patch(7, 8192, 1700000000123)
    assert len(rec.data) == 257
    assert bytes(rec.data[:64]).hex() == ("00000101daa320ab0cdc168300000000000000000000000000000007"
                                         "0000000000002000000000300000018bcfe5680020010db800000000"
                                         "0000000000000001")
    r = check_record(rec.data, 0, 257, 8192)
    assert r.message.topic == topic and r.message.msgId == "0000000000000000000000000000000100002A9F0000000000002000"
    assert r.message.tagsCode == 2598920


def test_index_file_matches_spec_vector_16_7(tmp_path):
    f = IndexFile(tmp_path / "20231114221320123", 8, 6, writable=True, create=True)
    puts = [("TopicTest#C0A8010A1F9018B4AAC20A1B2C3D0001", 4660, 1700000000123),
            ("TopicTest#order-1001", 4660, 1700000000123), ("TopicTest#order-1002", 4900, 1700000001500),
            ("TopicTest#order-1001", 5200, 1700000003999), ("TopicTest#k5", 5400, 1700000004000)]
    for k, phy, ts in puts:
        assert f.put_key(k, phy, ts)
    assert not f.put_key("TopicTest#x", 6000, 1700000005000)
    data = (tmp_path / "20231114221320123").read_bytes()
    assert data.hex() == (
        "0000018bcfe5687b0000018bcfe577a000000000000012340000000000001518" "0000000400000006"
        "00000000000000040000000300000000000000050000000000000000" "00000001"
        + "00" * 20
        + "7415c8ef00000000000012340000000000000000"
        + "3e37330100000000000012340000000000000000"
        + "3e37330200000000000013240000000100000000"
        + "3e37330100000000000014500000000300000002"
        + "0029e6ac00000000000015180000000300000000")
    out = []
    f.select("TopicTest#order-1001", 64, 0, 2**63 - 1, out)
    assert out == [5200, 4660]
    out = []
    f.select("TopicTest#order-1001", 64, 1700000002000, 2**63 - 1, out)
    assert out == [5200]
    f.close()


def test_round_trip_every_field(tmp_path):
    root = tmp_path / "store"
    sent = []
    with MessageStore.create(root, small_cfg()) as s:
        for i in range(600):
            body = os.urandom(i % 700) if i % 3 else f"body {i} 中文".encode()
            props = {"userId": f"u{i}", "note": "ünïcödé ✓"}
            r = s.put_message("TopicTest" if i % 2 else "Orders_v2-EU", body, queue_id=i % 3, tags=f"Tag{i % 5}",
                              keys=[f"k{i}", "shared"], properties=props, flag=i % 8)
            sent.append((r, body, props))
        batch = s.put_messages("Batch", [b"a", b"bb", b"ccc"], queue_id=1, tags="B")
    with MessageStore.open(root) as s:
        msgs = {m.commitLogOffset: m for m in s.iter_messages()}
        assert len(msgs) == 603
        for r, body, props in sent:
            m = msgs[r.commitLogOffset]
            assert (m.topic, m.queueId, m.queueOffset, m.body, m.msgId, m.uniqKey) == \
                (r.topic, r.queueId, r.queueOffset, body, r.msgId, r.uniqKey)
            assert all(m.properties[k] == v for k, v in props.items())
            got = s.get_message(m.topic, m.queueId, m.queueOffset, 1).messages[0]
            assert got.commitLogOffset == m.commitLogOffset
        assert [m.queueOffset for m in (msgs[b.commitLogOffset] for b in batch)] == [0, 1, 2]
        assert len({msgs[b.commitLogOffset].storeTimestamp for b in batch}) == 1
        assert len(s.query_message("TopicTest", "shared", max_num=0).messages) == 300
        assert [m.commitLogOffset for m in s.query_message("TopicTest", "k7").messages] == [sent[7][0].commitLogOffset]
        for f in s.commitlog.files[:-1]:  # every finished file ends with a blank record
            assert any(r.status.value == "end-of-file" for _, r in s.walk(f.file_from_offset, f.end_offset))
        assert "TopicTest" in s.topic_config()


@pytest.mark.parametrize("name", CLEAN)
def test_rebuild_from_commitlog_is_byte_identical_to_rocketmq(name, fixture_copy):
    """§12.7: delete consumequeue/ and index/, re-dispatch everything: RocketMQ's own files come back."""
    original = unpack(name)
    root = fixture_copy(name)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    cfg = StoreConfig.from_mapping({k: v for k, v in manifest(name)["config"].items()
                                    if k in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
                                             "maxHashSlotNum", "maxIndexNum", "enabledAppendPropCRC")})
    with MessageStore.open(root, cfg, read_only=False):
        pass
    for cq in sorted((original / "consumequeue").rglob("*")):
        if cq.is_file():
            rebuilt = root / cq.relative_to(original)
            assert rebuilt.read_bytes() == cq.read_bytes(), cq
    orig_idx = sorted((original / "index").iterdir())
    new_idx = sorted((root / "index").iterdir())
    assert len(orig_idx) == len(new_idx)
    for a, b in zip(orig_idx, new_idx):
        assert_same_file_bytes(a, b)  # the default index file is 420 MB, nearly all holes


@pytest.mark.parametrize("name", CRASHED)
def test_crash_recovery_reproduces_rocketmq(name, fixture_copy):
    m = manifest(name)
    root = fixture_copy(name)
    cfg = StoreConfig.from_mapping({k: v for k, v in m["config"].items()
                                    if k in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue",
                                             "maxHashSlotNum", "maxIndexNum", "enabledAppendPropCRC")})
    with MessageStore.open(root, cfg, read_only=False) as s:
        assert (root / "abort").exists()
        rr = m["recovery_result"]
        assert s.max_offset == rr["recovered_commitlog_max_offset"]
        assert s.min_offset == rr["recovered_commitlog_min_offset"]
        assert sum(1 for _ in s.iter_messages()) == rr["message_count_in_commitlog"]
        for q in rr["consume_queue_max_offsets"]:
            cq = s.find_queue(q["topic"], q["queueId"])
            got = (cq.min_offset, cq.max_offset) if cq else (0, 0)
            assert got == (q["minOffset"], q["maxOffset"]), q
        assert len(s.index.files) == rr["index_file_count"]
        for q in m["consume_queues"]:
            cq = s.find_queue(q["topic"], q["queueId"])
            if cq is not None:
                units = cq.units(q["minOffset"], q["maxOffset"])
                assert [[q["minOffset"] + i, *map(int, u)] for i, u in enumerate(units.tolist())] == q["units"]
        commit_files = [f.path.name for f in s.commitlog.files]
    assert not (root / "abort").exists()
    expected = [f["name"] for f in m["after_reopen"]["commitlog_files_after_recovery"]]
    assert commit_files == expected
    with MessageStore.open(root, cfg) as s:  # and it reads back the same after a clean close
        assert s.max_offset == m["recovery_result"]["recovered_commitlog_max_offset"]
        assert not s.abort_present


def test_second_writer_is_refused_and_read_only_cannot_write(tmp_path):
    root = tmp_path / "store"
    with MessageStore.create(root, small_cfg()) as s:
        s.put_message("T", b"x")
        code = ("import sys; from engine import MessageStore, StoreConfig\n"
                "try:\n MessageStore.open(sys.argv[1], read_only=False)\n"
                "except Exception as e: print(type(e).__name__); sys.exit(3)\n")
        p = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True)
        assert p.returncode == 3 and "StoreLockedError" in p.stdout
        with pytest.raises(StoreLockedError):
            MessageStore.open(root, read_only=False)
        with MessageStore.open(root) as ro:  # a reader beside the writer is fine
            assert ro.broker_holding_lock() == os.getpid() or ro.broker_holding_lock() is None
            with pytest.raises(ReadOnlyStoreError):
                ro.put_message("T", b"y")


@pytest.mark.parametrize("topic,why", [("bad topic", "characters"), ("x" * 128, "limit"), ("", "empty"),
                                       ("../etc", "characters")])
def test_topic_rules(tmp_path, topic, why):
    with MessageStore.create(tmp_path / "s", small_cfg()) as s:
        with pytest.raises(MessageRejectedError, match=why):
            s.put_message(topic, b"x")


def test_limits(tmp_path):
    with MessageStore.create(tmp_path / "s", small_cfg(maxMessageSize=1000)) as s:
        with pytest.raises(MessageRejectedError, match="maxMessageSize"):
            s.put_message("T", b"x" * 1001)
        with pytest.raises(MessageRejectedError, match="properties"):
            s.put_message("T", b"x", properties={"big": "v" * 40000})
    with MessageStore.create(tmp_path / "s2", small_cfg()) as s:
        with pytest.raises(MessageRejectedError, match="does not fit"):
            s.put_message("T", b"x" * 65500)


def test_retry_topic_over_127_is_v2(tmp_path):
    topic = "%RETRY%" + "g" * 140
    with MessageStore.create(tmp_path / "s", small_cfg()) as s:
        r = s.put_message(topic, b"x", queue_id=0)
        assert s.commitlog.get_message(r.commitLogOffset).is_v2


def test_delayed_message_goes_to_schedule_topic(tmp_path):
    with MessageStore.create(tmp_path / "s", small_cfg()) as s:
        r = s.put_message("T", b"x", queue_id=2, delay_level=3)
        m = s.commitlog.get_message(r.commitLogOffset)
        assert (m.topic, m.queueId, m.properties["REAL_TOPIC"], m.properties["REAL_QID"]) == \
            ("SCHEDULE_TOPIC_XXXX", 2, "T", "2")
        assert s.find_queue("SCHEDULE_TOPIC_XXXX", 2).unit(0)[2] == m.storeTimestamp + 10000


def test_sync_flush_survives_kill(tmp_path):
    """A writer SIGKILLed after acknowledging under SYNC_FLUSH loses nothing it acknowledged."""
    root = tmp_path / "s"
    MessageStore.create(root, small_cfg()).close()
    code = ("import sys; from engine import MessageStore, StoreConfig\n"
            "cfg = StoreConfig.from_mapping(dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000,"
            " maxHashSlotNum=64, maxIndexNum=256, flushDiskType='SYNC_FLUSH'))\n"
            "s = MessageStore.open(sys.argv[1], cfg, read_only=False)\n"
            "i = 0\n"
            "while True:\n"
            "    r = s.put_message('T', b'm%d' % i, keys='k%d' % i)\n"
            "    print(r.commitLogOffset, flush=True); i += 1\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE, text=True)
    acked = []
    while len(acked) < 400:
        acked.append(int(p.stdout.readline()))
    p.kill()
    p.wait()
    assert (root / "abort").exists()
    with MessageStore.open(root, small_cfg(), read_only=False) as s:
        offsets = {m.commitLogOffset for m in s.iter_messages()}
        assert set(acked) <= offsets
        total = s.find_queue("T", 0).max_offset + sum(s.find_queue("T", q).max_offset for q in (1, 2, 3)
                                                      if s.find_queue("T", q))
        assert total == len(offsets)


@pytest.mark.parametrize("name", ["small", "v5"])
def test_reencoding_fixture_messages_reproduces_commitlog_bytes(name):
    """Each record re-encoded from its decoded fields (same store time, hosts, raw properties)
    is byte-identical to what RocketMQ wrote."""
    with MessageStore.open(unpack(name)) as s:
        n = 0
        for m in s.iter_messages():
            d = MessageDraft(topic=m.topic, body=m.body, queueId=m.queueId, flag=m.flag, sysFlag=m.sysFlag,
                             bornTimestamp=m.bornTimestamp, bornHost=m.bornHostBytes, storeHost=m.storeHostBytes,
                             reconsumeTimes=m.reconsumeTimes, preparedTransactionOffset=m.preparedTransactionOffset,
                             propertiesRaw=m.propertiesRaw)
            rec = encode_record(d, v2=m.is_v2)
            rec.patch(m.queueOffset, m.physicalOffsetField, m.storeTimestamp)
            f = s.commitlog.queue.find(m.commitLogOffset)
            pos = m.commitLogOffset - f.file_from_offset
            assert bytes(rec.data) == bytes(f.buf[pos:pos + m.storeSize]), m.commitLogOffset
            n += 1
        assert n == manifest(name)["commitlog"]["count"]


def test_v5_prop_crc_tail_written_and_verified(tmp_path):
    cfg = small_cfg(enabledAppendPropCRC=True, forceVerifyPropCRC=True)
    with MessageStore.create(tmp_path / "s", cfg) as s:
        r = s.put_message("T", b"payload", keys="a b")
        m = s.commitlog.get_message(r.commitLogOffset)
        assert m.propertiesRaw.endswith("\x02") and "__CRC32#" in m.properties
    with MessageStore.open(tmp_path / "s", cfg) as s:  # recovery verifies the whole-record CRC
        assert s.max_offset == r.commitLogOffset + r.storeSize


from hypothesis import HealthCheck, given, settings, strategies as st

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x01\x02 "),
                min_size=1, max_size=12)
# names the store sets or judges itself (hypothesis draws the project's own string constants,
# so it does find them): a user property of that name is refused or rewritten, not round-tripped
_STORE_NAMES = {"TAGS", "KEYS", "UNIQ_KEY", "DELAY", "INNER_NUM", "INNER_BASE", "INNER_MULTI_DISPATCH",
                "INNER_MULTI_QUEUE_OFFSET", "__CRC32#"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.binary(max_size=3000), st.one_of(st.none(), _text), st.lists(_text, max_size=3),
                          st.dictionaries(_text.filter(lambda k: k not in _STORE_NAMES),
                                          _text, max_size=3),
                          st.integers(0, 3), st.integers(-2**31, 2**31 - 1)),
                min_size=1, max_size=25))
def test_hypothesis_round_trip(tmp_path_factory, msgs):
    root = tmp_path_factory.mktemp("rt") / "s"
    with MessageStore.create(root, small_cfg()) as s:
        results = [s.put_message("Topic_h", body, queue_id=q, tags=tags, keys=keys or None, properties=props, flag=flag)
                   for body, tags, keys, props, q, flag in msgs]
    with MessageStore.open(root) as s:
        for (body, tags, keys, props, q, flag), r in zip(msgs, results):
            m = s.commitlog.get_message(r.commitLogOffset)
            assert (m.body, m.tags, m.key_list, m.queueId, m.flag) == (body, tags, keys, q, flag)
            assert all(m.properties[k] == v for k, v in props.items())
            assert s.get_message("Topic_h", q, r.queueOffset, 1).messages[0].commitLogOffset == r.commitLogOffset
            for k in set(keys):
                assert r.commitLogOffset in [x.commitLogOffset for x in s.query_message("Topic_h", k, max_num=0).messages]


def test_rebuild_equals_online_files(tmp_path):
    """CQ and index written online == rebuilt from the commitlog alone (names aside)."""
    from engine.cli.write import rebuild
    root = tmp_path / "s"
    with MessageStore.create(root, small_cfg()) as s:
        for i in range(700):
            s.put_message(f"T{i % 3}", os.urandom(i % 200), tags=f"t{i % 4}", keys=f"k{i} k{i % 10}")
    snap = {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("*") if p.is_file()}
    idx = [p.read_bytes() for p in sorted((root / "index").iterdir())]
    rebuild(root, small_cfg())
    assert {p.relative_to(root): p.read_bytes() for p in (root / "consumequeue").rglob("*") if p.is_file()} == snap
    assert [p.read_bytes() for p in sorted((root / "index").iterdir())] == idx


def test_recover_dry_run_changes_nothing(fixture_copy):
    from test_live_and_cli import run_cli, tree_digest
    root = fixture_copy("crashed_torn")
    before = tree_digest(root)
    code, out, err = run_cli("recover", root, "--dry-run", "--json")
    assert code == 0, err
    import json
    plan = json.loads(out)
    assert tree_digest(root) == before
    assert plan["abnormal"] and plan["commitlogMaxOffset"] == manifest("crashed_torn")["recovery_result"]["recovered_commitlog_max_offset"]
    assert plan["truncatedBytes"] > 0
    code, out, err = run_cli("recover", root, "--json")
    done = json.loads(out)
    assert done["commitlogMaxOffset"] == plan["commitlogMaxOffset"] and done["filesDeleted"] == plan["filesDeleted"]
    code, out, err = run_cli("check", root, "--json")
    assert code == 0, out
