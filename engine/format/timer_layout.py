"""The 5.x timer store's byte layouts (TimerLog, TimerWheel, TimerCheckpoint), declared once.
Big-endian, like everything Java's ByteBuffer writes.

    timerlog unit (52 bytes, TimerLog.UNIT_SIZE), appended by TimerMessageStore.doEnqueue:
        +0 size i32 (52) | +4 prevPos i64 (previous unit of the same wheel slot, -1 = none)
        +12 magic i32 (1 default | 2 roll | 4 delete) | +16 currWriteTimeMs i64
        +24 delayTime i32 (slot time - currWriteTimeMs) | +28 offsetPy i64 (commitlog offset of
        the rmq_sys_wheel_timer record) | +36 sizePy i32 | +40 realTopicHash i32 | +44 reserved i64

    end of a timerlog file: when a unit + MIN_BLANK_LEN (16) does not fit, a blank record
        remaining i32 | 0 i64 | BLANK_MAGIC i32, then zeros; the next unit is in the next file.
        BLANK_MAGIC is Java's `0xBBCCDDEE ^ 1880681586 + 8`: `+` binds first, so it is
        -875286124 (0xCBD43194), the commitlog's blank magic, not what the expression looks like.

    wheel slot (32 bytes; slot i at byte 32*i of `timerwheel`, slotsTotal*2 slots):
        +0 time i64 (in precision units: timeMs / precisionMs) | +8 firstPos i64 | +16 lastPos i64
        +24 num i32 | +28 magic i32

    timercheck (first 56 bytes of a 4096-byte page): seven i64, TIMERCHECK_FIELDS."""
from __future__ import annotations

import struct

import numpy as np

from engine.format.record import BLANK_MAGIC

TIMER_TOPIC = "rmq_sys_wheel_timer"          # TimerMessageStore.TIMER_TOPIC

TIMERLOG_UNIT_SIZE = 52
TIMERLOG_MIN_BLANK_LEN = 16
TIMERLOG_BLANK_MAGIC = (0xBBCCDDEE ^ (1880681586 + 8)) - (1 << 32)   # Java's precedence, as an int
assert TIMERLOG_BLANK_MAGIC == BLANK_MAGIC == -875286124

MAGIC_DEFAULT = 1
MAGIC_ROLL = 2
MAGIC_DELETE = 4

TIMERLOG_UNIT_DTYPE = np.dtype([
    ("size", ">i4"),
    ("prevPos", ">i8"),
    ("magic", ">i4"),
    ("currWriteTimeMs", ">i8"),
    ("delayTime", ">i4"),
    ("offsetPy", ">i8"),
    ("sizePy", ">i4"),
    ("realTopicHash", ">i4"),
    ("reserved", ">i8"),
])
TIMERLOG_UNIT = struct.Struct(">iqiqiqiiq")
TIMERLOG_BLANK = struct.Struct(">iqi")   # remaining bytes, 0, BLANK_MAGIC
TIMERLOG_SIZE = struct.Struct(">i")      # the first field of a unit or a blank
assert TIMERLOG_UNIT_DTYPE.itemsize == TIMERLOG_UNIT.size == TIMERLOG_UNIT_SIZE

WHEEL_SLOT_SIZE = 32
WHEEL_SLOT_DTYPE = np.dtype([
    ("time", ">i8"),        # precision units, not ms
    ("firstPos", ">i8"),
    ("lastPos", ">i8"),
    ("num", ">i4"),
    ("magic", ">i4"),
])
WHEEL_SLOT = struct.Struct(">qqqii")
assert WHEEL_SLOT_DTYPE.itemsize == WHEEL_SLOT.size == WHEEL_SLOT_SIZE

TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 86400
SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS          # 604800, whatever the precision
WHEEL_SLOTS = SLOTS_TOTAL * 2                          # the file holds two laps
WHEEL_FILE_SIZE = WHEEL_SLOTS * WHEEL_SLOT_SIZE        # 38,707,200 bytes

TIMERCHECK_SIZE = 4096
TIMERCHECK_FIELDS = ("lastReadTimeMs", "lastTimerLogFlushPos", "lastTimerQueueOffset", "masterTimerQueueOffset",
                     "dataVersionStateVersion", "dataVersionTimestamp", "dataVersionCounter")
TIMERCHECK = struct.Struct(">" + "q" * len(TIMERCHECK_FIELDS))

# properties the timer hook and TimerMessageStore put on records (MessageConst)
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"

# defaults of MessageStoreConfig
DEFAULT_TIMER_PRECISION_MS = 1000
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024


def slot_index(time_ms, precision_ms: int, slots: int = WHEEL_SLOTS):
    """TimerWheel.getSlotIndex: (timeMs / precisionMs) % (slotsTotal * 2) (ints or arrays)."""
    return (time_ms // precision_ms) % slots


def unit_kind(magic: int) -> str:
    """'delete', 'roll' or 'normal' for a unit's magic bits."""
    if magic & MAGIC_DELETE:
        return "delete"
    return "roll" if magic & MAGIC_ROLL else "normal"

# the same units and slots unpacked to native integers (what readers keep), with their position
TIMERLOG_UNIT_NATIVE = np.dtype([("pos", "i8")] + [(n, TIMERLOG_UNIT_DTYPE[n].newbyteorder("=").str)
                                                  for n in TIMERLOG_UNIT_DTYPE.names])
WHEEL_SLOT_NATIVE = np.dtype([("index", "i8")] + [(n, WHEEL_SLOT_DTYPE[n].newbyteorder("=").str)
                                                 for n in WHEEL_SLOT_DTYPE.names])
