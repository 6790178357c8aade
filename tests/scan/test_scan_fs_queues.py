"""The ConsumeQueues and index files of a store on a filesystem (engine.scan.remote): the
consistency job and the rocketmq-cq / rocketmq-index sources read them by listings, headers and
byte ranges, and answer as over the mapped store."""
import json

import pytest

from conftest import unpack
from engine.scan.api import JobParams, open_scan_store, run_job
from engine.scan.planning import plan_consume_queues, plan_index
from engine.scan.reader import read_cq, read_index
from engine.scan.remote import FORCE_ENV, RemoteStore
from scan_support import plant_cq_defect, plant_index_defect, spark  # noqa: F401


def _forced(monkeypatch, root):
    monkeypatch.setenv(FORCE_ENV, "1")
    st = open_scan_store(str(root))
    monkeypatch.delenv(FORCE_ENV)
    assert isinstance(st, RemoteStore)
    return st


def _units(store, kind):
    plan, read = (plan_consume_queues, read_cq) if kind == "cq" else (plan_index, read_index)
    out = []
    for s in plan(store):
        d = read(s)
        keys = sorted(d)
        tag = (s.topic, s.queue_id) if kind == "cq" else (s.name, 0)
        out += [(*tag, *row) for row in
                zip(*[d[k].tolist() for k in keys])]
    return sorted(out)


@pytest.mark.parametrize("name", ["small", "v5", "v5_lmq"])
def test_remote_units_and_entries_equal_the_mapped_ones(monkeypatch, name):
    root = unpack(name)
    with open_scan_store(str(root)) as local:
        cq, idx = _units(local, "cq"), _units(local, "index")
    remote = _forced(monkeypatch, root)
    assert len(cq) > 100 and _units(remote, "cq") == cq
    assert len(idx) > 100 and _units(remote, "index") == idx
    assert remote.cfg.mappedFileSizeConsumeQueue == local.cfg.mappedFileSizeConsumeQueue


@pytest.mark.parametrize("name", ["small", "v5", "v5_lmq"])
def test_consistency_of_a_good_remote_store_finds_nothing(monkeypatch, name):
    assert run_job(_forced(monkeypatch, unpack(name)), "consistency", engine="local").rows == []


def test_consistency_finds_planted_defects_remotely(monkeypatch, fixture_copy):
    root = fixture_copy("small")
    cq_file, cq_pos = plant_cq_defect(root)
    idx_file, idx_pos = plant_index_defect(root)
    with open_scan_store(str(root)) as st:
        ref = run_job(st, "consistency", engine="local").rows
    rows = run_job(_forced(monkeypatch, root), "consistency", engine="local").rows
    assert [(r["structure"], r["problem"], r["file"], r["fileOffset"]) for r in rows] == [
        ("consumequeue", "unit differs", cq_file, cq_pos), ("index", "entry differs", idx_file, idx_pos)]
    assert json.dumps(rows) == json.dumps(ref)


def test_remote_queue_stores_refused_in_one_line(monkeypatch, capsys):
    """BatchConsumeQueues and RocksDB queues are read from local stores only."""
    from engine.cli.scan import main
    monkeypatch.setenv(FORCE_ENV, "1")
    for name, what in (("v5_batchcq", "BatchConsumeQueues"), ("v5_rocksdb_cq", "RocksDB ConsumeQueues")):
        assert main([f"file://{unpack(name)}", "consistency", "--local"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and what in err and name in err, err


@pytest.mark.parametrize("name", ["dledger", "dledger_mixed", "dledger_terms", "dledger_crashed"])
def test_remote_dledger_store_equals_the_mapped_one(monkeypatch, name):
    """A DLedger store by URI: dledger-<id>/data's entries (after a mixed store's old commitlog
    files) read by byte ranges, in windows that cut entries anywhere: the mapped store's records."""
    from engine.scan.planning import plan_commitlog
    from engine.scan.reader import SliceStats, read_commitlog
    from engine.scan.ranges import read_commitlog_ranges
    root = unpack(name)
    with open_scan_store(str(root)) as local:
        plan = plan_commitlog(local, None)
        a = [r for s in plan.commitlog for b in read_commitlog(s, plan.delay_level_millis) for r in b.rows_json(mark=True)]
        jobs = [json.dumps(run_job(local, j, JobParams(), engine="local").rows) for j in ("topic-stats", "consistency")]
    remote = _forced(monkeypatch, root)
    assert remote.commitlog.entry_header(remote.commitlog.files[-1])
    rplan = plan_commitlog(remote, None)
    for window in (333, 4096, 1 << 20):
        stats = SliceStats()
        b = [r for s in rplan.commitlog for blk in read_commitlog_ranges(s, rplan.delay_level_millis, stats, window=window)
             for r in blk.rows_json(mark=True)]
        assert len(a) > 100 and json.dumps(a) == json.dumps(b), window
    assert [json.dumps(run_job(remote, j, JobParams(), engine="local").rows)
            for j in ("topic-stats", "consistency")] == jobs


@pytest.mark.spark
def test_remote_dledger_on_spark(monkeypatch, spark):  # noqa: F811
    """Spark's workers read a mixed DLedger store's old records and entries by ranges."""
    root = unpack("dledger_mixed")
    with open_scan_store(str(root)) as st:
        ref = run_job(st, "topic-stats", JobParams(by_queue=True), engine="local").rows
    got = run_job(_forced(monkeypatch, root), "topic-stats", JobParams(by_queue=True), engine="spark", spark=spark).rows
    assert got == ref and len(ref) > 5


def _cut_a_slot(root) -> str:
    """Zero the first used slot of the fourth index file: its chain's entries become unreachable."""
    import os
    import struct
    name = sorted(os.listdir(root / "index"))[3]
    with open(root / "index" / name, "r+b") as fh:
        slots = struct.unpack(">64i", fh.read(40 + 256)[40:])
        k = next(i for i, v in enumerate(slots) if v > 0)
        fh.seek(40 + 4 * k)
        fh.write(b"\0\0\0\0")
    return f"index/{name}"


def test_chain_problems_of_a_remote_store_local_engine(monkeypatch, fixture_copy):
    root = fixture_copy("small")
    rel = _cut_a_slot(root)
    with open_scan_store(str(root)) as st:
        ref = run_job(st, "consistency", JobParams(), engine="local").rows
    assert ref and {r["problem"] for r in ref} == {"entry unreachable from its slot"} and ref[0]["file"] == rel
    assert run_job(_forced(monkeypatch, root), "consistency", JobParams(), engine="local").rows == ref


@pytest.mark.spark
def test_chain_problems_of_a_remote_store_on_spark(monkeypatch, spark, fixture_copy):  # noqa: F811
    """On Spark a task per index file reads its slot table and entries by ranges (not the driver)."""
    root = fixture_copy("small")
    _cut_a_slot(root)
    with open_scan_store(str(root)) as st:
        ref = run_job(st, "consistency", JobParams(), engine="local").rows
    assert ref and run_job(_forced(monkeypatch, root), "consistency", JobParams(), engine="spark", spark=spark).rows == ref
