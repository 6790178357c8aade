"""The ConsumeQueue unit, declared once (engine/format/layout.pxd repeats it for the kernels):

    +0 commitLogOffset i64 | +8 size i32 | +12 tagsCode i64      (big-endian, 20 bytes)

A queue that starts late is padded with filler units (0, FILLER_SIZE, 0)."""
from __future__ import annotations

import struct

import numpy as np

CQ_UNIT_SIZE = 20
OFF_UNIT_PHY = 0
OFF_UNIT_SIZE = 8
OFF_UNIT_TAGS = 12
FILLER_SIZE = 0x7FFFFFFF  # Integer.MAX_VALUE
CQ_UNIT_DTYPE = np.dtype([
    ("commitLogOffset", ">i8"),   # commitlog offset of the record
    ("size", ">i4"),        # TOTALSIZE of the record
    ("tagsCode", ">i8"),    # tag hash, delivery time (SCHEDULE_TOPIC_XXXX) or ext address
])
CQ_UNIT = struct.Struct(">qiq")
CQ_UNIT_HEAD = struct.Struct(">qi")   # commitLogOffset and size only
FILLER_UNIT = CQ_UNIT.pack(0, FILLER_SIZE, 0)
assert CQ_UNIT_DTYPE.itemsize == CQ_UNIT.size == CQ_UNIT_SIZE


# getMessage examines at most max(maxFilterMessageSize, maxMsgNums * unit size) bytes of units per
# call (4.9.7 hardcodes 16000; 5.3.3's maxFilterMessageSize defaults to it): a broker page ends
# there even when every unit was passed over
MAX_FILTER_MESSAGE_SIZE = 16000

# why getMessage passed over a unit (GetMessageResult.skipped)
WHY_FILLER = "filler unit"
WHY_EXPIRED = "record expired"
WHY_INVALID = "no valid record of that size there"


def roll_next_file(offset: int, file_size: int, unit_size: int = CQ_UNIT_SIZE) -> int:
    """ConsumeQueue.rollNextFile: the first queue offset of the file after the one `offset`
    falls in (getMessage's nextBeginOffset where no CQ file holds `offset`); `offset` itself
    for a queue without files (RocksDB's)."""
    per = file_size // unit_size
    return offset + per - offset % per if per > 0 else offset


def broker_unit_cap(max_count: int, unit_size: int = CQ_UNIT_SIZE) -> int:
    """How many units one broker getMessage examines at most."""
    return max(MAX_FILTER_MESSAGE_SIZE, max_count * unit_size) // unit_size


def is_filler(phy, size):
    """A filler unit (ints or numpy arrays)."""
    return (phy == 0) & (size == FILLER_SIZE)
