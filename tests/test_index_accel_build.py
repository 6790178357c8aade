"""The chain copy's two builds (engine/store/index_accel.py): the compiled kernel
(engine/accel/_index.pyx chain_copy, two passes over the entries) and the numpy twin give the
same bytes, or both refuse, on the index files RocketMQ wrote, on generated files of other
geometries, and on every kind of damage the copy must refuse (its walk would otherwise not
meet what the walk in the file meets)."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest

from bench import index_gen
from conftest import ALL_FIXTURES, unpack
from engine import MessageStore, accel
from engine.store.index_accel import build_accel, slot_records
from engine.store.index_file import INDEX_ENTRY_DTYPE, INDEX_HEADER_DTYPE, IndexFile

KERNEL = accel.load("_index")
TOPIC = "CopyTopic"


def both(f):
    """(compiled, numpy) copies of f, checked equal; the compiled one is the numpy one when
    the kernel is off (RMQSTORE_PURE_PYTHON=1)."""
    a, b = build_accel(f), build_accel(f, accel=False)
    assert (a is None) == (b is None), f.path
    if a is not None:
        assert a.index_count == b.index_count == f.header.indexCount
        assert np.array_equal(a.directory, b.directory)
        assert a.records.tobytes() == b.records.tobytes()
    return a


def records_of(a, slot):
    return [tuple(int(x) for x in r) for r in slot_records(a, slot)[["keyHash", "timeDiff", "commitLogOffset"]]]


def chain_of(f, slot):
    return [(s.keyHash, s.timeDiff, s.commitLogOffset) for s in f.chain(slot)]


def test_the_kernel_is_built_or_the_twin_runs():
    assert KERNEL is None or hasattr(KERNEL, "chain_copy")


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_builds_agree_on_real_stores(name):
    with MessageStore.open(unpack(name)) as store:
        made = [both(f) for f in store.index.files]
        for f, a in zip(store.index.files, made):
            if a is None:
                continue
            used = np.flatnonzero(f.slots.astype(np.int64) > 0)
            assert len(a.records) == f.entry_count - len(used)   # each used slot's newest is in its line
            for s in used[:: max(1, len(used) // 200)]:   # the copy holds each chain as the file walks it
                assert records_of(a, int(s)) == chain_of(f, int(s))
        assert any(a is not None for a in made) or not store.index.files


@contextmanager
def opened(path, slots, index_num):
    f = IndexFile(path, slots, index_num)
    try:
        yield f
    finally:
        f.close()


def gen(tmp_path, n, slots, index_num=None):
    path = tmp_path / "20260101000000000"
    index_gen.build(path, TOPIC, n, slots, index_num or n + 10)
    return path, slots, index_num or n + 10


@pytest.mark.parametrize("n,slots", [(1, 1), (5, 3), (600, 7), (1000, 101), (4000, 997), (3000, 60), (3000, 61)])
def test_builds_agree_on_generated_files(tmp_path, n, slots):
    path, s, num = gen(tmp_path, n, slots)
    with opened(path, s, num) as f:
        a = both(f)
        used = int((f.slots.astype(np.int64) > 0).sum())
        assert a is not None and len(a.records) == n - used and len(a.directory) == -(-s // 3)
        for slot in range(s):
            assert records_of(a, slot) == chain_of(f, slot)


def test_a_file_with_no_entry_and_one_never_written(tmp_path):
    path, s, num = gen(tmp_path, 50, 13)
    blank = tmp_path / "20260101000000001"
    blank.write_bytes(bytes(INDEX_HEADER_DTYPE.itemsize + 4 * 13 + INDEX_ENTRY_DTYPE.itemsize * 20))
    with opened(blank, 13, 20) as f:
        a = both(f)
        assert a is not None and len(a.records) == 0 and not a.directory.any()


def damage(path, slots, index_num, how):
    hdr = np.memmap(path, dtype=INDEX_HEADER_DTYPE, mode="r", shape=(1,))
    count = int(hdr["indexCount"][0])
    del hdr
    sl = np.memmap(path, dtype=">i4", mode="r+", offset=INDEX_HEADER_DTYPE.itemsize, shape=(slots,))
    e = np.memmap(path, dtype=INDEX_ENTRY_DTYPE, mode="r+", offset=INDEX_HEADER_DTYPE.itemsize + 4 * slots,
                  shape=(index_num,))
    head = next(int(h) for h in sl if h > 0 and e["prevIndex"][h] > 0)   # a chain of two or more
    mid = int(e["prevIndex"][head])   # an entry inside it
    if how == "prev to itself":
        e["prevIndex"][mid] = mid
    elif how == "prev forward":
        e["prevIndex"][mid] = count - 1
    elif how == "prev past indexCount":
        e["prevIndex"][mid] = count + 5
    elif how == "prev negative":
        e["prevIndex"][mid] = -3
    elif how == "prev skips one":
        e["prevIndex"][head] = int(e["prevIndex"][mid])
    elif how == "head off by one":
        sl[int(np.flatnonzero(sl > 0)[0])] += 1
    elif how == "empty slot pointing":
        sl[int(np.flatnonzero(sl == 0)[0])] = 1
    elif how == "negative time diff":
        e["timeDiff"][mid] = -1
    elif how == "negative hash":
        e["keyHash"][mid] = -int(e["keyHash"][mid]) - 1
    elif how == "hash of another slot":
        e["keyHash"][mid] = int(e["keyHash"][mid]) + 1
    sl.flush()
    e.flush()
    del sl, e


DAMAGE = ("prev to itself", "prev forward", "prev past indexCount", "prev negative", "prev skips one",
          "head off by one", "empty slot pointing", "negative time diff", "negative hash", "hash of another slot")


@pytest.mark.parametrize("how", DAMAGE)
def test_both_builds_refuse_damage(tmp_path, how):
    path, s, num = gen(tmp_path, *((60, 101) if how == "empty slot pointing" else (900, 37)))   # some slots empty, or ~24 entries a chain
    damage(path, s, num, how)
    with opened(path, s, num) as f:
        assert both(f) is None


def test_both_builds_refuse_a_chain_of_256(tmp_path):
    path, s, num = gen(tmp_path, 255 * 3, 3)   # 255 a slot: the longest the copy holds
    with opened(path, s, num) as f:
        assert both(f) is not None
    path.unlink()
    path, s, num = gen(tmp_path, 256 * 3 + 1, 3)
    with opened(path, s, num) as f:
        assert both(f) is None


def test_a_large_copy_is_in_its_own_huge_page_map(tmp_path):
    """A copy of 2 MB or more is made in private anonymous memory asked for in 2 MB pages (its
    reads are at random: 4 KB pages add a TLB miss to each); the same bytes as the numpy build's."""
    import mmap
    path, s, num = gen(tmp_path, 300_000, 200_000)    # directory 4.3 MB, overflow 2.3 MB
    with opened(path, s, num) as f:
        a = both(f)
        for arr in (a.directory, a.records):
            owner = arr
            while isinstance(owner, np.ndarray):
                owner = owner.base
            owner = owner.obj if isinstance(owner, memoryview) else owner
            assert isinstance(owner, mmap.mmap) and len(owner) % (2 << 20) == 0
        for slot in range(0, s, 997):
            assert records_of(a, slot) == chain_of(f, slot)
