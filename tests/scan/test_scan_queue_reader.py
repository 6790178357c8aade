"""A queue's records read through its ConsumeQueue (engine.scan.queue_reader, the rocketmq
source's useConsumeQueue): only the records the queue's units name are read, and they are
exactly the records RocketMQ dispatched to that queue (the fixture's manifest)."""
import json

import numpy as np
import pytest

from conftest import manifest, unpack
from engine.scan.api import open_scan_store
from engine.scan.planning import plan_commitlog, plan_consume_queues
from engine.scan.queue_reader import QueueRead, queue_slices, read_queue_records
from engine.scan.ranges import FETCHED
from engine.scan.reader import SliceStats
from engine.scan.remote import FORCE_ENV
from scan_support import small, spark  # noqa: F401


def _queue_read(store, qids):
    plan = plan_commitlog(store, None)
    files = sorted({(s.path, s.file_from_offset, s.file_size) for s in plan.commitlog}, key=lambda f: f[1])
    return QueueRead(queue_slices(plan_consume_queues(store, None, qids)), files, plan.min_offset,
                     plan.max_offset), plan.delay_level_millis


def _dispatched(name, qid):
    return sorted(m["phyOffset"] for m in manifest(name)["messages"]
                  if m["queueId"] == qid and m["consumeQueueEntries"])


@pytest.mark.parametrize("name", ["small", "v5"])
def test_queue_records_are_what_rocketmq_dispatched(monkeypatch, name):
    root = unpack(name)
    out = {}
    for kind in ("mapped", "ranges"):
        if kind == "ranges":
            monkeypatch.setenv(FORCE_ENV, "1")
        with open_scan_store(str(root)) as st:
            q, delays = _queue_read(st, {1})
            stats, before = SliceStats(), FETCHED[0]
            blocks = list(read_queue_records(q, delays, stats))
            out[kind] = (blocks, FETCHED[0] - before, st.max_offset - st.min_offset)
        monkeypatch.delenv(FORCE_ENV, raising=False)
    want = _dispatched(name, 1)
    for kind, (blocks, fetched, total) in out.items():
        offs = np.concatenate([b.commit_log_offsets for b in blocks])
        assert sorted(offs.tolist()) == want and len(set(offs.tolist())) == len(want), kind
        assert all(int(b.array("queueId").max()) == 1 == int(b.array("queueId").min()) for b in blocks)
    rows = {k: json.dumps(sorted((r for b in v[0] for r in b.rows_json(mark=True)), key=lambda r: r["commitLogOffset"]))
            for k, v in out.items()}
    assert rows["mapped"] == rows["ranges"]
    blocks, fetched, total = out["ranges"]
    monkeypatch.setenv(FORCE_ENV, "1")
    with open_scan_store(str(root)) as st:   # gap 0: exactly the queue's records and its CQ units
        q, delays = _queue_read(st, {1})
        q.gap, before = 0, FETCHED[0]
        assert sum(len(b) for b in read_queue_records(q, delays)) == len(want)
    sizes = {m["phyOffset"]: m["totalSize"] for m in manifest(name)["messages"]}
    cq_bytes = sum((s.unit_end - s.unit_start) * 20 for s in q.cq)
    useful = sum(sizes[o] for o in want)
    assert FETCHED[0] - before == useful + cq_bytes
    assert useful + cq_bytes <= fetched <= 2 * useful + cq_bytes < total / 2   # runs waste at most what they use


@pytest.mark.spark
def test_use_consume_queue_option_on_spark(spark, small, tmp_path):
    """where("queueId = 1") with useConsumeQueue: the dispatched records of queue 1, and only
    their headers read (PREPARED / ROLLBACK records of queue 1 are in no queue)."""
    from engine.scan.spark_source import read_stats
    stats = tmp_path / "s"
    stats.mkdir()
    df = (spark.read.format("rocketmq").option("useConsumeQueue", "true").option("statsDir", str(stats))
          .load(str(small.root)).where("queueId = 1").select("commitLogOffset", "queueId"))
    got = sorted(r.commitLogOffset for r in df.collect())
    want = _dispatched("small", 1)
    assert got == want and len(want) == 528
    st = read_stats(str(stats))
    assert st["records"] == st["rows"] == len(want)


def _stats_of_dispatched(name, qid):
    out = {}
    for m in manifest(name)["messages"]:
        if m["queueId"] == qid and m["consumeQueueEntries"]:
            e = out.setdefault(m["topic"], [0, 0])
            e[0] += 1
            e[1] += m["totalSize"]
    return out


def test_cli_via_consume_queue_on_the_local_engine(monkeypatch, capsys):
    from engine.cli.scan import main
    root = str(unpack("small"))
    want = _stats_of_dispatched("small", 1)
    for forced in (False, True):
        if forced:
            monkeypatch.setenv(FORCE_ENV, "1")
        assert main([root, "topic-stats", "--queue", "1", "--via-consume-queue", "--local", "--json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        assert {r["topic"]: [r["messages"], r["bytes"]] for r in rows} == want
    assert main([root, "topic-stats", "--via-consume-queue", "--local"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--via-consume-queue needs --topic or --queue" in err


@pytest.mark.spark
def test_via_consume_queue_on_spark_equals_local(spark, small):
    from engine.scan.api import JobParams, MessageFilter, run_job
    p = JobParams(filter=MessageFilter.build(queue_ids=[1]), via_consume_queue=True, by_queue=True)
    local = run_job(small, "topic-stats", p, engine="local").rows
    assert {r["topic"]: [r["messages"], r["bytes"]] for r in local} == _stats_of_dispatched("small", 1)
    assert run_job(small, "topic-stats", p, engine="spark", spark=spark).rows == local
