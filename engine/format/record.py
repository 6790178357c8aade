"""The CommitLog record layout, declared once (engine/format/layout.pxd repeats it for the
compiled kernels; tests/test_format_layout.py keeps the two equal), and the one record walker.

Big-endian, signed; BH / SH (born / store host) are 8 bytes for IPv4 (address + port), 20 for
IPv6; TLS (the TOPICLENGTH field) is 1 byte in V1 records, 2 in V2:

    +0   TOTALSIZE i32 | +4 MAGICCODE i32 | +8 BODYCRC i32 | +12 QUEUEID i32 | +16 FLAG i32
    +20  QUEUEOFFSET i64 | +28 PHYSICALOFFSET i64 | +36 SYSFLAG i32 | +40 BORNTIMESTAMP i64
    +48  BORNHOST (BH) | STORETIMESTAMP i64 | STOREHOST (SH) | RECONSUMETIMES i32
         PREPAREDTXOFFSET i64 | BODYLENGTH i32 | BODY | TOPICLENGTH (TLS) | TOPIC
         PROPERTIESLENGTH i16 | PROPERTIES

    TOTALSIZE == 74 + BH + SH + max(B,0) + TLS + T + max(P,0)      (Java's own check)

Offsets past BORNHOST move with the hosts: OFF_STORETIMESTAMP is +BH, the later ones +BH+SH."""
from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass

import numpy as np

MESSAGE_MAGIC_V1 = -626843481  # 0xDAA320A7
MESSAGE_MAGIC_V2 = -626843477  # 0xDAA320AB
BLANK_MAGIC = -875286124       # 0xCBD43194: the end-of-file filler record (TOTALSIZE, MAGIC)
BLANK_RECORD_MIN = 8           # the bytes a BLANK record needs: Java keeps this much room at a file's end

# SYSFLAG's transaction bits (MessageSysFlag) and their names as MessageExt reports them
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_NAMES = {0x0: "NOT_TYPE", 0x4: "PREPARED", 0x8: "COMMIT", 0xC: "ROLLBACK"}

OFF_TOTALSIZE = 0
OFF_MAGICCODE = 4
OFF_BODYCRC = 8
OFF_QUEUEID = 12
OFF_FLAG = 16
OFF_QUEUEOFFSET = 20
OFF_PHYSICALOFFSET = 28
OFF_SYSFLAG = 36
OFF_BORNTIMESTAMP = 40
OFF_BORNHOST = 48
HEAD_SIZE = 48                 # the fixed head: everything before BORNHOST
OFF_STORETIMESTAMP = 48        # + BH
OFF_STOREHOST = 56             # + BH
OFF_RECONSUMETIMES = 56        # + BH + SH
OFF_PREPAREDTXOFFSET = 60      # + BH + SH
OFF_BODYLENGTH = 68            # + BH + SH
OFF_BODY = 72                  # + BH + SH
RECORD_FIXED = 74              # every fixed-width field but the hosts and TOPICLENGTH
HOST_V4 = 8                    # address 4 + port 4
HOST_V6 = 20                   # address 16 + port 4
BORNHOST_V6_FLAG = 0x10        # SYSFLAG bits
STOREHOST_V6_FLAG = 0x20
PROP_CRC_TAIL_SIZE = 20        # 5.2+: `__CRC32#` 0x01 <10 digits> 0x02 ends the properties

_TM = struct.Struct(">ii")  # TOTALSIZE, MAGICCODE


def host_sizes(sys_flag):
    """(BH, SH) for a SYSFLAG (ints or numpy arrays)."""
    if isinstance(sys_flag, np.ndarray):
        return (np.where(sys_flag & BORNHOST_V6_FLAG, HOST_V6, HOST_V4),
                np.where(sys_flag & STOREHOST_V6_FLAG, HOST_V6, HOST_V4))
    return (HOST_V6 if sys_flag & BORNHOST_V6_FLAG else HOST_V4,
            HOST_V6 if sys_flag & STOREHOST_V6_FLAG else HOST_V4)


def record_size(bh: int, sh: int, body_len: int, tls: int, topic_len: int, prop_len: int) -> int:
    """TOTALSIZE a record's fields add up to; negative body and properties lengths count as 0
    (Java's own check)."""
    return (RECORD_FIXED + bh + sh + (body_len if body_len > 0 else 0) + tls + topic_len
            + (prop_len if prop_len > 0 else 0))


def record_sizes(bh, sh, body_len, tls, topic_len, prop_len) -> np.ndarray:
    """record_size over numpy arrays (one value per record)."""
    return RECORD_FIXED + bh + sh + np.maximum(body_len, 0) + tls + topic_len + np.maximum(prop_len, 0)


# the smallest record (V1, IPv4 hosts, empty body, 1-byte topic, no properties): bounds how
# many records a commitlog hole can have held
MIN_RECORD_SIZE = record_size(HOST_V4, HOST_V4, 0, 1, 1, 0)


@dataclass
class Hop:
    starts: np.ndarray   # int64 record positions inside the file
    next_pos: int        # where the next hop would start
    stop: str            # "" = more may follow, "end" = reached `end`, "blank", "invalid"


_EMPTY = np.empty(0, np.int64)


def hop(buf, pos: int, end: int, limit: int, max_records: int = 1 << 16, max_bytes: int = 1 << 25,
        accept_v2: bool = True) -> Hop:
    """The record walker: starts of the records in [pos, end) of one file whose readable data
    ends at `limit`, following TOTALSIZE and reading 8 bytes per record. Stops at a BLANK (end
    of file), at a header check_record refuses (size <= 0, past `limit`, unknown magic, fewer
    than 8 bytes left), or when `max_records` / `max_bytes` are reached."""
    starts = array("q")
    app = starts.append
    unpack = _TM.unpack_from
    first = pos
    n = 0
    v1 = MESSAGE_MAGIC_V1
    v2 = MESSAGE_MAGIC_V2 if accept_v2 else MESSAGE_MAGIC_V1
    blank = BLANK_MAGIC
    stop = ""
    while True:
        if pos >= end:
            stop = "end"
            break
        if limit - pos < 8:
            stop = "invalid"
            break
        total, magic = unpack(buf, pos)
        if magic == blank:
            stop = "blank"
            break
        if total <= 0 or total > limit - pos or (magic != v1 and magic != v2):
            stop = "invalid"
            break
        app(pos)
        pos += total
        n += 1
        if n >= max_records or pos - first >= max_bytes:
            if pos >= end:
                stop = "end"
            break
    return Hop(np.frombuffer(starts, dtype=np.int64) if n else _EMPTY, pos, stop)
