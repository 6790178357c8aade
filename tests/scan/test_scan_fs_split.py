"""Remote commitlog files cut into byte ranges (engine.scan.remote.sync_start): each piece finds
its first record itself, so pieces are read in parallel; every record is read exactly once."""
import json

import numpy as np
import pytest

from conftest import unpack
from engine.scan.api import JobParams, open_scan_store, run_job
from engine.scan.planning import plan_commitlog
from engine.scan.reader import SliceStats, read_commitlog
from engine.scan.remote import FORCE_ENV, RemoteStore, record_starts_in, read_range, store_uri


def _read(plan, stats=None):
    blocks = [b for s in plan.commitlog for b in read_commitlog(s, plan.delay_level_millis, stats)]
    return blocks, np.concatenate([b.commit_log_offsets for b in blocks])


@pytest.mark.parametrize("name", ["small", "v5"])
@pytest.mark.parametrize("split", [4096, 10007, 65535])
def test_split_scan_equals_the_unsplit_one(name, split):
    remote = RemoteStore(store_uri(str(unpack(name))))
    whole = plan_commitlog(remote, None)
    cut = plan_commitlog(remote, split)
    assert len(cut.commitlog) > len(whole.commitlog) and any(s.sync for s in cut.commitlog)
    assert all(s.end - s.start <= split for s in cut.commitlog)
    a_stats, b_stats = SliceStats(), SliceStats()
    a, offs_a = _read(whole, a_stats)
    b, offs_b = _read(cut, b_stats)
    assert len(np.unique(offs_b)) == len(offs_b)            # no record twice
    assert np.array_equal(offs_a, offs_b) and a_stats.records == b_stats.records
    assert json.dumps([r for x in a for r in x.rows_json(mark=True)]) == \
        json.dumps([r for x in b for r in x.rows_json(mark=True)])


def test_split_jobs_equal_the_manifest_count(monkeypatch):
    """Through the runner: forced ranges with splitBytes of 3,000 give the mapped store's answer."""
    with open_scan_store(str(unpack("small"))) as st:
        ref = run_job(st, "topic-stats", JobParams(by_queue=True), engine="local").rows
    monkeypatch.setenv(FORCE_ENV, "1")
    with open_scan_store(str(unpack("small"))) as st:
        got = run_job(st, "topic-stats", JobParams(by_queue=True, split_bytes=3000), engine="local").rows
    assert got == ref and sum(r["messages"] for r in got) == 2339


def test_record_starts_found_by_their_own_offset():
    """Every record start of a file and nothing else: the header probe a piece syncs with."""
    root = unpack("small")
    with open_scan_store(str(root)) as st:
        plan = plan_commitlog(st, None)
        s = plan.commitlog[1]
        _, offs = _read(type(plan)(plan.root, [s], plan.min_offset, plan.max_offset, plan.delay_level_millis))
    uri = store_uri(s.path)
    buf = read_range(uri, 0, s.limit)
    found = record_starts_in(buf, 0, s.file_from_offset, s.limit) + s.file_from_offset
    assert np.array_equal(found, offs)


@pytest.mark.parametrize("name", ["dledger", "dledger_mixed", "dledger_terms"])
@pytest.mark.parametrize("split", [4096, 20011])
def test_split_dledger_entries_equal_the_unsplit_read(name, split):
    """DLedger data files cut at byte positions: each piece finds its first entry by the entry's
    own stored position (and 16 chained entries), as record pieces do."""
    remote = RemoteStore(store_uri(str(unpack(name))))
    whole, cut = plan_commitlog(remote, None), plan_commitlog(remote, split)
    assert any(s.sync and s.entry_header for s in cut.commitlog)
    a, offs_a = _read(whole)
    b, offs_b = _read(cut)
    assert len(offs_a) > 100 and np.array_equal(offs_a, offs_b)
    assert json.dumps([r for x in a for r in x.rows_json(mark=True)]) == \
        json.dumps([r for x in b for r in x.rows_json(mark=True)])
