"""The RocksDB ConsumeQueue's keys and values (5.x `storeType=defaultRocksDB`), declared once.

Column family `default`, one entry per CQ unit (RocksDBConsumeQueueTable):

    key   = topicLen i32 | 0x01 | topic (UTF-8) | 0x01 | queueId i32 | 0x01 | cqOffset i64
    value = commitLogOffset i64 | size i32 | tagsCode i64 | storeTimestamp i64   (28 bytes)

Column family `offset`, one entry per queue and bound (RocksDBConsumeQueueOffsetTable):

    key   = topicLen i32 | 0x01 | topic | 0x01 | "max" or "min" | 0x01 | queueId i32
    value = commitLogOffset i64 | cqOffset i64   (16 bytes: the last unit written, or the min)

except for topic CHECKPOINT_TOPIC, `max`, queue 0, whose 8-byte value is the commitlog offset
up to which dispatch was committed. Big-endian throughout; RocksDB's bytewise comparator
sorts keys by topic length, topic, queue id, then offset."""
from __future__ import annotations

import struct

import numpy as np

CTRL_1 = 0x01
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"   # TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC
COLUMN_FAMILIES = ("default", "offset")
MAX, MIN = "max", "min"

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TAIL = struct.Struct(">BiBq")             # 0x01 queueId 0x01 cqOffset
_OFFSET_TAIL = struct.Struct(">B3sBi")     # 0x01 "max"/"min" 0x01 queueId

CQ_VALUE = struct.Struct(">qiqq")
CQ_VALUE_SIZE = CQ_VALUE.size              # 28
CQ_VALUE_DTYPE = np.dtype([
    ("commitLogOffset", ">i8"),
    ("size", ">i4"),
    ("tagsCode", ">i8"),
    ("storeTimestamp", ">i8"),             # the file-based unit has none: time lookups need no commitlog read
])
OFFSET_VALUE = struct.Struct(">qq")        # commitLogOffset, cqOffset
CHECKPOINT_VALUE = _I64                    # the committed max commitlog offset
assert CQ_VALUE_DTYPE.itemsize == CQ_VALUE_SIZE == 28 and OFFSET_VALUE.size == 16


def _topic_head(topic: str) -> bytes:
    t = topic.encode("utf-8")
    return _I32.pack(len(t)) + bytes([CTRL_1]) + t


# ---- default CF: CQ units ------------------------------------------------------------------
def queue_prefix(topic: str, queue_id: int) -> bytes:
    """Every unit key of one queue starts with these bytes (topicLen ... queueId 0x01)."""
    return _topic_head(topic) + struct.pack(">BiB", CTRL_1, queue_id, CTRL_1)


def cq_key(topic: str, queue_id: int, cq_offset: int) -> bytes:
    return _topic_head(topic) + _TAIL.pack(CTRL_1, queue_id, CTRL_1, cq_offset)


def decode_cq_key(key: bytes) -> tuple[str, int, int]:
    """(topic, queueId, cqOffset); ValueError when the bytes are not a unit key."""
    n = _topic_len(key)
    if len(key) != n + 19:
        raise ValueError(f"CQ unit key of {len(key)} bytes for a topic of {n}")
    c1, qid, c2, off = _TAIL.unpack_from(key, 5 + n)
    if key[4] != CTRL_1 or c1 != CTRL_1 or c2 != CTRL_1:
        raise ValueError("CQ unit key without its 0x01 separators")
    return key[5:5 + n].decode("utf-8", "replace"), qid, off


def key_offsets(keys: list[bytes]) -> np.ndarray:
    """The cqOffset of each unit key (its last 8 bytes), in one go."""
    return np.frombuffer(b"".join(k[-8:] for k in keys), ">i8").astype(np.int64)


def encode_cq_value(commit_log_offset: int, size: int, tags_code: int, store_timestamp: int) -> bytes:
    return CQ_VALUE.pack(commit_log_offset, size, tags_code, store_timestamp)


def decode_cq_value(value: bytes) -> tuple[int, int, int, int]:
    """(commitLogOffset, size, tagsCode, storeTimestamp)."""
    if len(value) != CQ_VALUE_SIZE:
        raise ValueError(f"CQ unit value of {len(value)} bytes, not {CQ_VALUE_SIZE}")
    return CQ_VALUE.unpack(value)


def cq_values(values: list[bytes]) -> np.ndarray:
    """Values of consecutive units as one structured array (CQ_VALUE_DTYPE)."""
    if any(len(v) != CQ_VALUE_SIZE for v in values):
        raise ValueError("a CQ unit value is not 28 bytes")
    return np.frombuffer(b"".join(values), CQ_VALUE_DTYPE)


# ---- offset CF: max/min per queue, the checkpoint ------------------------------------------
def offset_key(topic: str, bound: str, queue_id: int) -> bytes:
    return _topic_head(topic) + _OFFSET_TAIL.pack(CTRL_1, bound.encode("ascii"), CTRL_1, queue_id)


def decode_offset_key(key: bytes) -> tuple[str, str, int]:
    """(topic, "max"|"min", queueId); ValueError when the bytes are not an offset key."""
    n = _topic_len(key)
    if len(key) != n + 14:
        raise ValueError(f"offset key of {len(key)} bytes for a topic of {n}")
    c1, bound, c2, qid = _OFFSET_TAIL.unpack_from(key, 5 + n)
    if key[4] != CTRL_1 or c1 != CTRL_1 or c2 != CTRL_1 or bound not in (b"max", b"min"):
        raise ValueError("offset key without its 0x01 separators or max/min")
    return key[5:5 + n].decode("utf-8", "replace"), bound.decode("ascii"), qid


def encode_offset_value(commit_log_offset: int, cq_offset: int) -> bytes:
    return OFFSET_VALUE.pack(commit_log_offset, cq_offset)


def decode_offset_value(value: bytes) -> tuple[int, int]:
    """(commitLogOffset, cqOffset)."""
    if len(value) != OFFSET_VALUE.size:
        raise ValueError(f"offset value of {len(value)} bytes, not 16")
    return OFFSET_VALUE.unpack(value)


def checkpoint_key() -> bytes:
    return offset_key(CHECKPOINT_TOPIC, MAX, 0)


def decode_checkpoint_value(value: bytes) -> int:
    if len(value) != CHECKPOINT_VALUE.size:
        raise ValueError(f"checkpoint value of {len(value)} bytes, not 8")
    return CHECKPOINT_VALUE.unpack(value)[0]


def _topic_len(key: bytes) -> int:
    if len(key) < 5:
        raise ValueError("key shorter than its topic length")
    n = _I32.unpack_from(key)[0]
    if n < 0 or 5 + n > len(key):
        raise ValueError(f"topic length {n} does not fit a {len(key)}-byte key")
    return n
