"""A slot-ordered copy of an index file's chains, in memory, for key queries.

A key query in the file itself is a chain of dependent cache misses: the slot, then every
entry of the slot's chain, each found from the one before (prevIndex). In an intact file the
chain from slot s is exactly the entries whose keyHash % slotNum is s, newest first: the writer
links each new entry to the slot's head before it. This copy lays every slot's chain out in
that order where a query finds it at once: the newest record in the slot's directory line, the
older ones contiguous in the overflow records, whose lines are requested together. A query
costs one miss (a chain of one: most chains at low load) or two, at any load factor.

Layout (engine/format/index_layout.py ACCEL_*; little-endian, native to the compiled walker
in engine/accel/_query.pyx):
    directory  one 64-byte line per 3 slots: u32 the line's first overflow record, 3 u8
               chain lengths, 1 byte unused, the 3 slots' newest records, 8 bytes unused
    records    the overflow: each slot's older records (its chain after the newest), slot
               after slot; a slot's start is the line's plus the overflow of the slots before
               it in the line
    record     16 bytes: i32 keyHash | i32 timeDiff | i64 commitLogOffset

It is built only when that shape is proven over the whole file (every slot's head and every
prevIndex link as the writer makes them, no negative keyHash or timeDiff, no chain over 255):
the walk over the copy then meets exactly the entries IndexFile.select meets, in the same
order, and applies the same hash, time and count tests. Any other file (damage, a hand-made
chain, a pathological slot) is walked in the file as before. A copy holds for the indexCount
it was built at, in this process's header and in the file's: a walker uses it only while
both still have it (IndexAccel.fresh; a put makes it stale).

Cost: 64 bytes per 3 slots plus 16 per entry beyond a slot's first (340 MB for a full default
file of 20 million entries in 5 million slots, 115 MB for a quarter-full one); about a second
to make compiled, several in numpy (bench/NOTES.md). It is made on request only
(IndexService.accelerate, or its task, which the GUI runs after an open); queries never wait
for it."""
from __future__ import annotations

import mmap
import sys
from dataclasses import dataclass

import numpy as np

from engine.accel import load
from engine.config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from engine.format.index_layout import slots_of
from engine.format.index_layout import (ACCEL_DIR_LINE as DIR_LINE, ACCEL_DIR_SLOTS as DIR_SLOTS,
                                        ACCEL_MAX_CHAIN as MAX_CHAIN, ACCEL_RECORD_DTYPE as RECORD_DTYPE,
                                        OFF_ACCEL_LINE_LENGTHS as OFF_LENGTHS, OFF_ACCEL_LINE_RECORDS as OFF_RECORDS)


@dataclass
class IndexAccel:
    directory: np.ndarray   # uint8 [lines, 64]
    records: np.ndarray     # RECORD_DTYPE [overflow]
    index_count: int        # the header's indexCount it was built at,
    file_count: int         # and the indexCount then in the file's own header (another writer's)

    @property
    def nbytes(self) -> int:
        return self.directory.nbytes + self.records.nbytes

    def fresh(self, f) -> bool:
        """Still the copy of IndexFile f: neither f's header nor the one in its file (which
        another process's writer moves) has a new indexCount. The compiled walker checks the same."""
        return self.index_count == f.header.indexCount and self.file_count == mapped_count(f)


def mapped_count(f) -> int:
    """The indexCount in f's file as it is now (IndexHeader holds this process's view)."""
    return int(f.header_view[0]["indexCount"])


def slot_records(a: IndexAccel, slot: int) -> np.ndarray:
    """A slot's chain in the copy, newest first (RECORD_DTYPE): what the compiled walker reads
    (tests and views read the copy through this)."""
    line = a.directory[slot // DIR_SLOTS]
    k = slot % DIR_SLOTS
    lengths = line[OFF_LENGTHS:OFF_LENGTHS + DIR_SLOTS].astype(np.int64)
    n = int(lengths[k])
    if n == 0:
        return a.records[:0]
    first = line[OFF_RECORDS + k * RECORD_DTYPE.itemsize:OFF_RECORDS + (k + 1) * RECORD_DTYPE.itemsize].view(RECORD_DTYPE)
    start = int(line[:4].view("<u4")[0]) + int(np.maximum(lengths[:k] - 1, 0).sum())
    return np.concatenate([first, a.records[start:start + n - 1]])


def accel_bytes(slot_num: int, entries: int, used: int = 0) -> int:
    """What build_accel holds for a file of this geometry, entry count and used slots (each
    used slot's newest record is in its directory line; without `used`, an upper bound)."""
    return -(-slot_num // DIR_SLOTS) * DIR_LINE + (entries - used) * RECORD_DTYPE.itemsize


def file_accel_bytes(f) -> int:
    """accel_bytes for IndexFile f (what its copy holds, if it gets one), its entry count
    bounded by the geometry (a header's count is read from the file: a damaged one may claim
    anything; build_accel refuses it)."""
    entries = min(max(f.entry_count, 0), max(f.index_num - 1, 0))
    return accel_bytes(f.slot_num, entries, min(int(np.count_nonzero(f.slots.view(np.int32))), entries))


def _zeros(n: int, dtype) -> np.ndarray:
    """n zeroed items in private anonymous memory asked for in 2 MB pages (MADV_HUGEPAGE): the
    copy is read at random, and with 4 KB pages nearly every read also misses the TLB (numpy's
    own advice gave its arrays no huge page on this kernel). Load 0.5, fresh processes in
    turns: 1.95-2.38M queries/s with 2 MB pages, 1.72-2.33M with numpy's 4 KB pages."""
    dtype = np.dtype(dtype)
    size = n * dtype.itemsize
    flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    if size < (2 << 20) or not flags or not hasattr(mmap, "MADV_HUGEPAGE"):
        return np.zeros(n, dtype=dtype)
    m = mmap.mmap(-1, -(-size // (2 << 20)) * (2 << 20), flags=flags)   # whole 2 MB pages: the kernel
    try:                                                                 # then aligns the map to them
        m.madvise(mmap.MADV_HUGEPAGE)
    except OSError:
        pass   # a kernel without THP: 4 KB pages, as np.zeros
    return np.frombuffer(m, dtype=dtype, count=n)   # (the array holds the map; it goes with the array)


def _slots_sorted(slot: np.ndarray) -> np.ndarray:
    """Positions of `slot` (int64, values < 2^31) sorted by value, stable: two stable sorts of
    16-bit halves, which numpy does by radix (one 32-bit stable sort is a merge sort, 5x slower)."""
    o = np.argsort((slot & 0xFFFF).astype(np.uint16), kind="stable")
    return o[np.argsort((slot[o] >> 16).astype(np.uint16), kind="stable")]


def build_accel(f, accel: bool = True) -> IndexAccel | None:
    """The copy of IndexFile f's chains, or None when f is not in the writer's shape (it is
    then walked in the file). Reads f's map; copies everything it keeps. The compiled kernel
    (engine/accel/_index.pyx chain_copy, two passes over the entries) makes it when built;
    the numpy build below is its twin (accel=False), equal byte for byte."""
    slot_num, index_num, count = f.slot_num, f.index_num, f.header.indexCount
    mm, entries = f.file.mm, getattr(f, "entries", None)   # (None once the file is closed)
    entry_base = INDEX_HEADER_SIZE + slot_num * INDEX_SLOT_SIZE
    if (mm is None or entries is None or not 1 <= count <= index_num or not 0 < slot_num <= 0x7FFFFFFF
            or len(mm) < entry_base + index_num * INDEX_ENTRY_SIZE or sys.byteorder != "little"):
        return None   # (the copy is little-endian, native to the compiled walker that reads it)
    m = count - 1
    file_count = mapped_count(f)
    lines = -(-slot_num // DIR_SLOTS)
    kernel = load("_index") if accel else None
    if kernel is not None:
        directory = _zeros(lines * DIR_LINE, np.uint8).reshape(lines, DIR_LINE)
        records = np.empty(m, dtype=RECORD_DTYPE)   # the overflow is written here, then copied to its size
        over = kernel.chain_copy(mm, slot_num, count, directory.reshape(-1), records.view(np.uint8))
        if over < 0:
            return None
        kept = _zeros(over, RECORD_DTYPE)
        kept[:] = records[:over]
        return IndexAccel(directory, kept, count, file_count)
    e = entries[1:count]
    key_hash = e["keyHash"].astype(np.int64)
    diff = e["timeDiff"].astype(np.int32)
    if m and (key_hash.min() < 0 or diff.min() < 0):
        return None
    slot = slots_of(key_hash, slot_num)   # every keyHash is >= 0 here (checked above)
    lengths = np.bincount(slot, minlength=slot_num)
    if m and lengths.max() > MAX_CHAIN:
        return None
    # every slot's entries newest first: entry numbers m..1, sorted stably by slot
    num = m - _slots_sorted(slot[::-1])            # entry numbers in record order
    starts = np.zeros(slot_num + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    used = lengths > 0
    head = np.zeros(slot_num, dtype=np.int64)
    head[used] = num[starts[:-1][used]]
    if not np.array_equal(f.slots.astype(np.int64), head):
        return None
    link = np.zeros(m, dtype=np.int64)             # each record's prevIndex as the writer makes it
    link[:-1] = num[1:]
    link[starts[1:][used] - 1] = 0
    if not np.array_equal(e["prevIndex"].astype(np.int64)[num - 1], link):
        return None
    chain = np.empty(m, dtype=RECORD_DTYPE)           # every record, in copy order
    chain["keyHash"] = key_hash[num - 1]
    chain["timeDiff"] = diff[num - 1]
    chain["commitLogOffset"] = e["commitLogOffset"][num - 1]
    newest = np.zeros(m, dtype=bool)
    newest[starts[:-1][used]] = True
    firsts = np.zeros(lines * DIR_SLOTS, dtype=RECORD_DTYPE)
    firsts[np.flatnonzero(used)] = chain[newest]
    records = _zeros(m - int(used.sum()), RECORD_DTYPE)
    records[:] = chain[~newest]
    directory = _zeros(lines * DIR_LINE, np.uint8).reshape(lines, DIR_LINE)
    padded = np.zeros(lines * DIR_SLOTS, dtype=np.int64)
    padded[:slot_num] = lengths
    directory[:, OFF_LENGTHS:OFF_LENGTHS + DIR_SLOTS] = padded.reshape(lines, DIR_SLOTS)
    directory[:, OFF_RECORDS:OFF_RECORDS + DIR_SLOTS * RECORD_DTYPE.itemsize] = \
        firsts.view(np.uint8).reshape(lines, DIR_SLOTS * RECORD_DTYPE.itemsize)
    over = np.zeros(lines * DIR_SLOTS + 1, dtype=np.int64)
    np.cumsum(np.maximum(padded - 1, 0), out=over[1:])
    directory[:, :4] = over[:-1:DIR_SLOTS].astype("<u4").view(np.uint8).reshape(lines, 4)
    return IndexAccel(directory, records, count, file_count)
