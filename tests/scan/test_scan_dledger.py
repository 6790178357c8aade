"""Scans over a DLedger store: the plan walks the entries (one slice per data file), the
local engine and the Spark data source read every message once, at its RocketMQ offset."""
from collections import Counter

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.format import dledger_layout as L
from engine.scan.api import JobParams, run_job
from engine.scan.columns import row_json
from engine.scan.filters import MessageFilter
from engine.scan.local import iter_blocks
from engine.scan.planning import plan_commitlog, plan_from_json, plan_to_json
from engine.scan.reader import SliceStats
from engine.tasks import CancelToken
from scan_support import spark  # noqa: F401


@pytest.fixture(scope="module")
def dledger():
    with MessageStore.open(unpack("dledger")) as s:
        yield s


def _expected():
    m = manifest("dledger")
    return m["messages"] + m["messages_not_in_consume_queue"]


def test_plan_and_blocks_read_every_entry_body(dledger):
    m = manifest("dledger")
    plan = plan_commitlog(dledger, split_bytes=4096, min_partitions=8)
    assert len(plan.commitlog) == 31 and all(s.entry_header == L.ENTRY_BODY_OFFSET for s in plan.commitlog)
    assert plan_from_json(plan_to_json(plan))[0].commitlog == plan.commitlog
    stats = SliceStats()
    offs = [int(x) for b in iter_blocks(dledger, JobParams(), None, CancelToken(), stats) for x in b.starts + b.file_from_offset]
    assert offs == [e["rmqPhyOffset"] for e in m["dledger_entries"]]
    assert stats.records == 1500 and not stats.stops and not stats.size_mismatch


def test_local_jobs_on_a_dledger_store(dledger):
    want = Counter(e["topic"] for e in _expected())
    rows = run_job(dledger, "topic-stats", engine="local").rows
    assert {r["topic"]: r["messages"] for r in rows} == want
    assert {r["topic"]: r["bytes"] for r in rows} == {
        t: sum(e["storeSize"] for e in _expected() if e["topic"] == t) for t in want}
    assert run_job(dledger, "consistency", engine="local").rows == []
    hits = run_job(dledger, "filter", JobParams(filter=MessageFilter.build(key="order-dup-001"), limit=100000),
                   engine="local").rows
    exp = {e["commitLogOffset"] for e in _expected() if "order-dup-001" in (e["keys"] or "").split(" ")}
    assert {r["commitLogOffset"] for r in hits} == exp and exp


def test_hop_entries_stops_at_blanks_and_damage(dledger):
    f = dledger.commitlog.files[0]
    h = L.hop_entries(f.buf, 0, f.file_size, f.file_size, f.file_from_offset)
    assert h.stop == "blank" and len(h.starts) == 45 and h.next_pos == 59476
    broken = bytearray(f.buf)
    broken[int(h.starts[3]) - 48 + 24:int(h.starts[3]) - 48 + 32] = (5).to_bytes(8, "big")   # pos field of entry 3
    h2 = L.hop_entries(broken, 0, f.file_size, f.file_size, f.file_from_offset)
    assert h2.stop == "invalid" and h2.starts.tolist() == h.starts[:3].tolist()


@pytest.mark.spark
def test_spark_source_reads_a_dledger_store(spark, dledger):
    rows = spark.read.format("rocketmq").load(str(dledger.root)).orderBy("commitLogOffset").collect()
    got = [row_json(r.asDict()) for r in rows]
    assert got == [m.to_json() for m in dledger.iter_messages()]
    assert len(got) == 1500
