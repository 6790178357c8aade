"""The BatchConsumeQueue unit (RocketMQ 5.x BatchConsumeQueue), declared once:

    +0 commitLogOffset i64 | +8 size i32 | +12 tagsCode i64 | +20 storeTimestamp i64
    +28 msgBaseOffset i64  | +36 batchSize i16 | +38 compactedOffset i32 | +42 reserved i32
                                                              (big-endian, 46 bytes)

A unit covers queue offsets [msgBaseOffset, msgBaseOffset + batchSize): one commitlog record
that holds batchSize inner messages. Files hold fileSize / 46 units, with no end filler: the
first unit whose size is 0 (or whose offset is negative) ends the data."""
from __future__ import annotations

import struct

import numpy as np

BATCH_CQ_UNIT_SIZE = 46
OFF_BATCH_PHY = 0
OFF_BATCH_SIZE = 8
OFF_BATCH_TAGS = 12
OFF_BATCH_STORE_TIME = 20
OFF_BATCH_BASE = 28          # what BatchConsumeQueue.binarySearch compares
OFF_BATCH_NUM = 36
OFF_BATCH_COMPACTED = 38
INVALID_POS = -1             # compactedOffset as dispatch writes it
DEFAULT_BATCH_CQ_FILE_SIZE = 300_000 * BATCH_CQ_UNIT_SIZE  # mapperFileSizeBatchConsumeQueue
BATCH_CQ_DIR = "batchconsumequeue"
QUEUE_TYPE_ATTRIBUTE = "queue.type"     # TopicAttributes.QUEUE_TYPE_ATTRIBUTE
BATCH_CQ = "BatchCQ"                    # CQType names, as RocketMQ spells them
SIMPLE_CQ = "SimpleCQ"

BATCH_CQ_UNIT_DTYPE = np.dtype([
    ("commitLogOffset", ">i8"),
    ("size", ">i4"),
    ("tagsCode", ">i8"),
    ("storeTimestamp", ">i8"),
    ("msgBaseOffset", ">i8"),
    ("batchSize", ">i2"),
    ("compactedOffset", ">i4"),
    ("reserved", ">i4"),
])
BATCH_CQ_UNIT = struct.Struct(">qiqqqhii")
assert BATCH_CQ_UNIT_DTYPE.itemsize == BATCH_CQ_UNIT.size == BATCH_CQ_UNIT_SIZE
assert BATCH_CQ_UNIT_DTYPE.fields["msgBaseOffset"][1] == OFF_BATCH_BASE


def pack_unit(phy: int, size: int, tags_code: int, store_ts: int, base: int, batch_size: int) -> bytes:
    """The unit putBatchMessagePositionInfo writes (compactedOffset INVALID_POS, reserved 0)."""
    return BATCH_CQ_UNIT.pack(phy, size, tags_code, store_ts, base, batch_size, INVALID_POS, 0)


def round_file_size(v: int) -> int:
    """MessageStoreConfig.getMapperFileSizeBatchConsumeQueue: up to whole units."""
    return -(-int(v) // BATCH_CQ_UNIT_SIZE) * BATCH_CQ_UNIT_SIZE


def is_batch_cq_topic(topic_config: dict | None) -> bool:
    """A TopicConfig (topics.json entry) whose `queue.type` attribute is BatchCQ
    (QueueTypeUtils.getCQType; fastjson may store attributes with a '+' add marker)."""
    if not isinstance(topic_config, dict):
        return False
    attrs = topic_config.get("attributes") or {}
    if not isinstance(attrs, dict):
        return False
    for k in (QUEUE_TYPE_ATTRIBUTE, "+" + QUEUE_TYPE_ATTRIBUTE):
        v = attrs.get(k)
        if isinstance(v, str) and v.lower() == BATCH_CQ.lower():
            return True
    return False
