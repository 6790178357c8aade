"""LMQ multi-dispatch and BatchCQ, write side: the fixture's puts (generator.puts, with the
records as RocketMQ 5.3.3 stored them, minus the properties the store adds) replayed into a
fresh store with the same config through our writer and dispatcher; the LMQ and BatchCQ
files must come out byte for byte as RocketMQ wrote them."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest

from conftest import manifest, unpack
from engine import MessageStore, StoreConfig
from engine.errors import MessageRejectedError
from engine.format.config_json import store_config_json
from engine.format.message import MessageDraft, parse_host
from engine.format.properties import parse_properties

STORE_ADDED = ("INNER_MULTI_QUEUE_OFFSET", "INNER_BASE")


def _host(s: str) -> bytes:
    addr, port = parse_host(s.lstrip("/"))
    return addr + port.to_bytes(4, "big")


def _draft(rec: dict) -> MessageDraft:
    raw = "".join(f"{seg}\x02" for seg in rec["propertiesRaw"].split("\x02")[:-1]
                  if seg.partition("\x01")[0] not in STORE_ADDED)
    return MessageDraft(topic=rec["topic"], body=base64.b64decode(rec["body"]), queueId=rec["queueId"],
                        flag=rec["flag"], properties=parse_properties(raw), sysFlag=rec["sysFlag"],
                        bornTimestamp=rec["bornTimestamp"], bornHost=_host(rec["bornHost"]),
                        storeHost=_host(rec["storeHost"]), reconsumeTimes=rec["reconsumeTimes"],
                        preparedTransactionOffset=rec["preparedTransactionOffset"], propertiesRaw=raw)


def replay(name: str, root: Path, **settings) -> MessageStore:
    m = manifest(name)
    c = m["config"]
    cfg = StoreConfig(mappedFileSizeCommitLog=c["mappedFileSizeCommitLog"],
                      mappedFileSizeConsumeQueue=c["mappedFileSizeConsumeQueue"], maxHashSlotNum=c["maxHashSlotNum"],
                      maxIndexNum=c["maxIndexNum"], enableLmq=c["enableLmq"],
                      enableMultiDispatch=c["enableMultiDispatch"], **settings)
    cfg.explicit = {"mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum",
                    *settings}
    if c.get("topicConfigTable"):
        (root / "config").mkdir(parents=True)
        store_config_json(root / "config", "topics.json", {"topicConfigTable": {
            t: dict(tc, topicName=t) for t, tc in c["topicConfigTable"].items()}})
    by_phy = {r["phyOffset"]: r for r in m["messages"]}
    store = MessageStore.create(root, cfg)
    w = store.writer
    for p in m["generator"]["puts"]:
        rec = by_phy[p["wroteOffset"]]
        w.clock = lambda ts=rec["storeTimestamp"]: ts
        r = w.put([_draft(rec)])[0]
        assert (r.commitLogOffset, r.queueOffset) == (p["wroteOffset"], p["logicsOffset"]), p
        got = store.look_message_by_offset(r.commitLogOffset).properties
        for k in STORE_ADDED:  # what our store added is what RocketMQ's added
            assert got.get(k) == rec["properties"].get(k), (p, k)
    return store


def _files(root: Path, sub: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / sub).rglob("*")) if p.is_file()}


def test_lmq_replay_writes_rocketmq_s_lmq_queues(tmp_path):
    ours = tmp_path / "s"
    store = replay("v5_lmq", ours)
    ahead = 1 + max(int(o) for r in manifest("v5_lmq")["messages"]
                    for n, o in zip(r["properties"].get("INNER_MULTI_DISPATCH", "").split(","),
                                    r["properties"].get("INNER_MULTI_QUEUE_OFFSET", "").split(",")) if n == "%LMQ%c" and o)
    try:  # the counter ran ahead of the queue (41 units), as RocketMQ's did before its restart
        assert store.lmq_queue_offset("%LMQ%c") == ahead > 41
    finally:
        store.close()
    want = _files(unpack("v5_lmq"), "consumequeue")
    got = _files(ours, "consumequeue")
    lmq = [k for k in want if "%LMQ%" in k]
    assert len(lmq) == 6 and "consumequeue/plainName" not in " ".join(got)
    assert {k: got.get(k) for k in want} == want
    assert _files(ours, "commitlog") == _files(unpack("v5_lmq"), "commitlog")
    m = manifest("v5_lmq")
    with MessageStore.open(ours) as s:  # reopened: the counters are the CQ's max again
        for q in m["lmq"]["lmq_queues"]:
            assert s.lmq_queue_offset(q["lmqName"]) == q["getLmqQueueOffset"]


def test_batchcq_replay_writes_rocketmq_s_batch_queues(tmp_path):
    ours = tmp_path / "s"
    replay("v5_batchcq", ours, mapperFileSizeBatchConsumeQueue=1840).close()
    want = _files(unpack("v5_batchcq"), "batchconsumequeue")
    assert len(want) == 8
    assert _files(ours, "batchconsumequeue") == want
    assert _files(ours, "consumequeue") == _files(unpack("v5_batchcq"), "consumequeue")
    with MessageStore.open(ours) as s:
        assert s.get_message("BatchTopic", 1, 5, 32, broker=True).messageQueueOffset == [2, 8, 16]


def test_inner_batch_put_api_and_rejections(tmp_path):
    cfg = StoreConfig(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64,
                      maxIndexNum=256, mapperFileSizeBatchConsumeQueue=460)
    (tmp_path / "s" / "config").mkdir(parents=True)
    store_config_json(tmp_path / "s" / "config", "topics.json", {"topicConfigTable": {
        "B": {"topicName": "B", "readQueueNums": 1, "writeQueueNums": 1, "attributes": {"queue.type": "BatchCQ"}}}})
    with MessageStore.create(tmp_path / "s", cfg) as s:
        assert s.cfg.mapperFileSizeBatchConsumeQueue == 460
        for i in range(12):
            s.put_inner_batch("B", [(f"m{i}-{k}".encode(), {"KEYS": f"k{i}-{k}"}) for k in range(i % 3 + 1)],
                              queue_id=0)
        s.put_message("B", b"plain", queue_id=0, keys="solo")
        with pytest.raises(MessageRejectedError):
            s.put_inner_batch("NotBatch", [(b"x", {})], queue_id=0)
        with pytest.raises(MessageRejectedError):
            s.put_message("NotBatch", b"x", properties={"INNER_NUM": "2"})
    with MessageStore.open(tmp_path / "s") as s:
        b = s.find_batch_queue("B", 0)
        assert (b.min_offset, b.max_offset) == (0, 25) and len(b.queue.files) == 2  # 10 units a file
        rows = s.inner_messages("B", 0, 0, 25)
        assert [r.keys for r in rows[:4]] == ["k0-0", "k1-0", "k1-1", "k2-0"] and rows[-1].keys == "solo"
        r = s.get_message("B", 0, 16, 32, broker=True)  # the broker's page stops at the CQ file end
        assert (r.messageQueueOffset, r.nextBeginOffset, r.messageCount) == ([15, 18], 19, 4)
        r = s.get_message("B", 0, 16, 32)
        assert (r.messageQueueOffset, r.nextBeginOffset, r.messageCount) == ([15, 18, 19, 21, 24], 25, 10)


def test_a_read_only_open_follows_a_writer_of_batch_queues(tmp_path):
    cfg = StoreConfig(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64,
                      maxIndexNum=256, mapperFileSizeBatchConsumeQueue=460)
    (tmp_path / "s" / "config").mkdir(parents=True)
    store_config_json(tmp_path / "s" / "config", "topics.json", {"topicConfigTable": {
        t: {"topicName": t, "readQueueNums": 1, "writeQueueNums": 1, "attributes": {"queue.type": "BatchCQ"}}
        for t in ("B", "C")}})
    w = MessageStore.create(tmp_path / "s", cfg)
    try:
        w.put_inner_batch("B", [(b"a", {}), (b"b", {})], queue_id=0)
        w.flush()
        with MessageStore.open(tmp_path / "s") as r:
            assert r.queue_bounds("B", 0) == ("BatchCQ", 0, 2) and r.queue_bounds("C", 0) is None
            for i in range(12):  # past the first 10-unit file
                w.put_inner_batch("B", [(b"x", {})] * 3, queue_id=0)
            w.put_inner_batch("C", [(b"c", {})], queue_id=0)
            w.flush()
            assert r.refresh()
            assert r.queue_bounds("B", 0) == ("BatchCQ", 0, 38) and r.queue_bounds("C", 0) == ("BatchCQ", 0, 1)
            assert [b.queueOffset for b in r.inner_messages("B", 0, 35, 99)] == [35, 36, 37]
    finally:
        w.close()


def test_an_lmq_store_reopened_read_write_keeps_dispatching(fixture_copy):
    """The settings are detected from the %LMQ% queues; the counters restart at the CQ max."""
    root = fixture_copy("v5_lmq")
    with MessageStore.open(root, read_only=False) as s:
        assert s.cfg.enableLmq and s.cfg.enableMultiDispatch and "enableMultiDispatch" in s.cfg.detected
        r = s.put_message("Chat-Room", b"again", queue_id=1, properties={"INNER_MULTI_DISPATCH": "%LMQ%c,%LMQ%new"})
        m = s.look_message_by_offset(r.commitLogOffset)
        assert m.properties["INNER_MULTI_QUEUE_OFFSET"] == "41,0"
        d = s.lmq_dispatch(m)
        assert [(q["lmqName"], q["queueOffset"], q["mismatch"]) for q in d["queues"]] == [("%LMQ%c", 41, False),
                                                                                         ("%LMQ%new", 0, False)]
        assert s.lmq_queue_offset("%LMQ%c") == 42
    with MessageStore.open(root) as s:
        assert s.find_queue("%LMQ%new", 0).max_offset == 1 and s.find_queue("%LMQ%c", 0).max_offset == 42


@pytest.mark.parametrize("name,rel", [
    ("v5_batchcq", "batchconsumequeue/BatchTopic/1/00000000000000000000"),
    ("v5_lmq", "consumequeue/%LMQ%a/0/00000000000000001000"),
])
def test_crash_recovery_re_dispatches_lost_lmq_and_batch_units(fixture_copy, name, rel):
    """After a crash (abort present) that lost the newest LMQ / BatchCQ units, a read-write open
    re-dispatches them: the files come back byte for byte."""
    root = fixture_copy(name)
    f = root / rel
    original = f.read_bytes()
    unit = 46 if "batch" in rel else 20
    used = len(original.rstrip(b"\0")) // unit * unit + unit
    f.write_bytes(original[:used - 3 * unit] + b"\0" * (len(original) - used + 3 * unit))
    assert f.read_bytes() != original and f.read_bytes()[:used - 3 * unit] == original[:used - 3 * unit]
    (root / "abort").write_bytes(b"")
    with MessageStore.open(root, read_only=False) as s:
        assert s.recovery.abnormal
    assert f.read_bytes() == original
