"""engine.analysis's twins: the compiled index kernels (engine/accel/_index.pyx) against the
numpy code in engine/analysis/chains.py and a brute-force walk (IndexFile.chain, one slot at a
time): chain lengths, their histogram, the binning of lengths, the cycles of a damaged file. On
every conformance fixture's index files and on crafted damaged files (forward links, cycles,
links out of range, zeroed and out-of-range slots).

Run compiled and with RMQSTORE_PURE_PYTHON=1 (the Makefile's TWIN_TESTS): comparisons with the
compiled module are skipped when it is not built or turned off; the numpy path is always
checked against brute force."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import FIXTURES, manifest, unpack
from engine.store.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, IndexFile
from engine import analysis as A
from engine.analysis.chains import _accel

KERNEL = _accel()


def brute_lengths(f: IndexFile) -> np.ndarray:
    return np.array([len(f.chain(s)) for s in range(f.slot_num)], dtype=np.int64)


def open_fixture_index_files(name: str) -> list[IndexFile]:
    root = unpack(name)
    cfg = manifest(name)["config"]
    return [IndexFile(p, cfg["maxHashSlotNum"], cfg["maxIndexNum"])
            for p in sorted((root / "index").iterdir()) if p.is_file() and p.name.isdigit()]


def write_index(path: Path, slots, prev, index_count: int, slot_num: int, index_num: int) -> IndexFile:
    """A crafted index file: `slots` (slot_num ints), `prev` (prevIndex of entries
    0..len-1), header indexCount as given (may disagree with the entries: damage)."""
    buf = np.zeros(40 + 4 * slot_num + 20 * index_num, dtype=np.uint8)
    h = np.zeros(1, INDEX_HEADER_DTYPE)
    h["beginTimestamp"], h["endTimestamp"] = 1795310747000, 1795310749000
    h["indexCount"] = index_count
    buf[:40] = h.view(np.uint8)
    buf[40:40 + 4 * slot_num] = np.asarray(slots, dtype=">i4").view(np.uint8)
    e = np.zeros(index_num, dtype=INDEX_ENTRY_DTYPE)
    e["keyHash"] = np.arange(index_num)
    e["commitLogOffset"] = np.arange(index_num) * 100
    e["prevIndex"][:len(prev)] = prev
    buf[40 + 4 * slot_num:] = e.view(np.uint8)
    path.write_bytes(buf.tobytes())
    return IndexFile(path, slot_num, index_num)


def check_all_ways(f: IndexFile) -> np.ndarray:
    """numpy == brute force (always); compiled == both, with the same histogram (if built)."""
    brute = brute_lengths(f)
    pure, pure_counts = A.chain_census(f, accel=False)
    assert pure.dtype == np.int32
    assert np.array_equal(pure, brute), f.name
    assert np.array_equal(pure_counts, np.bincount(brute, minlength=1))
    if KERNEL is not None:
        fast, counts = A.chain_census(f)
        assert fast.dtype == np.int32 and counts.dtype == np.int64
        assert np.array_equal(fast, brute), f.name
        hist = Counter(brute.tolist())
        assert counts.tolist() == [hist.get(k, 0) for k in range(int(brute.max(initial=0)) + 1)]
    return brute


# ---- the conformance fixtures ---------------------------------------------------------------------
@pytest.mark.parametrize("name", [n for n in FIXTURES if n != "default"])
def test_small_fixtures_every_index_file(name):
    files = open_fixture_index_files(name)
    assert files, name
    try:
        for f in files:
            brute = check_all_ways(f)
            stats = A.slot_stats(A.chain_lengths(f), f.entry_count)
            assert stats.used_slots == np.count_nonzero(brute)
            assert stats.reachable == brute.sum()
    finally:
        for f in files:
            f.close()


def test_default_fixture_5m_slots():
    """The default-size file (5,000,000 slots): brute force only over the used slots."""
    (f,) = open_fixture_index_files("default")
    try:
        used = np.flatnonzero(f.slots)
        pure, pure_counts = A.chain_census(f, accel=False)
        expect = np.zeros(f.slot_num, dtype=np.int64)
        expect[used] = [len(f.chain(int(s))) for s in used]
        assert np.array_equal(pure, expect)
        if KERNEL is not None:
            fast, counts = A.chain_census(f)
            assert np.array_equal(fast, expect)
            assert np.array_equal(counts, pure_counts)
            # stats from the histogram equal a full sort
            s = A.slot_stats(fast, f.entry_count, top=5, counts=counts)
            order = np.lexsort((np.arange(f.slot_num), -expect))[:5]
            assert s.longest == [(int(i), int(expect[i])) for i in order]
    finally:
        f.close()


# ---- damaged files --------------------------------------------------------------------------------
def test_forward_links_cycles_and_out_of_range(tmp_path):
    #   entry:     0  1  2  3  4  5  6  7   8  9 10 11  12  13 14
    prev = [0, 0, 1, 2, 6, 4, 5, 99, 8, 0, 9, 13, 11, -3, 12]
    # 3 -> 2 -> 1; 4 -> 6 -> 5 -> 4 (forward link, a cycle of 3); 7 -> 99 (past indexCount);
    # 8 -> 8 (self link); 10 -> 9; 14 -> 12 -> 11 -> 13 (forward) -> -3 (end);
    # slot 8 points past indexCount, slot 9 is negative, slot 12 points at entry 15 == indexCount
    slots = [0, 3, 4, 5, 7, 8, 10, 14, 30, -1, 12, 11, 15, 2]
    f = write_index(tmp_path / "20261122012547514", slots, prev, index_count=15, slot_num=14, index_num=32)
    try:
        lengths = check_all_ways(f)
        assert lengths.tolist() == [0, 3, 3, 3, 1, 1, 2, 4, 0, 0, 3, 2, 1, 2]
    finally:
        f.close()


def test_index_count_smaller_than_the_entries(tmp_path):
    """Links past indexCount end a chain even when the entry is there (a torn header)."""
    prev = [0, 0, 1, 2, 3, 4, 5]
    f = write_index(tmp_path / "20261122012547514", [6, 3, 4, 0], prev, index_count=4, slot_num=4, index_num=16)
    try:
        assert check_all_ways(f).tolist() == [0, 3, 4, 0]
    finally:
        f.close()


def test_index_count_beyond_the_file(tmp_path):
    """A header counting more entries than the file holds: entry numbers stop at index_num - 1."""
    prev = [0, 0, 1, 2, 3, 4, 5, 6]
    f = write_index(tmp_path / "20261122012547514", [7, 5, 8, 0], prev, index_count=1000, slot_num=4, index_num=8)
    try:
        assert check_all_ways(f).tolist() == [7, 5, 0, 0]
    finally:
        f.close()


def test_empty_and_zeroed(tmp_path):
    f = write_index(tmp_path / "20261122012547514", [0] * 8, [], index_count=0, slot_num=8, index_num=8)
    try:
        assert check_all_ways(f).tolist() == [0] * 8
    finally:
        f.close()


def test_long_chain_past_the_one_byte_pass(tmp_path):
    """One slot holding 600 entries: the compiled one-byte pass gives up at 255 and the
    four-byte pass finishes (a forward link in another slot takes the resolver too)."""
    n = 600
    prev = [0, 0] + list(range(1, n))              # entry e -> e - 1
    prev += [n + 2, n + 1]                          # n+1 -> n+2 -> n+1: a 2-cycle
    f = write_index(tmp_path / "20261122012547514", [n, n + 1, 0, 300], prev, index_count=n + 3,
                    slot_num=4, index_num=n + 8)
    try:
        assert check_all_ways(f).tolist() == [n, 2, 0, 300]
    finally:
        f.close()


@pytest.mark.parametrize("n", [254, 255, 256, 300, 511, 1000])
def test_long_intact_chains(tmp_path, n):
    """Chains around and past 255 in an otherwise intact file (only the length sends the
    compiled code from its one-byte pass to the four-byte one)."""
    prev = [0, 0] + list(range(1, n)) + [0, n + 1]      # 1 <- 2 <- ... <- n;  n+1 <- n+2
    f = write_index(tmp_path / "20261122012547514", [n, n + 2, 0, n - 1], prev, index_count=n + 3,
                    slot_num=4, index_num=n + 8)
    try:
        assert check_all_ways(f).tolist() == [n, 2, 0, n - 1]
    finally:
        f.close()


@pytest.mark.parametrize("seed", range(12))
def test_random_damage(tmp_path, seed):
    """A put_key-style file, then damage: prevIndex overwritten with forward links, self
    links, cycles, negatives and numbers past indexCount; slots zeroed or pointed anywhere."""
    rng = np.random.default_rng(seed)
    slot_num, entries = int(rng.integers(1, 60)), int(rng.integers(0, 400))
    index_num = entries + 1 + int(rng.integers(0, 20))
    slot = rng.integers(0, slot_num, size=entries)
    prev = np.zeros(entries + 1, dtype=np.int64)
    last = np.zeros(slot_num, dtype=np.int64)
    for e in range(1, entries + 1):
        s = slot[e - 1]
        prev[e], last[s] = last[s], e
    if entries:
        k = int(rng.integers(0, entries // 3 + 2))
        hit = rng.integers(1, entries + 1, size=k)
        prev[hit] = rng.choice([-5, 0, 1, entries, entries + 3, index_num + 10], size=k) \
            if seed % 3 == 0 else rng.integers(-2, entries + 5, size=k)
    slots = last.copy()
    z = rng.random(slot_num)
    slots[z < 0.1] = 0
    slots[(z >= 0.1) & (z < 0.2)] = rng.integers(-3, index_num + 5, size=int(((z >= 0.1) & (z < 0.2)).sum()))
    count = entries + 1 if seed % 4 else int(rng.integers(0, entries + 3))
    f = write_index(tmp_path / "20261122012547514", slots, prev, index_count=count, slot_num=slot_num,
                    index_num=index_num)
    try:
        check_all_ways(f)
    finally:
        f.close()


# ---- binning, cycles --------------------------------------------------------------------------
def test_binning_compiled_equals_numpy_and_brute_force():
    rng = np.random.default_rng(3)
    for n in (1, 7, 1000, 123457):
        lengths = rng.poisson(2.0, size=n).astype(np.int32)
        for bins in (1, 15, 3072, 120000):
            for how in ("max", "mean"):
                b, per_b = A.bin_slots(lengths, bins, how, accel=False)
                per = per_b
                ref = [getattr(np, how)(lengths[i:i + per]) for i in range(0, n, per)]
                assert np.allclose(b, ref), (n, bins, how)
                if KERNEL is not None:
                    a, per_a = A.bin_slots(lengths, bins, how)
                    assert per_a == per_b and np.array_equal(a, b), (n, bins, how)


def test_slots_used_per_bin_reads_the_slot_table(tmp_path):
    rng = np.random.default_rng(5)
    slot_num = 5003
    slots = np.where(rng.random(slot_num) < 0.3, rng.integers(1, 50, size=slot_num), 0)
    slots[rng.random(slot_num) < 0.01] = -7             # damage still counts as "in use"
    f = write_index(tmp_path / "20261122012547514", slots, [0] * 50, index_count=50, slot_num=slot_num,
                    index_num=64)
    try:
        for per in (1, 7, 100, 5003):
            nb = -(-slot_num // per)
            ref = [np.count_nonzero(slots[i:i + per]) for i in range(0, slot_num, per)]
            assert A.slots_used_per_bin(f, per, nb, accel=False).tolist() == ref
            if KERNEL is not None:
                assert A.slots_used_per_bin(f, per, nb).tolist() == ref
    finally:
        f.close()


def test_chain_cycles_found_once_each(tmp_path):
    #   entry:     0  1  2  3  4  5  6  7   8  9 10 11  12  13 14
    prev = [0, 0, 1, 2, 6, 4, 5, 99, 8, 0, 9, 13, 11, -3, 12]
    slots = [0, 3, 4, 5, 7, 8, 10, 14, 30, -1, 12, 11, 15, 2]
    f = write_index(tmp_path / "20261122012547514", slots, prev, index_count=15, slot_num=14, index_num=32)
    try:
        assert sorted(A.chain_cycles(f)) == [[6, 5, 4], [8]]
        for c in A.chain_cycles(f):        # each is a real loop of prevIndex links
            assert [int(f.entries[e]["prevIndex"]) for e in c] == c[1:] + c[:1]
    finally:
        f.close()


@pytest.mark.parametrize("name", FIXTURES)
def test_intact_fixtures_have_no_cycles(name):
    files = open_fixture_index_files(name)
    try:
        assert all(A.chain_cycles(f) == [] for f in files)
    finally:
        for f in files:
            f.close()


def test_slot_stats_from_the_histogram_equal_a_full_sort():
    rng = np.random.default_rng(9)
    for n in (1, 3, 50, 10000):
        lengths = rng.poisson(1.5, size=n).astype(np.int32)
        for top in (1, 5, 40):
            s = A.slot_stats(lengths, int(lengths.sum()), top=top)
            order = [i for i in np.lexsort((np.arange(n), -lengths.astype(np.int64))) if lengths[i] > 0][:top]
            assert s.longest == [(int(i), int(lengths[i])) for i in order]
            assert s.used_slots == np.count_nonzero(lengths) and s.reachable == lengths.sum()
