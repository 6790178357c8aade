"""Key queries over the in-memory chain copies (IndexService.accelerate, engine/store/index_accel.py,
the compiled walker's _select_copy): every answer -- offsets and lastUpdate fields -- is exactly the
Python reference's (IndexService._query_offset_py(accel=False)) and what the compiled in-place walk
gave before accelerate: on the stores the real RocketMQ wrote (and what it answered), on generated
indexes of many geometries (long chains, an empty file, a full file), on damaged files the copy
must refuse, after puts that make a copy stale, within byte budgets, batched, and on read-only
stores that must not change. The copies themselves are checked slot by slot against
IndexFile.chain, and an independent reading of "the writer's shape" says which files get one.

Run compiled and with RMQSTORE_PURE_PYTHON=1: with the compiled module off, accelerate still
builds the copies (numpy) and the answers stay the reference's; the tests that prove the compiled
walker reads a copy skip."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from bench import index_gen
from conftest import unpack
from engine import MessageStore, StoreConfig, accel
from engine.format.index_layout import ACCEL_DIR_LINE, ACCEL_DIR_SLOTS, ACCEL_MAX_CHAIN, ACCEL_RECORD_DTYPE
from engine.format.javahash import index_key, index_key_hash, java_hash
from engine.format.index_layout import OFF_ACCEL_LINE_LENGTHS, OFF_ACCEL_LINE_RECORDS
from engine.store.index_accel import accel_bytes, build_accel, file_accel_bytes, slot_records
from engine.store.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, LONG_MAX, IndexFile
from test_live_and_cli import tree_digest as tree_hashes
from test_query_batch import TOPIC, check, fixture_queries, gen_keys, gen_store, windows
from test_query_kernel import SMALL, _damage, _write

KERNEL = accel.load("_query")
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="compiled module not built or turned off")
# the stores whose manifest answers are the index as it is read (crashed ones: after recovery)
AS_READ = {"default", "small", "v5", "dledger"}


# ---- helpers ----------------------------------------------------------------------------------

def ref(idx, topic, key, max_num, begin=0, end=LONG_MAX, cap=0):
    return idx._query_offset_py(topic, key, max_num, begin, end, cap=cap, accel=False)


def answers(idx, queries) -> list:
    """query_offset's whole answers (offsets, lastUpdateTimestamp, lastUpdatePhyOffset)."""
    return [idx.query_offset(t, k, m, b, e, cap=c) for t, k, m, b, e, c in queries]


def assert_agree(idx, queries, before=None) -> list:
    """Each query's answer equals the reference's (and, given, the answer from before accelerate)."""
    got = answers(idx, queries)
    for i, q in enumerate(queries):
        t, k, m, b, e, c = q
        want = ref(idx, t, k, m, b, e, c)
        assert got[i] == want, q
        if before is not None:
            assert got[i] == before[i], q
    return got


def key_with_hash(topic: str, target: int, stem: str) -> str:
    """A key whose "topic#key" has String.hashCode == target (0 <= target < 2^31): the stem, a
    pseudo-random tag (so the prefix's hash is spread), then three chars that make up the rest
    (c1*961 + c2*31 + c3, all BMP)."""
    for n in range(100000):
        prefix = f"{stem}~{hashlib.md5(str(n).encode()).hexdigest()[:8]}"
        h = java_hash(index_key(topic, prefix)) & 0xFFFFFFFF
        rest = (target - h * 31 ** 3) & 0xFFFFFFFF
        c1, r = divmod(rest, 961)
        if 0x20 <= c1 < 0xD800:
            key = prefix + chr(c1) + chr(r // 31) + chr(r % 31)
            assert index_key_hash(index_key(topic, key)) == target
            return key
    raise AssertionError("no key found")


def colliding(topic: str, key: str, slot_num: int) -> tuple[str, str]:
    """(a key with key's very 32-bit hash, a key in key's slot with another hash): both absent."""
    h = index_key_hash(index_key(topic, key))
    other = h + slot_num if h + slot_num < (1 << 31) else h - slot_num
    return key_with_hash(topic, h, "same-hash"), key_with_hash(topic, other, "same-slot")


def writer_shape(f) -> bool:
    """Independently of build_accel: is every slot's chain (IndexFile.chain) exactly the entries
    whose keyHash % slotNum is that slot, newest first, ending with prevIndex 0, and nothing
    outside the copy's limits (negative keyHash/timeDiff, a chain over 255)?"""
    count = f.header.indexCount
    if not 1 <= count <= f.index_num:
        return False
    e = f.entries[1:count]
    kh = e["keyHash"].astype(np.int64)
    if len(e) and (kh.min() < 0 or int(e["timeDiff"].min()) < 0):
        return False
    members: dict[int, list[int]] = {}
    for n, s in zip(range(count - 1, 0, -1), (kh % f.slot_num)[::-1].tolist()):
        members.setdefault(s, []).append(n)
    if any(len(v) > ACCEL_MAX_CHAIN for v in members.values()):
        return False
    if not set(np.flatnonzero(f.slots).tolist()) <= set(members):
        return False
    for s, nums in members.items():
        steps = f.chain(s)
        if [st.index for st in steps] != nums or steps[-1].prevIndex != 0:
            return False
    return True


def copy_chain(acc, s: int) -> list[tuple[int, int, int]]:
    """Slot s's records in a copy, read through its directory: (keyHash, commitLogOffset, timeDiff)."""
    r = slot_records(acc, s)
    return list(zip(r["keyHash"].tolist(), r["commitLogOffset"].tolist(), r["timeDiff"].tolist()))


def copy_lengths(acc) -> np.ndarray:
    """Every slot's chain length in a copy's directory (padding slots of the last line included)."""
    return acc.directory[:, OFF_ACCEL_LINE_LENGTHS:OFF_ACCEL_LINE_LENGTHS + ACCEL_DIR_SLOTS].reshape(-1).astype(np.int64)


def assert_copy_is_the_chains(f, acc) -> None:
    """build_accel's copy of f: for every slot, the records IndexFile.chain walks, in order; the
    directory consistent (overflow starts, zero padding), its size what file_accel_bytes said."""
    lines = -(-f.slot_num // ACCEL_DIR_SLOTS)
    used = int((f.slots.astype(np.int64) > 0).sum())
    assert acc.directory.shape == (lines, ACCEL_DIR_LINE) and acc.directory.dtype == np.uint8
    assert acc.records.dtype == ACCEL_RECORD_DTYPE and len(acc.records) == f.entry_count - used
    assert acc.index_count == f.header.indexCount
    assert acc.nbytes == file_accel_bytes(f) == accel_bytes(f.slot_num, f.entry_count, used)
    lengths = copy_lengths(acc)
    assert not lengths[f.slot_num:].any() and lengths.sum() == f.entry_count
    firsts = acc.directory[:, :4].copy().view("<u4").reshape(-1).astype(np.int64)
    over = np.maximum(lengths - 1, 0).reshape(lines, ACCEL_DIR_SLOTS).sum(axis=1)
    assert firsts[0] == 0 and (np.diff(firsts) == over[:-1]).all()
    for s in range(f.slot_num):
        want = [(st.keyHash, st.commitLogOffset, st.timeDiff) for st in f.chain(s)]
        assert copy_chain(acc, s) == want, s


def expected_build(idx) -> tuple[list[str], list[str]]:
    newest_first = list(reversed(idx.files))
    return ([f.name for f in newest_first if writer_shape(f)], [f.name for f in newest_first if not writer_shape(f)])


def more_windows(idx) -> list[tuple[int, int]]:
    """test_query_batch's windows plus, per file: begin > end inside it, just before it, after it."""
    out = windows(idx)
    for f in idx.files:
        b, e = f.header.beginTimestamp, f.header.endTimestamp
        out += [((b + e) // 2, b), (b - 1, b - 1), (e + 1, LONG_MAX), (b - 1000, e + 1000)]
    return out


# ---- 1. the real RocketMQ's stores --------------------------------------------------------------

@pytest.mark.parametrize("name", ["default", "small", "v5", "dledger", "crashed", "crashed_torn", "v5_crashed"])
def test_copies_on_real_stores_answer_as_the_reference(name):
    """Every file RocketMQ wrote is in the writer's shape, so each gets a copy; then every key of
    the manifest (caps 1, 2, 3, 64; windows inside, at and outside the files, begin > end), an
    absent key, a key with the same 32-bit hash and one in the same slot answer exactly as the
    reference and as before accelerate -- and as RocketMQ answered, where it did on the store as read."""
    qs = fixture_queries(name)
    with MessageStore.open(unpack(name)) as store:
        idx = store.index
        ws = more_windows(idx)
        slot_num = idx.files[-1].slot_num
        queries, collide = [], {}
        for i, (topic, key, *_r) in enumerate(qs):
            w1, w2, w3 = ws[i % len(ws)], ws[(7 * i + 3) % len(ws)], ws[(13 * i + 5) % len(ws)]
            queries.append((topic, key, 64, 0, LONG_MAX, None))   # every key; the rest in turns
            queries.append([(topic, key, 1, 0, LONG_MAX, 0), (topic, key, 2, *w1, 0), (topic, key, 3, *w3, 0),
                            (topic, key, 64, *w2, 0)][i % 4])
            if i % 3 == 0:
                queries.append((topic, key + "-absent", 64, 0, LONG_MAX, 0))
            if i % 5 == 0 and i < 800:
                same_hash, same_slot = collide[(topic, key)] = colliding(topic, key, slot_num)
                queries += [(topic, key, 64, 0, LONG_MAX, 0), (topic, same_hash, 64, 0, LONG_MAX, 0),
                            (topic, same_hash, 2, *w1, 0),
                            (topic, same_slot, 64, 0, LONG_MAX, 0)]
        before = answers(idx, queries)
        built, refused = expected_build(idx)
        assert refused == []   # RocketMQ's own files are all in its shape
        r = idx.accelerate()
        assert (r["built"], r["refused"]) == (built, refused)
        assert r["bytes"] == sum(f.accel.nbytes for f in idx.files) == \
            sum(file_accel_bytes(f) for f in idx.files)
        assert all(f.accel is not None and f.accel.index_count == f.header.indexCount for f in idx.files)
        got = assert_agree(idx, queries, before)
        # a key with the same 32-bit hash finds the same entries (only the hash is stored)
        by_q = dict(zip(queries, got))
        found = 0
        for (topic, key), (same_hash, _) in collide.items():
            offs = by_q[(topic, key, 64, 0, LONG_MAX, 0)][0]
            assert by_q[(topic, same_hash, 64, 0, LONG_MAX, 0)][0] == offs, (topic, key)
            found += bool(offs)
        assert found > len(collide) // 2
        compared = 0
        for topic, key, max_num, expected, srt in qs:
            if name in AS_READ and expected is not None and max_num == 64:
                offs = by_q[(topic, key, 64, 0, LONG_MAX, None)][0]
                assert (sorted(offs) if srt else offs) == expected, (topic, key)
                compared += 1
        if name in AS_READ:
            assert compared > 0.9 * len(qs)
        # 6. the batched call over the same keys
        by_topic: dict[str, list[str]] = {}
        for topic, key, *_r in qs:
            by_topic.setdefault(topic, []).append(key)
        for topic, keys in by_topic.items():
            check(idx, topic, [x for k in keys[::4] for x in (k, k + "-absent")], 64)
            check(idx, topic, keys[1::8], 2, *ws[1 + len(keys) % (len(ws) - 1)])


# ---- 2. generated indexes of other geometries -----------------------------------------------------

GEOMETRIES = [   # (slots, entries per file (0: a never-written file), maxIndexNum): load factors 0.5..20
    (7, [140, 4, 0, 139], 141),        # load 20; the first file full (indexCount == maxIndexNum)
    (13, [6, 260, 0, 1], 300),         # load 0.5 and 20, a file of one entry
    (59, [1180, 30], 1181),            # one directory line, a full file
    (60, [1200, 600], 1300),           # exactly one line
    (61, [31, 1220], 1300),            # one slot into the second line
    (101, [2020, 50, 1010], 2100),     # load 20, 0.5, 10
    (121, [0, 2420], 2500),            # the first file never written
]


def _open_gen(tmp_path, slots, sizes, index_num, shift=1500):
    root = gen_store(tmp_path / "s", sizes, slots, index_num, shift)
    return MessageStore.open(root, StoreConfig(maxHashSlotNum=slots, maxIndexNum=index_num))


def gen_queries(idx, n: int, slot_num: int) -> list:
    keys = gen_keys(n) + [index_gen.key_of(i) for i in range(1, min(n, 60))]
    keys += [k for key in keys[:40:3] for k in colliding(TOPIC, key, slot_num)]
    ws = more_windows(idx)
    out = []
    for i, key in enumerate(keys):
        out += [(TOPIC, key, 64, 0, LONG_MAX, 0), (TOPIC, key, 1, 0, LONG_MAX, 0),
                (TOPIC, key, 2, *ws[i % len(ws)], 0), (TOPIC, key, 64, *ws[(5 * i + 1) % len(ws)], 0)]
    return out


@pytest.mark.parametrize("slots,sizes,index_num", GEOMETRIES)
def test_copies_of_generated_geometries(tmp_path, slots, sizes, index_num):
    with _open_gen(tmp_path, slots, sizes, index_num) as store:
        idx = store.index
        queries = gen_queries(idx, max(sizes), slots)
        before = answers(idx, queries)
        r = idx.accelerate()
        assert r["built"] == [f.name for f in reversed(idx.files)] and r["refused"] == []
        assert all(writer_shape(g) for g in idx.files)
        for f, n in zip(idx.files, sizes):
            assert f.entry_count == n
            assert_copy_is_the_chains(f, f.accel)
            assert_copy_is_the_chains(f, build_accel(f))   # built directly: the same
            if n:
                chain_max = int(np.bincount(f.entries[1:n + 1]["keyHash"] % slots).max())
                assert int(copy_lengths(f.accel).max()) == chain_max
        if index_num - 1 in sizes:
            assert idx.files[sizes.index(index_num - 1)].is_write_full
        got = assert_agree(idx, queries, before)
        if sum(1 for n in sizes if n) > 1:
            assert max(len(a[0]) for a in got) >= 2   # keys found in several files
        check(idx, TOPIC, gen_keys(max(sizes)), 64)
        check(idx, TOPIC, gen_keys(max(sizes))[::2], 1, *windows(idx)[5])


def test_copies_of_a_writers_rolling_index(tmp_path):
    """Files written by the engine's writer (7 slots, 40 entries: 13 messages a file), CJK and
    non-BMP keys included."""
    with MessageStore.create(tmp_path / "s", StoreConfig.from_mapping(SMALL)) as store:
        _write(store, 120)
    with MessageStore.open(tmp_path / "s", StoreConfig.from_mapping(SMALL)) as store:
        idx = store.index
        assert len(idx.files) > 8
        keys = ["shared0", "shared4", "订单", "e\U0001F600", "z1", "k3", "k119", "k60", "none"]
        queries = [(f"T{t}", k, m, b, e, 0) for t in range(3) for k in keys for m in (1, 2, 64)
                   for b, e in more_windows(idx)[::5]]
        before = answers(idx, queries)
        r = idx.accelerate()
        assert r["built"] == [f.name for f in reversed(idx.files)]
        for f in idx.files:
            assert_copy_is_the_chains(f, f.accel)
        assert_agree(idx, queries, before)
        from test_query_kernel import reference_query   # the store's query_message over the copies
        ws = more_windows(idx)
        for i, key in enumerate(keys):
            for raw in (True, False):
                args = ("T1", key, *ws[i % len(ws)], 64)
                assert store.query_message(*args, raw=raw) == reference_query(store, *args, raw), args


# ---- 3. refusals --------------------------------------------------------------------------------

R_SLOTS, R_INDEX_NUM = 13, 700


def _chains(path, slots, count):
    e = np.memmap(path, dtype=INDEX_ENTRY_DTYPE, mode="r", offset=INDEX_HEADER_DTYPE.itemsize + 4 * slots,
                  shape=(count,))
    kh = np.asarray(e["keyHash"][1:count]).astype(np.int64)
    del e
    return [(np.flatnonzero(kh % slots == s) + 1)[::-1].tolist() for s in range(slots)]   # newest first


def damage_edits(kind: str, chains, count: int) -> list:
    """(entry number | slot, field, value) for _damage: one damage of `kind`."""
    c = chains[3]
    mid = c[len(c) // 2]
    return {
        "prev_forward": [(mid, "prev", c[1])],                     # to a newer entry: a cycle
        "prev_forward_other_chain": [(mid, "prev", chains[5][0])],
        "prev_self": [(mid, "prev", mid)],
        "prev_beyond_count": [(mid, "prev", count + 3)],
        "prev_far_out": [(mid, "prev", 10 ** 7)],
        "prev_negative": [(mid, "prev", -2)],
        "prev_skips_one": [(mid, "prev", c[len(c) // 2 + 2])],
        "prev_cut_short": [(mid, "prev", 0)],
        "oldest_links_on": [(c[-1], "prev", chains[4][-1])],
        "slot_head_plus_one": [(3, "slot", c[0] + 1)],
        "slot_head_minus_one": [(3, "slot", c[0] - 1)],
        "slot_head_older": [(3, "slot", c[1])],
        "slot_emptied": [(3, "slot", 0)],
        "time_negative": [(mid, "diff", -1)],
        "hash_negative": [(mid, "hash", -1 - int(index_gen.key_hashes(TOPIC, count)[mid - 1]))],
        "hash_to_another_slot": [(mid, "hash", int(index_gen.key_hashes(TOPIC, count)[mid - 1]) + 1)],
    }[kind]


REFUSED = ["prev_forward", "prev_forward_other_chain", "prev_self", "prev_beyond_count", "prev_far_out",
           "prev_negative", "prev_skips_one", "prev_cut_short", "oldest_links_on", "slot_head_plus_one",
           "slot_head_minus_one", "slot_head_older", "slot_emptied", "time_negative", "hash_negative",
           "hash_to_another_slot"]


def _refusal_store(tmp_path, edits_for):
    """Two files of generated keys; the newer one damaged by edits_for(chains, indexCount)."""
    root = gen_store(tmp_path / "s", [400, 600], R_SLOTS, R_INDEX_NUM, 10_000)
    last = sorted((root / "index").iterdir())[-1]
    _damage(last, R_SLOTS, edits_for(_chains(last, R_SLOTS, 601), 601))
    return root


def _refusal_queries(idx):
    ws = more_windows(idx)
    keys = [index_gen.key_of(i) for i in range(600)] + ["absent"]
    return [(TOPIC, k, m, *ws[(i + m) % len(ws)], 0) for i, k in enumerate(keys) for m in (1, 64)] + \
           [(TOPIC, k, m, 0, LONG_MAX, 0) for k in keys for m in (2, 64)]


@pytest.mark.parametrize("kind", REFUSED)
def test_damaged_files_are_refused_and_walked_in_place(tmp_path, kind):
    root = _refusal_store(tmp_path, lambda chains, count: damage_edits(kind, chains, count))
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=R_SLOTS, maxIndexNum=R_INDEX_NUM)) as store:
        idx = store.index
        older, last = idx.files
        assert writer_shape(older) and not writer_shape(last)
        assert build_accel(last) is None
        queries = _refusal_queries(idx)
        before = answers(idx, queries)
        r = idx.accelerate()
        assert (r["built"], r["refused"]) == ([older.name], [last.name])
        assert last.accel is None and older.accel is not None and r["bytes"] == older.accel.nbytes
        assert_agree(idx, queries, before)
        check(idx, TOPIC, [index_gen.key_of(i) for i in range(0, 600, 3)], 64)
        assert idx.accelerate()["refused"] == [last.name]   # asked again: refused again, same answers
        assert_agree(idx, queries[::7], before[::7])


def _lying_count_store(tmp_path, count):
    import struct
    root = _refusal_store(tmp_path, lambda chains, n: [])
    last = sorted((root / "index").iterdir())[-1]
    with open(last, "r+b") as fh:
        fh.seek(36)   # IndexHeader.indexCount
        fh.write(struct.pack(">i", count))
    return MessageStore.open(root, StoreConfig(maxHashSlotNum=R_SLOTS, maxIndexNum=R_INDEX_NUM))


@pytest.mark.parametrize("count", [R_INDEX_NUM + 5, 2 ** 31 - 1, 300, 0, -4])
def test_a_header_count_that_lies_gets_no_copy(tmp_path, count):
    """The header's indexCount past maxIndexNum, cut back below the entries the slots point at,
    zero or negative (read as 1: no entry, slots still set): no copy for that file, and the
    answers are the in-place walk's."""
    with _lying_count_store(tmp_path, count) as store:
        idx = store.index
        older, f = idx.files
        queries = _refusal_queries(idx)
        before = answers(idx, queries)
        r = idx.accelerate()
        assert f.accel is None and f.name not in r["built"] and build_accel(f) is None and not writer_shape(f)
        assert (f.header.indexCount == 1) == (count <= 0)
        assert_agree(idx, queries, before)
        if count < 2 ** 30:
            assert r["refused"] == [f.name] and r["built"] == [older.name]


def test_a_huge_lying_count_does_not_cost_the_older_files_their_copies(tmp_path):
    with _lying_count_store(tmp_path, 2 ** 31 - 1) as store:
        idx = store.index
        r = idx.accelerate()
        assert r["built"] == [idx.files[0].name] and r["refused"] == [idx.files[1].name]


@pytest.mark.parametrize("kind", ["hash_within_slot", "time_moved"])
def test_changes_that_keep_the_writers_shape_are_copied(tmp_path, kind):
    """An entry's hash moved within its slot, or its timeDiff changed: still the writer's shape;
    the copy carries the changed values and the answers follow them."""
    def edits(chains, count):
        mid = chains[3][len(chains[3]) // 2]
        h = int(index_gen.key_hashes(TOPIC, count)[mid - 1])
        return [(mid, "hash", h + R_SLOTS)] if kind == "hash_within_slot" else [(mid, "diff", 7)]
    root = _refusal_store(tmp_path, edits)
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=R_SLOTS, maxIndexNum=R_INDEX_NUM)) as store:
        idx = store.index
        queries = _refusal_queries(idx)
        before = answers(idx, queries)
        r = idx.accelerate()
        assert r["refused"] == [] and len(r["built"]) == 2
        assert_copy_is_the_chains(idx.files[-1], idx.files[-1].accel)
        assert_agree(idx, queries, before)


@pytest.mark.parametrize("entries,slots,built", [(255, 1, True), (256, 1, False), (600, 2, False), (509, 2, True)])
def test_chains_over_255_entries_are_not_copied(tmp_path, entries, slots, built):
    """A chain length is one byte of the directory: a slot of 256+ entries (any file with one)
    is walked in place; 255 is copied."""
    root = gen_store(tmp_path / "s", [entries], slots, entries + 10, 0)
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=slots, maxIndexNum=entries + 10)) as store:
        idx = store.index
        f = idx.files[0]
        longest = int(np.bincount(f.entries[1:entries + 1]["keyHash"] % slots).max())
        assert (longest <= ACCEL_MAX_CHAIN) == built
        queries = [(TOPIC, index_gen.key_of(i), m, 0, LONG_MAX, 0) for i in range(0, entries, 3) for m in (1, 64)]
        queries += [(TOPIC, index_gen.key_of(i), 64, *w, 0) for i, w in enumerate(more_windows(idx))]
        before = answers(idx, queries)
        r = idx.accelerate()
        assert (r["built"], r["refused"]) == (([f.name], []) if built else ([], [f.name]))
        assert (build_accel(f) is not None) == built == writer_shape(f)
        if built:
            assert int(copy_lengths(f.accel).max()) == longest
            assert_copy_is_the_chains(f, f.accel)
        assert_agree(idx, queries, before)


# ---- 4. staleness: puts after accelerate -----------------------------------------------------------

STALE_CFG = dict(mappedFileSizeCommitLog=1 << 20, maxHashSlotNum=7, maxIndexNum=400)


def _stale_queries(store, n_msgs):
    keys = [f"shared{i}" for i in range(5)] + [f"k{i}" for i in range(0, n_msgs, 7)] + ["late0", "late1", "none"]
    ws = more_windows(store.index)[::3]
    return [(f"T{t}", k, m, *ws[(i + t) % len(ws)], 0) for t in range(3) for i, k in enumerate(keys)
            for m in (2, 64)] + [(f"T{t}", k, 64, 0, LONG_MAX, None) for t in range(3) for k in keys]


def _put(store, start, n):
    for i in range(start, start + n):
        store.put_message(f"T{i % 3}", b"m%d" % i, keys=[f"k{i}", f"shared{i % 5}", f"late{i % 2}" if i >= 60 else "x"])


def test_a_put_makes_the_copy_stale_and_accelerate_rebuilds_it(tmp_path):
    with MessageStore.create(tmp_path / "s", StoreConfig.from_mapping(STALE_CFG)) as store:
        idx = store.index
        _put(store, 0, 60)
        assert len(idx.files) == 1
        r = idx.accelerate()
        last = idx.files[-1]
        assert r["built"] == [last.name] and last.accel.index_count == last.header.indexCount
        assert_agree(idx, _stale_queries(store, 60))
        count = last.header.indexCount
        _put(store, 60, 10)                      # the writer's path (put_message)
        assert last.header.indexCount > count and last.accel.index_count == count   # stale, still attached
        q = _stale_queries(store, 70)
        got = assert_agree(idx, q)
        assert any(a[0] for qq, a in zip(q, got) if qq[1] == "late0"), "the new keys are found"
        assert_agree(idx, q)                     # (and again, the walker now built)
        check(idx, "T1", [f"k{i}" for i in range(70)] + ["late1", "shared2"], 64)
        end_phy = last.header.endPhyOffset   # build_index's own put, at the last record's offset
        assert last.put_key(index_key("T2", "direct"), end_phy, last.header.endTimestamp)
        assert idx.query_offset("T2", "direct", 64, 0, LONG_MAX, cap=0) == ref(idx, "T2", "direct", 64)
        assert ref(idx, "T2", "direct", 64)[0] == [end_phy]
        r = idx.accelerate()
        assert r["built"] == [last.name] and last.accel.index_count == last.header.indexCount
        assert_copy_is_the_chains(last, last.accel)
        assert_agree(idx, _stale_queries(store, 70))
        assert idx.accelerate()["built"] == []   # nothing changed: nothing rebuilt
        _put(store, 70, 130)                     # rolls over to new files
        assert len(idx.files) > 1
        assert_agree(idx, _stale_queries(store, 200))
        r = idx.accelerate()
        assert r["built"] == [f.name for f in reversed(idx.files)]   # the old last one (now full) too
        for f in idx.files:
            assert f.accel.index_count == f.header.indexCount
            assert_copy_is_the_chains(f, f.accel)
        assert_agree(idx, _stale_queries(store, 200))


@needs_kernel
def test_the_walker_reads_the_copy_only_while_it_is_fresh(tmp_path):
    """Proof the compiled walker reads the copy (else every test above would pass with the copy
    ignored): an offset changed in the copy shows in the compiled answer, not the reference's;
    after a put the same tampered copy is no longer read; accelerate puts a true copy back."""
    with MessageStore.create(tmp_path / "s", StoreConfig.from_mapping(STALE_CFG)) as store:
        idx = store.index
        _put(store, 0, 40)
        idx.accelerate()
        last = idx.files[-1]
        want = ref(idx, "T1", "shared1", 64)
        assert want[0] and idx.query_offset("T1", "shared1", 64, 0, LONG_MAX, cap=0) == want
        last.accel.records["commitLogOffset"] += 1          # every record: the overflow, the lines' newest
        width = ACCEL_DIR_SLOTS * ACCEL_RECORD_DTYPE.itemsize
        newest = last.accel.directory[:, OFF_ACCEL_LINE_RECORDS:OFF_ACCEL_LINE_RECORDS + width].copy().view(ACCEL_RECORD_DTYPE)
        newest["commitLogOffset"] += 1
        last.accel.directory[:, OFF_ACCEL_LINE_RECORDS:OFF_ACCEL_LINE_RECORDS + width] = \
            newest.view(np.uint8).reshape(len(last.accel.directory), width)
        tampered = idx.query_offset("T1", "shared1", 64, 0, LONG_MAX, cap=0)
        assert tampered[0] == [o + 1 for o in want[0]] and tampered[1:] == want[1:]
        _put(store, 40, 1)
        q = _stale_queries(store, 41)
        assert_agree(idx, q)                     # the tampered copy is stale: walked in place
        idx.accelerate()
        assert_agree(idx, q)


def test_a_live_writer_followed_by_refresh(tmp_path):
    """A read-only store follows another writer: after refresh() (the headers read again) the
    copy of the file written to is stale, answers are the reference's, accelerate rebuilds it."""
    cfg = StoreConfig(maxHashSlotNum=13, maxIndexNum=1000)
    root = gen_store(tmp_path / "s", [300], 13, 1000, 0)
    path = sorted((root / "index").iterdir())[-1]
    with MessageStore.open(root, cfg) as store:
        idx = store.index
        idx.accelerate()
        w = IndexFile(path, 13, 1000, writable=True)
        try:
            for i in range(20):
                w.put_key(index_key(TOPIC, index_gen.key_of(i % 4) if i % 2 else f"NEW{i}"), 10 ** 6 + i,
                          index_gen.T0 + 400 + i)
        finally:
            w.close()
        store.refresh()   # reads the last index files' headers again
        assert idx.files[-1].header.indexCount == 321
        keys = [index_gen.key_of(i) for i in range(8)] + [f"NEW{i}" for i in range(0, 20, 2)] + ["none"]
        queries = [(TOPIC, k, m, 0, LONG_MAX, 0) for k in keys for m in (1, 64)]
        got = assert_agree(idx, queries)
        assert got[2 * 8][0] == [10 ** 6]   # NEW0
        r = idx.accelerate()
        assert r["built"] == [idx.files[-1].name] and r["kept"] == len(idx.files) - 1   # the others still fresh
        assert_copy_is_the_chains(idx.files[-1], idx.files[-1].accel)
        assert_agree(idx, queries, got)


@pytest.mark.parametrize("accelerated", [False, True])
def test_a_live_writer_before_the_reader_refreshes(tmp_path, accelerated):
    """Between a writer's put and the reader's refresh, the answers over a copy are the in-place
    walk's (accelerate must not change them). The writer puts an existing key (entry 301 ==
    the reader's indexCount: walked, 999999 found) then a new one (entry 302: its slot's chain
    ends at once, hiding the slot's older keys)."""
    cfg = StoreConfig(maxHashSlotNum=13, maxIndexNum=1000)
    root = gen_store(tmp_path / "s", [300], 13, 1000, 0)
    path = sorted((root / "index").iterdir())[-1]
    with MessageStore.open(root, cfg) as store:
        idx = store.index
        if accelerated:
            assert idx.accelerate()["built"]
        w = IndexFile(path, 13, 1000, writable=True)
        try:
            w.put_key(index_key(TOPIC, index_gen.key_of(5)), 999_999, index_gen.T0 + 500)
            w.put_key(index_key(TOPIC, "NEW"), 888_888, index_gen.T0 + 600)
        finally:
            w.close()
        new_slot = index_key_hash(index_key(TOPIC, "NEW")) % 13
        neighbours = [k for k in map(index_gen.key_of, range(300))
                      if index_key_hash(index_key(TOPIC, k)) % 13 == new_slot]
        keys = [index_gen.key_of(5), "NEW", index_gen.key_of(6)] + neighbours[:5]
        assert ref(idx, TOPIC, keys[0], 64)[0] == [999_999, 5 * index_gen.PHY_STEP]
        assert ref(idx, TOPIC, neighbours[0], 64)[0] == []
        assert_agree(idx, [(TOPIC, k, m, 0, LONG_MAX, 0) for k in keys for m in (1, 64)])


# ---- 5. budget ----------------------------------------------------------------------------------

B_SIZES, B_SLOTS, B_INDEX_NUM = [300, 500, 0, 700], 13, 1000


def test_a_budget_keeps_the_newest_files_that_fit(tmp_path):
    with _open_gen(tmp_path / "sizes", B_SLOTS, B_SIZES, B_INDEX_NUM) as store:
        need = [file_accel_bytes(f) for f in store.index.files]   # oldest first
    assert need[0] < accel_bytes(B_SLOTS, 300) and need[2] == accel_bytes(B_SLOTS, 0)
    budgets = [0, need[3] - 1, need[3], need[3] + need[2], need[3] + need[2] + need[1] - 1,
               sum(need) - 1, sum(need), 10 ** 12]
    for j, budget in enumerate(budgets):
        with _open_gen(tmp_path / str(j), B_SLOTS, B_SIZES, B_INDEX_NUM) as store:
            idx = store.index
            queries = gen_queries(idx, 700, B_SLOTS)[::3]
            before = answers(idx, queries)
            r = idx.accelerate(budget=budget)
            k, total = 0, 0   # the newest files whose sum fits, no more
            while k < len(need) and total + need[-1 - k] <= budget:
                total += need[-1 - k]
                k += 1
            assert r["built"] == [f.name for f in reversed(idx.files)][:k] and r["refused"] == []
            assert r["bytes"] == total <= budget
            assert [f.accel is not None for f in idx.files] == [i >= len(need) - k for i in range(len(need))]
            assert_agree(idx, queries, before)
            check(idx, TOPIC, gen_keys(700), 64)


def test_a_refused_file_costs_no_budget(tmp_path):
    """The newest file refused (damaged): the older files still get copies within the budget."""
    root = gen_store(tmp_path / "s", [300, 500], B_SLOTS, B_INDEX_NUM, 10_000)
    last = sorted((root / "index").iterdir())[-1]
    _damage(last, B_SLOTS, [(10, "diff", -1)])
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=B_SLOTS, maxIndexNum=B_INDEX_NUM)) as store:
        idx = store.index
        r = idx.accelerate(budget=accel_bytes(B_SLOTS, 500))   # room for the older file's copy only
        assert (r["built"], r["refused"]) == ([idx.files[0].name], [idx.files[1].name])
        assert r["bytes"] == file_accel_bytes(idx.files[0]) < accel_bytes(B_SLOTS, 300)
        assert_agree(idx, gen_queries(idx, 500, B_SLOTS)[::2])


def test_a_smaller_budget_later_is_kept_too(tmp_path):
    with _open_gen(tmp_path, B_SLOTS, B_SIZES, B_INDEX_NUM) as store:
        idx = store.index
        idx.accelerate()
        budget = accel_bytes(B_SLOTS, 700)
        r = idx.accelerate(budget=budget)
        assert_agree(idx, gen_queries(idx, 700, B_SLOTS)[::5])
        assert r["bytes"] <= budget


# ---- 7. read-only stores stay untouched -------------------------------------------------------------

@pytest.mark.parametrize("name", ["small", "crashed_torn"])
def test_accelerated_read_only_store_is_not_modified(fixture_copy, name):
    root = fixture_copy(name)
    before = tree_hashes(root)
    pairs = [(t, k) for t, k, *_r in fixture_queries(name)][::3]
    with MessageStore.open(root) as store:
        idx = store.index
        r = idx.accelerate()
        assert len(r["built"]) == len(idx.files)
        queries = [(t, k, m, 0, LONG_MAX, 0) for t, k in pairs for m in (1, 64)]
        assert_agree(idx, queries)
        check(idx, pairs[0][0], [k for t, k in pairs if t == pairs[0][0]], 64)
        store.query_message(pairs[0][0], pairs[0][1])
        idx.accelerate()
    assert tree_hashes(root) == before


# ---- 8. the copy needs no compiled code ----------------------------------------------------------

def test_build_accel_is_plain_numpy_and_its_answers_hold(tmp_path):
    """Compiled or not: the copy, read back in Python through its directory, answers every key
    as IndexFile.select does over the file (hash and time tested, newest first, capped)."""
    with _open_gen(tmp_path, 31, [900], 1000) as store:
        f = store.index.files[0]
        acc = build_accel(f)
        assert acc is not None and isinstance(acc.records, np.ndarray)
        bt = f.header.beginTimestamp
        for i, key in enumerate([index_gen.key_of(i) for i in range(0, 900, 11)] + ["absent"]):
            h = index_key_hash(index_key(TOPIC, key))
            for max_num, begin, end in ((64, 0, LONG_MAX), (1, 0, LONG_MAX), (64, bt + 1000, LONG_MAX), (64, 0, bt)):
                out = []
                for kh, phy, diff in copy_chain(acc, h % f.slot_num):
                    if len(out) >= max_num:
                        break
                    t = bt + diff * 1000
                    if kh == h and begin <= t <= end:
                        out.append(phy)
                    if t < begin:
                        break
                want = []
                f.select(index_key(TOPIC, key), max_num, begin, end, want)
                assert out == want, (key, max_num, begin, end)


def test_entry_times_wrap_as_javas_long(tmp_path):
    """A header whose beginTimestamp is near Long.MAX_VALUE (damage): beginTimestamp + timeDiff *
    1000 wraps in RocketMQ's long arithmetic, so entries past the wrap read as times near
    Long.MIN_VALUE and a walk from begin=0 stops at them. The reference, the compiled walk in
    place and the walk of the copy all compare the wrapped time."""
    from engine.store.index_file import entry_time
    assert entry_time(LONG_MAX - 500, 1) == -(1 << 63) + 499
    assert entry_time(-5, 3) == 2995 and entry_time(LONG_MAX - 2000, 2) == LONG_MAX
    root = gen_store(tmp_path / "s", [300], 13, 1000, 0)
    path = sorted((root / "index").iterdir())[-1]
    h = np.memmap(path, dtype=INDEX_HEADER_DTYPE, mode="r+", shape=(1,))
    h["beginTimestamp"] = LONG_MAX - 100      # entries 1.. (timeDiff 0) fit; none after a wrap here
    h.flush()
    del h
    e = np.memmap(path, dtype=INDEX_ENTRY_DTYPE, mode="r+", offset=INDEX_HEADER_DTYPE.itemsize + 4 * 13,
                  shape=(1000,))
    e["timeDiff"][150:301] = 7                 # the newer half wraps: 7 s past the end of time
    e.flush()
    del e
    keys = [index_gen.key_of(i) for i in range(300)] + ["absent"]
    queries = [(TOPIC, k, m, b, en, 0) for k in keys
               for m, b, en in ((64, 0, LONG_MAX), (64, -(1 << 63), LONG_MAX), (1, -(1 << 63), 0))]
    with MessageStore.open(root, StoreConfig(maxHashSlotNum=13, maxIndexNum=1000)) as store:
        idx = store.index
        before = assert_agree(idx, queries)
        assert not any(before[3 * i][0] for i in range(149, 300))   # wrapped: before begin=0
        assert all(before[3 * i + 1][0] for i in range(149, 300))   # found from Long.MIN_VALUE on
        assert idx.accelerate()["built"] == [path.name]
        assert_agree(idx, queries, before)
