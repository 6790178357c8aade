"""LMQ multi-dispatch and BatchConsumeQueue, read side, against what RocketMQ 5.3.3 answered
(v5_lmq / v5_batchcq manifests): getMessage for every requested offset (messageQueueOffset and
messageCount included), CQ units, key queries under LMQ names, LMQ offsets, inner messages."""
from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.format.batch_cq_unit import BATCH_CQ_UNIT, BATCH_CQ_UNIT_SIZE, is_batch_cq_topic
from engine.format.inner_batch import decode_inner, encode_inner
from engine.format.lmq import dispatch_plan, java_split, wrap_offsets


def _got(r) -> dict:
    j = r.to_json(with_body=False)
    return dict(status=r.status, nextBeginOffset=r.nextBeginOffset, minOffset=r.minOffset, maxOffset=r.maxOffset,
                phyOffsets=[x.commitLogOffset for x in r.messages], bufferTotalSize=r.bufferTotalSize,
                messageCount=j["messageCount"], queueOffsetsFromMessages=[x.queueOffset for x in r.messages])


@pytest.mark.parametrize("name", ["v5_lmq", "v5_batchcq"])
def test_get_message_answers_every_requested_offset(name):
    m = manifest(name)
    lmq_or_batch = 0
    with MessageStore.open(unpack(name)) as store:
        for c in m["get_message"]:
            r = store.get_message(c["topic"], c["queueId"], c["offset"], c["maxMsgNums"], broker=True)
            got = _got(r)
            assert got == {k: c[k] for k in got}, c
            if c["topic"].startswith("%LMQ%") or c["topic"].startswith("Batch"):
                assert r.messageQueueOffset is not None or not c["messageQueueOffset"], c
                if r.messageQueueOffset is not None:
                    assert r.messageQueueOffset == c["messageQueueOffset"], c
                    assert r.to_json()["messageQueueOffset"] == c["messageQueueOffset"]
                    lmq_or_batch += 1
            elif r.messages:  # an ordinary queue: its own offsets are the stored ones
                assert [x.queueOffset for x in r.messages] == c["messageQueueOffset"]
    assert lmq_or_batch > 50


def test_lmq_queue_offsets_and_units():
    m = manifest("v5_lmq")
    with MessageStore.open(unpack("v5_lmq")) as store:
        for q in m["lmq"]["lmq_queues"]:
            assert store.lmq_queue_offset(q["lmqName"]) == q["getLmqQueueOffset"]
            cq = store.find_queue(q["lmqName"], 0)
            assert cq.max_offset == q["maxOffsetInQueue"] and cq.lmq
        for c in m["consume_queues"]:
            cq = store.find_queue(c["topic"], c["queueId"])
            if not c["exists"]:
                assert cq is None and store.find_batch_queue(c["topic"], c["queueId"]) is None
                continue
            assert (cq.min_offset, cq.max_offset) == (c["minOffset"], c["maxOffset"])
            u = cq.units(c["minOffset"], c["maxOffset"])
            assert [[int(a), int(b), int(t)] for a, b, t in u.tolist()] == [row[2:5] for row in c["units"]]
        lq = [q for q in store.queue_list() if q["lmq"]]
        assert sorted(q["topic"] for q in lq) == ["%LMQ%a", "%LMQ%b", "%LMQ%c", "%LMQ%room-1"]


def test_lmq_dispatch_positions_come_from_the_cq_and_flag_the_bug():
    """Every record's LMQ positions: the CQ's, which disagree with INNER_MULTI_QUEUE_OFFSET
    after the "%LMQ%c,plainName" records (RocketMQ's [bug] case)."""
    m = manifest("v5_lmq")
    units = {}  # (lmq, phy) -> offset, from the manifest's CQ answers
    for c in m["consume_queues"]:
        if c["topic"].startswith("%LMQ%"):
            for row in c["units"]:
                units[(c["topic"], row[2])] = row[1]
    mismatches = bugs = 0
    with MessageStore.open(unpack("v5_lmq")) as store:
        for rec in m["messages"]:
            msg = store.look_message_by_offset(rec["phyOffset"])
            d = store.lmq_dispatch(msg)
            if "INNER_MULTI_DISPATCH" not in rec["properties"]:
                assert d is None
                continue
            for q in d["queues"]:
                assert q["queueOffset"] == units.get((q["lmqName"], rec["phyOffset"])), (rec["phyOffset"], q)
                mismatches += q["mismatch"]
            bugs += d["problem"] == "[bug]"
            if d["problem"] == "[bug]":
                assert not any(q["dispatched"] for q in d["queues"])
        # the note's example: the record at 9646 says 6 for %LMQ%c, its unit is at 4
        d = store.lmq_dispatch(store.look_message_by_offset(9646))
        c = [q for q in d["queues"] if q["lmqName"] == "%LMQ%c"][0]
        assert (c["propertyOffset"], c["queueOffset"], c["mismatch"]) == (6, 4, True) and d["mismatch"]
    assert mismatches > 0 and bugs > 0


def test_key_queries_under_lmq_names_return_nothing():
    m = manifest("v5_lmq")
    pairs = m["key_queries"]["all_pairs"]
    lmq = [p for p in pairs if p[0].startswith("%LMQ%")]
    assert lmq and all(not p[2] for p in lmq)
    with MessageStore.open(unpack("v5_lmq")) as store:
        for topic, key, phys in lmq[:60] + [p for p in pairs if not p[0].startswith("%LMQ%")][:60]:
            got = store.query_message(topic, key, max_num=64)
            assert sorted(x.commitLogOffset for x in got.messages) == sorted(phys), (topic, key)


def test_batch_cq_units_bounds_and_lookup():
    m = manifest("v5_batchcq")
    raw = {r["file"]: r["units"] for r in m["batch_cq_raw_units"]}
    with MessageStore.open(unpack("v5_batchcq")) as store:
        assert store.cfg.mapperFileSizeBatchConsumeQueue == 1840
        for c in m["consume_queues"]:
            if c["cqType"] != "BatchCQ":
                assert store.find_queue(c["topic"], c["queueId"]) is not None
                continue
            b = store.find_batch_queue(c["topic"], c["queueId"])
            assert store.find_queue(c["topic"], c["queueId"]) is None
            assert (b.min_offset, b.max_offset) == (c["minOffset"], c["maxOffset"])
            for row in c["units"]:  # get(o): the unit containing o
                u = b.unit(row[0])
                assert [u["msgBaseOffset"], u["commitLogOffset"], u["size"], u["tagsCode"], u["batchSize"],
                        u["compactedOffset"]] == row[1:7], (c["topic"], row)
            distinct = [[x["msgBaseOffset"], x["commitLogOffset"], x["size"], x["tagsCode"], x["batchSize"],
                         x["compactedOffset"]] for x in store.batch_units(c["topic"], c["queueId"])]
            assert distinct == c["iterateFrom_min"]
            f = f"batchconsumequeue/{c['topic']}/{c['queueId']}/00000000000000000000"
            assert [[x["commitLogOffset"], x["size"], x["tagsCode"], x["storeTimestamp"], x["msgBaseOffset"],
                     x["batchSize"], x["compactedOffset"]] for x in store.batch_units(c["topic"], c["queueId"])] \
                == [r[1:8] for r in raw[f]]
            assert b.unit(c["minOffset"] - 1) is None
        kinds = {(q["topic"], q["cqType"]) for q in store.queue_list()}
        assert ("BatchTopic", "BatchCQ") in kinds and ("BatchTopic2", "BatchCQ") in kinds
        assert ("TopicTest", "SimpleCQ") in kinds and "BatchTopic" in store.topics()


def test_inner_messages_of_every_batch_record():
    """Each record's inner messages: their own UNIQ_KEY/keys, queue offsets base + i, and the
    INNER_NUM count; the plain record in a BatchCQ is a batch of one."""
    m = manifest("v5_batchcq")
    with MessageStore.open(unpack("v5_batchcq")) as store:
        for c in m["consume_queues"]:
            if c["cqType"] != "BatchCQ":
                continue
            rows = store.inner_messages(c["topic"], c["queueId"], c["minOffset"], c["maxOffset"])
            assert [b.queueOffset for b in rows] == list(range(c["minOffset"], c["maxOffset"]))
            for b in rows:
                rec = [r for r in m["messages"] if r["phyOffset"] == b.record.commitLogOffset][0]
                if rec["sysFlag"] & 0x80:
                    inner = decode_inner(base64.b64decode(rec["body"]), rec["queueOffset"])
                    assert len(inner) == int(rec["properties"]["INNER_NUM"]) == b.unit["batchSize"]
                    assert b.uniqKey == inner[b.queueOffset - rec["queueOffset"]].uniqKey
                    assert b.uniqKey != rec["uniqKey"] and b.inner.queueOffset == b.queueOffset
                else:
                    assert b.inner is None and b.uniqKey == rec["uniqKey"]
        # get on an offset inside a batch: the records, their inner messages, the one asked for
        r = store.get_message("BatchTopic", 0, 2, 32)
        j = r.to_json()
        assert j["messageCount"] == 31 and j["cqType"] == "BatchCQ"
        assert [x["queueOffset"] for x in j["innerMessages"]] == list(range(0, 31))
        assert j["innerMessages"][2]["innerMessage"]["queueOffset"] == 2


def test_inner_batch_codec_round_trip():
    body = encode_inner([(b"", {"KEYS": "a b", "UNIQ_KEY": "U1"}, 0), (b"x" * 9, "TAGS\x01t\x02", 3)])
    inner = decode_inner(body, 7)
    assert [(i.queueOffset, i.keys, i.tags, i.flag, i.body) for i in inner] == \
        [(7, "a b", None, 0, b""), (8, None, "t", 3, b"x" * 9)]
    assert encode_inner([(i.body, i.propertiesRaw, i.flag) for i in inner]) == body
    u = BATCH_CQ_UNIT.pack(1, 2, 3, 4, 5, 6, -1, 0)
    assert len(u) == BATCH_CQ_UNIT_SIZE == 46 and u[28:36] == (5).to_bytes(8, "big")
    assert is_batch_cq_topic({"attributes": {"queue.type": "BatchCQ"}})
    assert not is_batch_cq_topic({"attributes": {}}) and not is_batch_cq_topic(None)


def test_lmq_property_rules():
    assert java_split("%LMQ%a,") == ["%LMQ%a"] and java_split(",") == [] and java_split("a,,b") == ["a", "", "b"]
    assert wrap_offsets("%LMQ%c,plainName", lambda n: 4, True) == "4,"
    assert wrap_offsets("x,%LMQ%a", lambda n: 5, True) == ",5"
    p = {"INNER_MULTI_DISPATCH": "%LMQ%c,plainName", "INNER_MULTI_QUEUE_OFFSET": "4,"}
    assert dispatch_plan("T", p, True, True) == ([], "[bug]")
    p = {"INNER_MULTI_DISPATCH": "%LMQ%a/b,%LMQ%a", "INNER_MULTI_QUEUE_OFFSET": "1,2"}
    assert dispatch_plan("T", p, True, True) == ([("%LMQ%a", "2")], None)
    assert dispatch_plan("%RETRY%g", p, True, True) == ([], None)
    assert dispatch_plan("T", {"INNER_MULTI_DISPATCH": "x,%LMQ%a", "INNER_MULTI_QUEUE_OFFSET": ",5"},
                         True, True) == ([], "unparsable")


def _hashes(root):
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", ["v5_lmq", "v5_batchcq"])
def test_cli_info_and_get_json_leave_the_store_untouched(name):
    root = unpack(name)
    before = _hashes(root)
    run = lambda *a: subprocess.run([sys.executable, "-m", "engine.cli.app", *a], capture_output=True, text=True)
    info = json.loads(run("info", str(root), "--json").stdout)
    kinds = {q["cqType"] for q in info["queues"]}
    if name == "v5_batchcq":
        assert kinds == {"SimpleCQ", "BatchCQ"}
        out = run("get", str(root), "BatchTopic", "1", "5", "--json")
        j = json.loads(out.stdout)
        assert j["messageCount"] == 23 and j["messageQueueOffset"] == [2, 8, 16]
        assert j["innerMessage"]["queueOffset"] == 5 and j["innerMessage"]["record"]["commitLogOffset"] == 20278
        human = run("get", str(root), "BatchTopic", "1", "5").stdout
        assert "20278" in human
        with MessageStore.open(root) as store:
            inner = store.inner_messages("BatchTopic", 1, 5, 6)[0]
        j = json.loads(run("msgid", str(root), inner.uniqKey, "--json").stdout)
        assert j["kind"] == "inner" and j["innerMessages"][0]["queueOffset"] == 5
        assert j["messages"][0]["commitLogOffset"] == 20278
    else:
        assert any(q["lmq"] for q in info["queues"])
        j = json.loads(run("get", str(root), "%LMQ%c", "0", "4", "--json").stdout)
        assert j["messageQueueOffset"][0] == 4 and j["messages"][0]["commitLogOffset"] == 9646
        lmq = j["messages"][0]["lmqDispatch"]
        assert [q for q in lmq["queues"] if q["lmqName"] == "%LMQ%c"][0]["queueOffset"] == 4
    assert _hashes(root) == before


@pytest.mark.parametrize("name", ["v5_lmq", "v5_batchcq"])
def test_compiled_and_reference_getmessage_agree(name):
    """The compiled getMessage hands LMQ and BatchCQ queues to the reference; plain queues stay
    compiled: both answers are the same (with or without RMQSTORE_PURE_PYTHON)."""
    with MessageStore.open(unpack(name)) as store:
        for q in store.queue_list():
            for off in (q["minOffset"], (q["minOffset"] + q["maxOffset"]) // 2, q["maxOffset"] - 1):
                for broker in (False, True):
                    a = store.get_message(q["topic"], q["queueId"], off, 16, broker=broker)
                    b = store._get_message_py(q["topic"], q["queueId"], off, 16, broker=broker)
                    assert a.to_json() == b.to_json(), (q, off, broker)


def test_batch_queue_time_lookup_uses_the_units_store_times():
    m = manifest("v5_batchcq")
    raw = [r for r in m["batch_cq_raw_units"] if r["file"] == "batchconsumequeue/BatchTopic/1/00000000000000000000"][0]
    with MessageStore.open(unpack("v5_batchcq")) as store:
        for _, phy, size, tags, ts, base, n, _, _ in raw["units"]:
            assert store.store_time_at("BatchTopic", 1, base + n - 1) == ts
            got = store.get_offset_in_queue_by_time("BatchTopic", 1, ts, "lower")
            # 5.3.3: at or after the last unit's time, that unit's base; else the first unit stored at or after
            first_at = next(u[5] for u in raw["units"] if u[4] >= ts)
            assert got == (raw["units"][-1][5] if ts >= raw["units"][-1][4] else first_at)
            assert store.store_time_at("BatchTopic", 1, got) == ts
        assert store.earliest_message_time("BatchTopic", 1) == raw["units"][0][4]
        # after every message: the base of the file's last unit (BatchConsumeQueue.getOffsetInQueueByTime
        # returns a unit's base, never the queue's max as a plain ConsumeQueue does)
        last = raw["units"][-1]
        assert store.get_offset_in_queue_by_time("BatchTopic", 1, 1 << 62, "lower") == last[5] == 101
        assert store.get_offset_in_queue_by_time("BatchTopic", 1, last[4], "upper") == last[5]


def test_check_accepts_the_real_stores_and_finds_a_damaged_batch_unit(fixture_copy):
    from engine.analysis.check import check_store
    for name in ("v5_lmq", "v5_batchcq"):
        with MessageStore.open(unpack(name)) as store:
            r = check_store(store)
            assert r["problemCount"] == 0, r["problems"][:3]
    root = fixture_copy("v5_batchcq")
    f = root / "batchconsumequeue" / "BatchTopic2" / "0" / "00000000000000000000"
    b = bytearray(f.read_bytes())
    b[46 + 8:46 + 12] = (1).to_bytes(4, "big")  # the second unit's record size
    f.write_bytes(bytes(b))
    lmq = fixture_copy("v5_lmq")
    g = lmq / "consumequeue" / "%LMQ%b" / "0" / "00000000000000000000"
    c = bytearray(g.read_bytes())
    c[3 * 20 + 12:3 * 20 + 20] = (77).to_bytes(8, "big")  # a tagsCode of %LMQ%b unit 3
    g.write_bytes(bytes(c))
    with MessageStore.open(root, tolerant=True) as store:
        probs = check_store(store)["problems"]
    assert [(p["kind"], p["offset"]) for p in probs] == [("batch-cq-unit", 46)]
    with MessageStore.open(lmq, tolerant=True) as store:
        probs = check_store(store)["problems"]
    assert [(p["kind"], p["offset"]) for p in probs] == [("cq-unit", 60)]
