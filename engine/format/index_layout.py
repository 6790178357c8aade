"""The IndexFile layout, declared once (engine/format/layout.pxd repeats it for the kernels):

    [0, 40)                header
    [40, 40 + 4*S)         S slots, i32: newest entry number for the slot, 0 = empty
    [.., + 20*N)           N entries; entry #0 is never used (numbers start at 1)

    header: beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 | endPhyOffset i64
            hashSlotCount i32 (slots that were empty when used) | indexCount i32 (next entry no.)
    entry:  keyHash i32 | commitLogOffset i64 | timeDiff i32 (s after beginTimestamp) | prevIndex i32"""
from __future__ import annotations

import struct

import numpy as np

INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
OFF_BEGIN_TIMESTAMP = 0    # header fields
OFF_END_TIMESTAMP = 8
OFF_BEGIN_PHY_OFFSET = 16
OFF_END_PHY_OFFSET = 24
OFF_HASH_SLOT_COUNT = 32
OFF_INDEX_COUNT = 36
OFF_ENTRY_HASH = 0         # entry fields
OFF_ENTRY_PHY = 4
OFF_ENTRY_TIMEDIFF = 12
OFF_ENTRY_PREV = 16

# The query copy of a file's chains (engine/store/index_accel.py), in memory only, little-endian:
# a directory of 64-byte lines, one per 3 slots: u32 the line's first overflow record, the 3
# slots' chain lengths (u8), then each slot's newest record (16 bytes) in place; every slot's
# older records in the overflow array, slot after slot.
ACCEL_DIR_SLOTS = 3
ACCEL_DIR_LINE = 64
OFF_ACCEL_LINE_LENGTHS = 4
OFF_ACCEL_LINE_RECORDS = 8
ACCEL_MAX_CHAIN = 255
ACCEL_RECORD_SIZE = 16
OFF_ACCEL_HASH = 0
OFF_ACCEL_TIMEDIFF = 4
OFF_ACCEL_PHY = 8

INDEX_HEADER_DTYPE = np.dtype([
    ("beginTimestamp", ">i8"), ("endTimestamp", ">i8"),
    ("beginPhyOffset", ">i8"), ("endPhyOffset", ">i8"),
    ("hashSlotCount", ">i4"), ("indexCount", ">i4"),
])
INDEX_ENTRY_DTYPE = np.dtype([
    ("keyHash", ">i4"),      # index_key_hash("topic#key")
    ("commitLogOffset", ">i8"),    # commitlog offset of the message
    ("timeDiff", ">i4"),     # whole seconds after the header's beginTimestamp
    ("prevIndex", ">i4"),    # previous entry in the same slot, 0 ends the chain
])
# the same layouts as structs, for single reads and writes straight on the map
SLOT = struct.Struct(">i")
ENTRY = struct.Struct(">iqii")
HEADER = struct.Struct(">qqqqii")
HEADER_TIMES = struct.Struct(">qqqq")
assert INDEX_HEADER_DTYPE.itemsize == HEADER.size == INDEX_HEADER_SIZE
ACCEL_RECORD_DTYPE = np.dtype([("keyHash", "<i4"), ("timeDiff", "<i4"), ("commitLogOffset", "<i8")])
assert ACCEL_RECORD_DTYPE.itemsize == ACCEL_RECORD_SIZE
assert OFF_ACCEL_LINE_LENGTHS + ACCEL_DIR_SLOTS <= OFF_ACCEL_LINE_RECORDS
assert OFF_ACCEL_LINE_RECORDS + ACCEL_DIR_SLOTS * ACCEL_RECORD_SIZE <= ACCEL_DIR_LINE
assert INDEX_ENTRY_DTYPE.itemsize == ENTRY.size == INDEX_ENTRY_SIZE


def index_file_size(slots: int, entries: int) -> int:
    """40 + 4*S + 20*N."""
    return INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + entries * INDEX_ENTRY_SIZE


def slot_pos(slot: int) -> int:
    return INDEX_HEADER_SIZE + slot * INDEX_SLOT_SIZE


def entry_pos(slots: int, n: int) -> int:
    """Where entry number n starts in a file of `slots` slots."""
    return INDEX_HEADER_SIZE + slots * INDEX_SLOT_SIZE + n * INDEX_ENTRY_SIZE


NO_SLOT = -1


def slot_of(key_hash: int, slots: int) -> int:
    """The slot a stored keyHash belongs to, by IndexFile.putKey / selectPhyOffset:
    slotPos = keyHash % hashSlotNum, where keyHash = indexKeyHashMethod(key) =
    Math.abs(hashCode) (0 for Integer.MIN_VALUE) is never negative. A negative stored keyHash
    is damage: Java's % would give a negative slot, so it belongs to no slot's chain (NO_SLOT)
    and no query ever matches it (a query's hash is never negative)."""
    return key_hash % slots if key_hash >= 0 else NO_SLOT


def slots_of(key_hash: np.ndarray, slots: int) -> np.ndarray:
    """slot_of over an array of keyHash values (int64 result, NO_SLOT where negative)."""
    h = np.asarray(key_hash, dtype=np.int64)
    return np.where(h >= 0, h % slots, NO_SLOT)
