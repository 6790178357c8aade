"""A slot-ordered copy of an index file's chains, in memory, for key queries.

A key query in the file itself is a chain of dependent cache misses: the slot, then every
entry of the slot's chain, each found from the one before (prevIndex). In an intact file the
chain from slot s is exactly the entries whose keyHash % slotNum is s, newest first: the writer
links each new entry to the slot's head before it. This copy stores every slot's chain
contiguously in that order, so a query costs two misses at any load factor: the slot's
directory line, then its chain (whose lines are requested together).

Layout (engine/format/index_layout.py ACCEL_*; little-endian, native to the compiled walker
in engine/accel/_query.pyx):
    directory  one 64-byte line per 60 slots: u32 the line's first chain record, then 60 u8
               chain lengths (a slot's records start after those of the slots before it)
    records    16 bytes per entry: i32 keyHash | i32 timeDiff | i64 commitLogOffset

It is built only when that shape is proven over the whole file (every slot's head and every
prevIndex link as the writer makes them, no negative timeDiff, no chain over 255): the walk
over the copy then meets exactly the entries IndexFile.select meets, in the same order, and
applies the same hash, time and count tests. Any other file (damage, a hand-made chain, a
pathological slot) is walked in the file as before. The copy holds for the indexCount it was
built at: a walker uses it only while the header still has that count (a put makes it stale).

Cost: 16 bytes per entry plus 64 bytes per 60 slots (325 MB for a full default file of 20
million entries; about a second to make compiled, 5-7 s in numpy; bench/NOTES.md). It is made on request only
(IndexService.accelerate, or its task, which the GUI runs after an open); queries never wait
for it."""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from engine.accel import load
from engine.config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from engine.format.index_layout import (ACCEL_DIR_LINE as DIR_LINE, ACCEL_DIR_SLOTS as DIR_SLOTS,
                                        ACCEL_MAX_CHAIN as MAX_CHAIN, ACCEL_RECORD_DTYPE as RECORD_DTYPE)


@dataclass
class IndexAccel:
    directory: np.ndarray   # uint8 [lines, 64]
    records: np.ndarray     # RECORD_DTYPE [entries]
    index_count: int        # the header's indexCount it was built at

    @property
    def nbytes(self) -> int:
        return self.directory.nbytes + self.records.nbytes


def accel_bytes(slot_num: int, entries: int) -> int:
    """What build_accel will hold for a file of this geometry and entry count."""
    return -(-slot_num // DIR_SLOTS) * DIR_LINE + entries * RECORD_DTYPE.itemsize


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
            or len(mm) < entry_base + index_num * INDEX_ENTRY_SIZE):
        return None
    m = count - 1
    lines = -(-slot_num // DIR_SLOTS)
    kernel = load("_index") if accel else None
    if kernel is not None and sys.byteorder == "little":
        directory = np.zeros((lines, DIR_LINE), dtype=np.uint8)
        records = np.empty(m, dtype=RECORD_DTYPE)
        if not kernel.chain_copy(mm, slot_num, count, directory.reshape(-1), records.view(np.uint8)):
            return None
        return IndexAccel(directory, records, count)
    e = entries[1:count]
    key_hash = e["keyHash"].astype(np.int64)
    diff = e["timeDiff"].astype(np.int32)
    if m and (key_hash.min() < 0 or diff.min() < 0):
        return None
    slot = key_hash % slot_num
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
    records = np.empty(m, dtype=RECORD_DTYPE)
    records["keyHash"] = key_hash[num - 1]
    records["timeDiff"] = diff[num - 1]
    records["commitLogOffset"] = e["commitLogOffset"][num - 1]
    directory = np.zeros((lines, DIR_LINE), dtype=np.uint8)
    padded = np.zeros(lines * DIR_SLOTS, dtype=np.uint8)
    padded[:slot_num] = lengths
    directory[:, 4:] = padded.reshape(lines, DIR_SLOTS)
    directory[:, :4] = starts[:-1:DIR_SLOTS].astype("<u4").view(np.uint8).reshape(lines, 4)
    return IndexAccel(directory, records, count)
