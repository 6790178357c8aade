"""Stores RocketMQ 5.3.3 wrote with random geometries (tests/differential/README.md), each opened
read-only with no settings and asked what RocketMQ was asked: every answer must be the one
RocketMQ gave (recorded by tools/differential/GeoDiff5.java), and no byte may change.

A crashed store's answers are those of RocketMQ after its own crash recovery: the read-only view
serves what the restarted broker would, in memory."""
from __future__ import annotations

import hashlib
import json
import lzma
import os
from pathlib import Path

import pytest

from conftest import unpack

HERE = Path(__file__).resolve().parent / "differential"
STORES = sorted(p.name[:-len(".answers.json.xz")] for p in HERE.glob("*.answers.json.xz"))
LONG_MAX = 2 ** 63 - 1
# what the read-only view of a crashed store says it serves (engine.store.crash_view)
CRASH_VIEW_WARNING = ("index as RocketMQ serves it after its crash recovery",
                      "RocksDB consume queues as RocketMQ serves them after its crash recovery")


def answers(name: str) -> dict:
    with lzma.open(HERE / f"{name}.answers.json.xz", "rt", encoding="utf-8") as fh:
        return json.load(fh)


def digest(root: Path) -> dict:
    out = {}
    for dp, _, fn in os.walk(root):
        for f in fn:
            p = Path(dp, f)
            st = p.stat()
            out[str(p.relative_to(root))] = (hashlib.sha1(p.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def page_of(r) -> dict:
    return {"status": r.status, "nextBeginOffset": r.nextBeginOffset, "minOffset": r.minOffset,
            "maxOffset": r.maxOffset, "bufferTotalSize": r.bufferTotalSize,
            "messageCount": r.messageCount if r.messageCount is not None else len(r.messages),
            "phyOffsets": [m.commitLogOffset for m in r.messages], "queueOffsets": [m.queueOffset for m in r.messages]}


def java_page(p: dict) -> dict:
    return {"null": True} if p.get("null") else {k: p[k] for k in (
        "status", "nextBeginOffset", "minOffset", "maxOffset", "bufferTotalSize", "messageCount", "phyOffsets",
        "queueOffsets")}


class Differ:
    def __init__(self):
        self.count, self.bad = 0, []

    def eq(self, what, java, ours):
        self.count += 1
        if java != ours:
            self.bad.append((what, java, ours))


def compare(s, geo: dict, j: dict) -> Differ:
    d = Differ()
    for k in ("mappedFileSizeCommitLog", "maxHashSlotNum", "maxIndexNum"):
        d.eq(("config", k), geo[k], getattr(s.cfg, k))
    if geo["kind"] != "rocksdb" and not geo.get("rocks"):   # (no ConsumeQueue files in a RocksDB store)
        d.eq(("config", "mappedFileSizeConsumeQueue"), geo["mappedFileSizeConsumeQueue"], s.cfg.mappedFileSizeConsumeQueue)
    if geo["batchTopics"]:
        d.eq(("config", "mapperFileSizeBatchConsumeQueue"), geo["mapperFileSizeBatchConsumeQueue"],
             s.cfg.mapperFileSizeBatchConsumeQueue)
    # (DLedgerCommitLog's encoder writes no __CRC32# tail whatever enabledAppendPropCRC says)
    d.eq(("generation", "__CRC32# tails"), geo["enabledAppendPropCRC"] and geo["kind"] != "dledger",
         s.generation().prop_crc)
    d.eq("minPhyOffset", j["minPhyOffset"], s.min_offset)
    d.eq("maxPhyOffset", j["maxPhyOffset"], s.max_offset)
    for q in j["queues"]:
        t, qid = q["topic"], q["queueId"]
        cq = s.find_queue(t, qid) or s.find_batch_queue(t, qid)
        d.eq(("bounds", t, qid), [q["minOffset"], q["maxOffset"]], [cq.min_offset, cq.max_offset] if cq else [0, 0])
        d.eq(("earliest", t, qid), q["earliestMsgTime"], s.earliest_message_time(t, qid))
        for p in q["pages"]:
            d.eq(("getMessage", t, qid, p["offset"]), java_page(p), page_of(s.get_message(t, qid, p["offset"], 32, broker=True)))
        for pr in q["probes"]:
            p = pr["page"]
            d.eq(("getMessage", t, qid, p["offset"], pr["maxNum"]), java_page(p),
                 page_of(s.get_message(t, qid, p["offset"], pr["maxNum"], broker=True)))
        for ts, lower, upper in q["timeLookups"]:
            d.eq(("time", t, qid, ts), lower, s.offset_by_time(t, qid, ts)[0])
            d.eq(("time upper", t, qid, ts), upper, s.offset_by_time(t, qid, ts, boundary="upper")[0])
        for qo, ts in q["storeTimeAt"]:
            d.eq(("storeTimeAt", t, qid, qo), ts, s.store_time_at(t, qid, qo))
    for k in j["keyQueries"]:
        r = s.query_message(k["topic"], k["key"], 0, LONG_MAX, 64, raw=True)
        ctx = ("queryMessage", k["topic"], k["key"])
        d.eq(ctx, [k["phyOffsets"], k["queryOffset"], k["bufferTotalSize"]],
             [[m.commitLogOffset for m in r.messages], list(r.offsets), sum(m.storeSize for m in r.messages)])
        if k["phyOffsets"]:
            d.eq(ctx + ("lastUpdate",), [k["indexLastUpdatePhyoffset"], k["indexLastUpdateTimestamp"]],
                 [r.indexLastUpdatePhyoffset, r.indexLastUpdateTimestamp])
    if "timer" in j:
        compare_timer(s, j["timer"], d)
    if "compacted" in j:
        compare_compacted(s, j["compacted"], d)
    for look in j["looks"]:
        m = s.look_message_by_offset(look["offset"])
        ours = None if m is None else {
            "offset": look["offset"], "storeSize": m.storeSize, "topic": m.topic, "queueId": m.queueId,
            "queueOffset": m.queueOffset, "keys": m.keys, "tags": m.tags, "uniq": m.uniqKey, "bodyCRC": m.bodyCRC,
            "storeTimestamp": m.storeTimestamp, "bornTimestamp": m.bornTimestamp, "sysFlag": m.sysFlag,
            "bodyLen": len(m.body), "msgId": m.msgId}
        d.eq(("lookMessageByOffset", look["offset"]), look if len(look) > 1 else None, ours)
    return d


def compare_timer(s, t: dict, d: Differ) -> None:
    """The timer store: the precision read from the files, timercheck, each timer message's fire
    time, real queue and whether it was delivered, and TimerWheel.getSlot at its fire time."""
    d.eq(("timer", "precision"), [t["precisionMs"], "files"], [s.timer.precision_ms, s.timer.precision_source])
    cp = s.info()["timerStore"]["timercheck"]
    d.eq(("timer", "timercheck"), t["checkpoint"], [cp[k] for k in ("lastReadTimeMs", "lastTimerLogFlushPos",
                                                                    "lastTimerQueueOffset", "masterTimerQueueOffset")])
    ours = {m.uniqKey: m for m in s.timer.messages(s)}
    for m in t["messages"]:
        o = ours.get(m["uniqKey"])
        d.eq(("timer message", m["uniqKey"]), [m["fireTime"], m["realTopic"], m["realQueueId"], m["delivered"]],
             None if o is None else [o.fireTime, o.realTopic, o.realQueueId, o.status == "delivered"])
        sl = s.timer.get_slot(m["fireTime"])
        d.eq(("timer getSlot", m["fireTime"]), m["slot"], [sl.timeMs, sl.firstPos, sl.lastPos, sl.num, sl.magic])


def compacted_page(s, topic: str, queue_id: int, offset: int, max_num: int):
    """What DefaultMessageStore.getMessage serves for a cleanup.policy=COMPACTION topic
    (CompactionStore.getMessage), as rmqstore answers it (compacted_view, what the CLI's
    `get --broker` gives). MessageStore.get_message itself serves the plain ConsumeQueue."""
    from engine.store.compaction import compacted_view
    return compacted_view(s, topic, queue_id, offset, max_num)[0]


def compare_compacted(s, c: dict, d: Differ) -> None:
    """Compacted topics: the position checkpoint as RocketMQ loaded it, and every getMessage
    page RocketMQ's CompactionStore served (a walk by nextBeginOffset, a probe at each offset;
    a queue with no compaction log also as the broker serves it after its 30 s topic scan)."""
    from engine.store.compaction import compacted_topic, compaction_of
    cs = compaction_of(s)
    d.eq(("compaction", "checkpoint"), c["checkpoint"], cs.checkpoint if cs is not None else None)
    scanned = {(a["topic"], a["queueId"]) for a in c.get("afterScan", [])}
    for q in c["queues"]:
        t, qid = q["topic"], q["queueId"]
        d.eq(("compaction", "compacted topic", t), True, compacted_topic(s, t))
        if (t, qid) in scanned:   # no log on disk: rmqstore answers as the broker does once it started one (below)
            continue
        for p in q["walk"]:
            d.eq(("compacted getMessage", t, qid, p["offset"], 32), java_page(p), page_of(compacted_page(s, t, qid, p["offset"], 32)))
        for pr in q["probes"]:
            p = pr["page"]
            d.eq(("compacted getMessage", t, qid, p["offset"], pr["maxNum"]), java_page(p),
                 page_of(compacted_page(s, t, qid, p["offset"], pr["maxNum"])))
    for a in c.get("afterScan", []):   # a queue with no compaction log once the broker's 30 s topic scan gave it one
        p = a["page"]
        d.eq(("compacted getMessage after the topic scan", a["topic"], a["queueId"], p["offset"], 32), java_page(p),
             page_of(compacted_page(s, a["topic"], a["queueId"], p["offset"], 32)))


def test_the_stores_are_here():
    assert {"geo5_bcq_crash", "geo5_batchcq", "geo5_lmq", "geo5_rocksdb", "geo5_rocksdb_crash", "geo5_rocksdb_expired",
            "geo5_timer", "geo5_bcq_flipped", "geo5_dledger", "geo5_lmq_rocks_crash", "geo5_compaction_gap",
            "geo5_compaction_scan"} <= set(STORES)


@pytest.mark.parametrize("name", STORES)
def test_every_answer_is_rocketmqs(name):
    from engine import MessageStore
    root = unpack(name, HERE)
    geo = json.loads((root / "geo.json").read_text(encoding="utf-8"))
    before = digest(root)
    with MessageStore.open(root) as s:
        assert [w for w in s.warnings if not w.startswith(CRASH_VIEW_WARNING)] == []
        assert bool(s.warnings) == geo["crash"]
        d = compare(s, geo, answers(name))
    assert d.count > 500
    assert d.bad == [], f"{len(d.bad)} of {d.count} answers differ from RocketMQ's, first: {d.bad[:3]}"
    assert digest(root) == before


@pytest.mark.parametrize("name", ["geo5_rocksdb_crash", "geo5_bcq_crash"])
def test_a_view_given_up_leaves_the_queues_as_stored(name, monkeypatch):
    """Past the crash view's LIMIT the re-dispatch is undone half-way: every RocksDB and BatchCQ
    queue is again what the files hold (as a tolerant open, which makes no view, reads them)."""
    from engine import MessageStore
    from engine.store import crash_view
    root = unpack(name, HERE)

    def bounds(s):
        return ({k: (q.min_offset, q.max_offset) for k, q in s.queues.items()},
                {k: (q.min_offset, q.max_offset) for k, q in s.batch_queues.items()})

    with MessageStore.open(root, tolerant=True) as s:
        stored = bounds(s)
    with MessageStore.open(root) as s:
        served = bounds(s)
    monkeypatch.setattr(crash_view, "LIMIT", 10)
    with MessageStore.open(root) as s:
        assert any("would re-dispatch" in w and ("flushed before the crash" in w) == ("rocksdb" in name)
                   for w in s.warnings), s.warnings
        assert bounds(s) == stored != served


def test_refresh_keeps_the_crash_view():
    """A crashed store has no writer (a broker holding it gets no view): reading its RocksDB
    database anew would drop the units the view re-dispatched, so refresh leaves them."""
    from engine import MessageStore
    with MessageStore.open(unpack("geo5_rocksdb_crash", HERE)) as s:
        before = {k: (q.min_offset, q.max_offset, q.units_in_memory) for k, q in s.queues.items()}
        assert any(n for *_, n in before.values())
        assert s.refresh() is False
        assert {k: (q.min_offset, q.max_offset, q.units_in_memory) for k, q in s.queues.items()} == before


@pytest.mark.parametrize("name", ["geo5_bcq_flipped", "geo5_bcq_crash"])
def test_recover_then_every_answer_is_rocketmqs(name, tmp_path):
    """`rmqstore recover` on a copy of a crashed store, then a plain open: RocketMQ's answers after
    its own recovery (its reput resumes at the commitlog's end in 5.x; the queues' largest
    maxPhysicOffset, BatchCQ's included, in 4.x: no record is indexed twice)."""
    import shutil
    from engine import MessageStore
    from engine.cli.app import main as cli_main
    copy = tmp_path / name
    shutil.copytree(unpack(name, HERE), copy, symlinks=True)
    assert cli_main(["recover", str(copy)]) == 0
    geo = json.loads((copy / "geo.json").read_text(encoding="utf-8"))
    with MessageStore.open(copy) as s:
        assert s.warnings == []
        d = compare(s, geo, answers(name))
    assert d.bad == [], f"{len(d.bad)} of {d.count} answers differ from RocketMQ's, first: {d.bad[:3]}"
