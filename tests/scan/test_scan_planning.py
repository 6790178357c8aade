"""Partitions: every record exactly once, split points are real record starts, nothing read
past the recovered end, everything picklable and JSON round-trips."""
import pickle

import pytest

from conftest import FIXTURES, unpack
from engine import MessageStore
from engine.scan.columns import hop, hop_assisted
from engine.scan.planning import plan_commitlog, plan_consume_queues, plan_from_json, plan_index, plan_to_json
from engine.scan.reader import SliceStats, hint_positions, map_file, read_commitlog
from scan_support import small, v5  # noqa: F401  (fixtures)


def offsets(store, plan):
    out = []
    for s in plan.commitlog:
        for b in read_commitlog(s, plan.delay_level_millis, max_records=97):
            out.extend(b.commit_log_offsets.tolist())
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_every_record_once_whatever_the_split(name):
    with MessageStore.open(unpack(name)) as store:
        walk = [m.commitLogOffset for m in store.iter_messages()]
        for split in (None, 4096, 700):
            plan = plan_commitlog(store, split_bytes=split)
            assert offsets(store, plan) == walk, (name, split)
            for s in plan.commitlog:
                assert s.file_from_offset + s.limit <= store.max_offset
                assert 0 <= s.start < s.end <= s.limit <= s.file_size


def test_split_points_are_record_starts_cq_or_hop(small):
    starts = {m.commitLogOffset for m in small.iter_messages()}
    with_cq = plan_commitlog(small, split_bytes=4096)
    by_hop = plan_commitlog(small, split_bytes=4096, use_cq=False, hop_hints=False)
    assert len(with_cq.commitlog) > 10 * len(small.commitlog.files) // 2
    # the CQ knows no PREPARED / ROLLBACK record, so its split may be a record later
    for plan in (with_cq, by_hop):
        for s in plan.commitlog:
            if s.start:
                assert s.file_from_offset + s.start in starts
    assert offsets(small, with_cq) == offsets(small, by_hop) == sorted(starts)
    assert all(s.hints for s in with_cq.commitlog) and not any(s.hints for s in by_hop.commitlog)


def test_min_partitions_splits_files(small):
    plan = plan_commitlog(small, split_bytes=None, min_partitions=40)
    assert len(plan.commitlog) == 12   # 64 KiB files are never cut below MIN_SPLIT_BYTES
    plan = plan_commitlog(small, split_bytes=1024, min_partitions=40)
    assert len(plan.commitlog) > 40


def test_assisted_hop_equals_plain_hop(v5):
    plan = plan_commitlog(v5)
    for s in plan.commitlog:
        mm, u8 = map_file(s.path)
        cands = hint_positions(s)
        assert cands is not None and len(cands)
        for cap in (1, 7, 1 << 16):
            a, b = [], []
            pos = s.start
            while True:
                h = hop(mm, pos, s.end, s.limit, cap)
                a.extend(h.starts.tolist())
                if h.stop:
                    break
                pos = h.next_pos
            pos = s.start
            while True:
                h2 = hop_assisted(mm, u8, pos, s.end, s.limit, cands, cap)
                b.extend(h2.starts.tolist())
                if h2.stop:
                    break
                pos = h2.next_pos
            assert a == b and h.stop == h2.stop and h.next_pos == h2.next_pos


def test_assisted_hop_ignores_wrong_candidates(small):
    """Candidates that are not record starts (or are off the chain) change nothing."""
    s = plan_commitlog(small).commitlog[0]
    mm, u8 = map_file(s.path)
    import numpy as np
    good = hint_positions(s)
    bad = np.unique(np.concatenate([good, good + 3, np.arange(0, s.limit, 977)]))
    ref = hop(mm, s.start, s.end, s.limit, 1 << 20)
    got = hop_assisted(mm, u8, s.start, s.end, s.limit, bad, 1 << 20)
    assert got.starts.tolist() == ref.starts.tolist() and got.stop == ref.stop


@pytest.mark.parametrize("name", ["crashed_torn", "crashed_live", "v5_crashed"])
def test_never_past_the_recovered_end(name):
    with MessageStore.open(unpack(name)) as store:
        plan = plan_commitlog(store)
        last = plan.commitlog[-1]
        assert last.file_from_offset + last.limit == store.max_offset
        stats = SliceStats()
        n = sum(len(b) for s in plan.commitlog for b in read_commitlog(s, plan.delay_level_millis, stats))
        assert n == sum(1 for _ in store.iter_messages())
        assert stats.size_mismatch == 0


def test_plans_pickle_and_round_trip_through_json(small):
    plan = plan_commitlog(small, split_bytes=8192)
    cq, idx = plan_consume_queues(small), plan_index(small)
    assert pickle.loads(pickle.dumps(plan.commitlog)) == plan.commitlog
    p2, cq2, idx2 = plan_from_json(plan_to_json(plan, cq, idx))
    assert p2.commitlog == plan.commitlog and cq2 == cq and idx2 == idx
    assert p2.max_offset == small.max_offset and p2.delay_level_millis == plan.delay_level_millis
    assert sum(s.unit_end - s.unit_start for s in cq) == sum(cq.max_offset for cq in small.queues.values())
    assert sum(s.last - s.first for s in idx) == sum(f.header.indexCount - 1 for f in small.index.files)
