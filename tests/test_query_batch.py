"""Batched key queries (IndexService.query_offsets, KeyIndex.query_many's group-prefetched
walk): every key's answer is exactly the one query_offset gives it alone -- same offsets, same
order -- on the stores the real RocketMQ wrote (and what it answered), on generated indexes with
several files, long chains, time windows that cut files and caps of 1..64, on damaged chains
whose ends only the step bound finds, and for key lists of every length against the lanes.

Run compiled and with RMQSTORE_PURE_PYTHON=1 (the Makefile's TWIN_TESTS): with the compiled
module off, query_offsets' Python path must give the same answers."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from bench import index_gen
from conftest import ALL_FIXTURES, CLEAN, manifest, unpack
from engine import MessageStore, StoreConfig, accel
from engine.store.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, LONG_MAX

KERNEL = accel.load("_query")
TOPIC = "BatchTopic"
# the stores whose manifest answers are the index's answer as it is read (crashed stores' answers
# are after RocketMQ's recovery)
AS_READ = set(CLEAN) | {"dledger"}
LANE_EDGES = (0, 1, 2, 15, 16, 17, 31, 33, 100, 1001)   # around the 16 lanes and beyond


def singles(idx, topic, keys, max_num, begin=0, end=LONG_MAX, cap=0):
    """One query per key, the reference (Python) walk."""
    return [idx.query_offset(topic, k, max_num, begin, end, cap=cap, accel=False)[0] for k in keys]


def check(idx, topic, keys, max_num, begin=0, end=LONG_MAX, cap=0):
    """query_offsets equals query_offset key by key, the compiled single call and the reference."""
    got = idx.query_offsets(topic, keys, max_num, begin, end, cap=cap)
    want = singles(idx, topic, keys, max_num, begin, end, cap)
    assert got == want, (topic, max_num, begin, end, cap)
    fast = [idx.query_offset(topic, k, max_num, begin, end, cap=cap)[0] for k in keys]
    assert fast == want
    return got


# ---- the real RocketMQ's stores -------------------------------------------------------------

def fixture_queries(name) -> list[tuple[str, str, int, list[int] | None, bool]]:
    """(topic, key, maxNum, RocketMQ's offsets, compare sorted) from a fixture's manifest; the
    offsets are None where RocketMQ answered through queryMessage (lookups that drop hits)."""
    kq = manifest(name)["key_queries"]
    if isinstance(kq, list):   # DLedger fixtures: queryMessage's offsets, sorted
        return [(q["topic"], q["key"], q["maxNum"], q["commitLogOffsets"], True) for q in kq]
    if "all_pairs_columns" in kq:   # queryOffset(topic, key, 64, 0, Long.MAX_VALUE), in its order
        return [(t, k, 64, exp, False) for t, k, _src, exp in kq["all_pairs"]]
    return [(t, k, 64, None, False) for t, k, _exp in kq["all_pairs"]]


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_batch_equals_single_queries_on_real_stores(name):
    """Every (topic, key) a manifest names, grouped by topic, plus absent keys mixed in; where
    RocketMQ answered queryOffset on a clean store (queryMessage's, sorted, on DLedger), its answer."""
    qs = fixture_queries(name)
    assert qs
    by_topic: dict[str, list] = {}
    for q in qs:
        by_topic.setdefault(q[0], []).append(q)
    compared = 0
    with MessageStore.open(unpack(name)) as store:
        idx = store.index
        for topic, group in by_topic.items():
            keys = [k for _t, k, *_ in group]
            mixed = [x for k in keys for x in (k, k + "-absent")]
            got = check(idx, topic, mixed, 64)
            assert got[1::2] == [[]] * len(keys)
            got = idx.query_offsets(topic, keys, 64, 0, LONG_MAX)   # the default cap, maxMsgsNumBatch
            for (_t, key, max_num, expected, srt), offs in zip(group, got):
                if max_num == 64 and expected is not None and name in AS_READ:
                    assert (sorted(offs) if srt else offs) == expected, (topic, key)
                    compared += 1
        if name in AS_READ:
            assert compared > 0.9 * len(qs)


@pytest.mark.parametrize("name", CLEAN)
def test_batch_answers_rocketmqs_cases(name):
    """The manifests' cases (maxNum, time windows) asked as batches: each key among others."""
    cases = manifest(name)["key_queries"]["cases"]
    with MessageStore.open(unpack(name)) as store:
        for c in cases:
            keys = [c["key"] + "-absent", c["key"], c["key"]]
            got = store.index.query_offsets(c["topic"], keys, c["maxNum"], c["begin"], c["end"])
            assert got == [[], c["queryOffset_phyOffsets"], c["queryOffset_phyOffsets"]], c["label"]


# ---- generated indexes --------------------------------------------------------------------

def gen_store(root: Path, sizes, slots: int, index_num: int, shift: int) -> Path:
    """A store of index files only: file j holds keys K0.. K(sizes[j]-1) (bench/index_gen),
    its times moved to begin at T0 + j * shift (overlapping files when shift < its size); a
    size 0 is an all-zero file (a file created and never written)."""
    (root / "index").mkdir(parents=True)
    (root / "commitlog").mkdir()
    size = INDEX_HEADER_DTYPE.itemsize + 4 * slots + INDEX_ENTRY_DTYPE.itemsize * index_num
    for j, n in enumerate(sizes):
        path = root / "index" / f"2026010100000{j:04d}"
        if n == 0:
            with open(path, "wb") as fh:
                fh.truncate(size)
            continue
        index_gen.build(path, TOPIC, n, slots, index_num)
        h = np.memmap(path, dtype=INDEX_HEADER_DTYPE, mode="r+", shape=(1,))
        h["beginTimestamp"] = index_gen.T0 + j * shift
        h["endTimestamp"] = index_gen.T0 + j * shift + n - 1
        h.flush()
        del h
    return root


def windows(idx) -> list[tuple[int, int]]:
    """Whole range, nothing, and windows that begin or end inside files (entry times step by
    a second within a file)."""
    out = [(0, LONG_MAX), (LONG_MAX - 1, LONG_MAX), (0, 0), (LONG_MAX, 0)]
    for f in idx.files:
        b, e = f.header.beginTimestamp, f.header.endTimestamp
        out += [(b, e), (b + 1000, LONG_MAX), (0, b + 999), (b + 1, b + 1500), (e, e)]
    return out


def gen_keys(n: int) -> list[str]:
    return [index_gen.key_of(i) for i in range(0, n, 7)] + ["absent", index_gen.key_of(10 ** 9)]


SLOTS, INDEX_NUM = 97, 4000   # chains of ~30 entries


@pytest.mark.parametrize("shift", [1500, 10_000])
def test_batch_on_generated_indexes_with_several_files(tmp_path, shift):
    root = gen_store(tmp_path / "s", [3000, 500, 0, 2200, 1, 3999], SLOTS, INDEX_NUM, shift)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "index").iterdir()}
    cfg = StoreConfig(maxHashSlotNum=SLOTS, maxIndexNum=INDEX_NUM)
    with MessageStore.open(root, cfg) as store:
        idx = store.index
        assert len(idx.files) == 6
        keys = gen_keys(4000)
        full = check(idx, TOPIC, keys, 64)
        assert max(len(a) for a in full) == 5 and full[0] == [0] * 5   # K0 is in five files
        for i, (b, e) in enumerate(windows(idx)):
            check(idx, TOPIC, keys[i % 7::3], 64, b, e)
        for max_num in (1, 2, 3, 5, 64):
            for cap in (0, 1, 4, 64, None):
                check(idx, TOPIC, keys[::5], max_num, 0, LONG_MAX, cap=cap)
    assert before == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "index").iterdir()}


def test_batch_on_keys_with_more_hits_than_max_num(tmp_path):
    """A store written here: shared keys with 80 hits each over rolling index files."""
    cfg = StoreConfig(mappedFileSizeCommitLog=1 << 20, maxHashSlotNum=11, maxIndexNum=300)
    with MessageStore.create(tmp_path / "s", cfg) as store:
        for i in range(400):
            store.put_message(TOPIC, b"m%d" % i, keys=[f"shared{i % 5}", f"k{i}", "订单" if i % 9 == 0 else "x"])
    with MessageStore.open(tmp_path / "s", cfg) as store:
        idx = store.index
        assert len(idx.files) > 3
        keys = [f"shared{i}" for i in range(5)] + [f"k{i}" for i in range(0, 400, 13)] + ["订单", "x", "none"]
        for max_num in range(1, 65, 9):
            got = check(idx, TOPIC, keys, max_num)
            assert len(got[0]) == max_num
        assert len(check(idx, TOPIC, keys, 64)[0]) == 64
        for b, e in windows(idx)[:12]:
            check(idx, TOPIC, keys, 64, b, e)


def test_batch_on_damaged_chains(tmp_path):
    """One damage per slot chain, so every one is reached: a link to the entry itself, forward
    into another chain, a cycle (only the step bound ends it), past indexCount, negative, a
    negative time; slots out of range. Each key's walk ends where its single walk ends."""
    slot_num = 13
    root = gen_store(tmp_path / "s", [900, 1200], slot_num, 1300, 10_000)
    last = sorted((root / "index").iterdir())[-1]
    e = np.memmap(last, dtype=INDEX_ENTRY_DTYPE, mode="r+",
                  offset=INDEX_HEADER_DTYPE.itemsize + 4 * slot_num, shape=(1300,))
    slots = np.memmap(last, dtype=">i4", mode="r+", offset=INDEX_HEADER_DTYPE.itemsize, shape=(slot_num,))
    chains = [np.flatnonzero(e["keyHash"][1:1201] % slot_num == s) + 1 for s in range(slot_num)]
    mid = [int(c[len(c) // 2]) for c in chains]             # an entry halfway down each chain
    e["prevIndex"][mid[0]] = mid[0]                         # to itself
    e["prevIndex"][mid[1]] = int(chains[2][-1])             # forward, into another chain's newest
    e["prevIndex"][mid[3]] = int(chains[3][len(chains[3]) // 2 + 2])   # a cycle of three
    e["prevIndex"][mid[4]] = 5000                           # past indexCount
    e["prevIndex"][mid[5]] = -4
    e["timeDiff"][mid[6]] = -1
    slots[7], slots[8], slots[9] = 5000, -7, 1_000_000
    e.flush()
    slots.flush()
    del e, slots
    cfg = StoreConfig(maxHashSlotNum=slot_num, maxIndexNum=1300)
    with MessageStore.open(root, cfg) as store:
        idx = store.index
        keys = [index_gen.key_of(i) for i in range(1200)]
        for max_num in (1, 2, 64):
            got = check(idx, TOPIC, keys, max_num)
        k = mid[0] - 1   # the self-linked entry's key: found once in each file holding it
        assert got[k] == [k * index_gen.PHY_STEP] * (2 if k < 900 else 1)
        assert max(len(x) for x in got) == 64    # the cycle's keys: a hit on every lap


def test_key_lists_of_every_length_against_the_lanes(tmp_path):
    """0, 1 and lengths around the lane count, lists, tuples and generators, duplicate keys."""
    root = gen_store(tmp_path / "s", [2000, 1500], SLOTS, INDEX_NUM, 1000)
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=SLOTS, maxIndexNum=INDEX_NUM)) as store:
        idx = store.index
        pool = [index_gen.key_of(i * 3 % 2200) for i in range(1001)]
        for n in LANE_EDGES:
            keys = pool[:n]
            check(idx, TOPIC, keys, 64)
            check(idx, TOPIC, keys + keys[::-1], 3)
            assert idx.query_offsets(TOPIC, tuple(keys), 64) == idx.query_offsets(TOPIC, iter(keys), 64) \
                == singles(idx, TOPIC, keys, 64, cap=None)
        assert idx.query_offsets(TOPIC, [], 64) == []
        assert idx.query_offsets("OtherTopic", pool[:40], 64) == [[]] * 40


@pytest.mark.skipif(KERNEL is None, reason="compiled module not built or turned off")
def test_query_many_is_query_key_by_key(tmp_path):
    """The kernel itself: KeyIndex.query_many against KeyIndex.query, max_num 0 too, and over
    no file at all."""
    root = gen_store(tmp_path / "s", [3000, 0, 800], SLOTS, INDEX_NUM, 2000)
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=SLOTS, maxIndexNum=INDEX_NUM)) as store:
        ki = KERNEL.KeyIndex(store.index.files)
        keys = gen_keys(3000)
        for max_num in (0, 1, 2, 64):
            for b, e in windows(store.index)[:9]:
                assert ki.query_many(TOPIC, keys, max_num, b, e) == [ki.query(TOPIC, k, max_num, b, e) for k in keys]
    empty = KERNEL.KeyIndex([])
    assert empty.query_many(TOPIC, ["a", "b"], 64, 0, LONG_MAX) == [[], []]
    with pytest.raises(TypeError):
        empty.query_many(TOPIC, ["a", 5], 64, 0, LONG_MAX)


@pytest.mark.skipif(KERNEL is None, reason="compiled module not built or turned off")
def test_batch_answers_are_ordinary_collected_lists(tmp_path):
    """query_many keeps its answer lists away from the cycle collector while it fills them;
    what it returns is tracked again: a cycle made through an answer is collected."""
    import gc
    import weakref
    root = gen_store(tmp_path / "s", [500], SLOTS, INDEX_NUM, 1000)
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=SLOTS, maxIndexNum=INDEX_NUM)) as store:
        got = store.index.query_offsets(TOPIC, [index_gen.key_of(i) for i in range(40)] + ["absent"], 64)
    assert gc.is_tracked(got) and all(gc.is_tracked(a) for a in got)

    class Marker:
        pass
    m = Marker()
    got[0].append(got)   # answer -> answers -> answer
    got[-1].append(m)
    ref = weakref.ref(m)
    del m, got
    gc.collect()
    assert ref() is None
