"""CommitLog record codec: decode, validate (message / end-of-file blank / invalid), encode.
The byte layout and the size rule are engine/format/record.py's."""
from __future__ import annotations

import base64
import ipaddress
import re
import struct
import zlib
from dataclasses import dataclass, field
from enum import Enum

from engine import accel
from engine.format import properties as P
from engine.format.crc import crc32
from engine.errors import MessageRejectedError
from engine.format.javahash import tags_code as _tags_code
from engine.format.record import (  # noqa: F401 - re-exported: the codec's users import them from here
    BLANK_MAGIC, BLANK_RECORD_MIN, BORNHOST_V6_FLAG, HEAD_SIZE, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2,
    HOST_V4, HOST_V6, OFF_BORNHOST, OFF_MAGICCODE, OFF_PHYSICALOFFSET, OFF_QUEUEOFFSET, OFF_STORETIMESTAMP,
    OFF_SYSFLAG, PROP_CRC_TAIL_SIZE, STOREHOST_V6_FLAG, TRANSACTION_COMMIT_TYPE, TRANSACTION_NAMES,
    TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE, host_sizes, record_size)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2

_HEAD = struct.Struct(">iiiiiqqiq")  # HEAD_SIZE bytes: total, magic, crc, qid, flag, qoff, phys, sysflag, bornTs
_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
# +48 up to the body, by host family (sysFlag & 0x30): BORNHOST, STORETIMESTAMP, STOREHOST,
# RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, BODYLENGTH in one unpack
_MID = {flags: struct.Struct(f">{bh}sq{sh}siqi") for flags, bh, sh in
        ((0, HOST_V4, HOST_V4), (BORNHOST_V6_FLAG, HOST_V6, HOST_V4), (STOREHOST_V6_FLAG, HOST_V4, HOST_V6),
         (BORNHOST_V6_FLAG | STOREHOST_V6_FLAG, HOST_V6, HOST_V6))}
_INT_RE = re.compile(r"[+-]?\d+\Z")
assert _HEAD.size == HEAD_SIZE


def body_crc(body: bytes) -> int:
    """RocketMQ's UtilAll.crc32: CRC-32 with the top bit cleared."""
    return crc32(body) & 0x7FFFFFFF if body else 0


def format_host(addr: bytes, port: int) -> str:
    """Like Java's InetSocketAddress rendering: IPv6 in full, uncompressed groups."""
    if len(addr) == 4:
        return f"{'.'.join(str(b) for b in addr)}:{port}"
    groups = ":".join(f"{int.from_bytes(addr[i:i + 2], 'big'):x}" for i in range(0, 16, 2))
    return f"[{groups}]:{port}"


def parse_host(text: str) -> tuple[bytes, int]:
    """'ip:port' or '[v6]:port' -> (address bytes, port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, port = text[1:].partition("]:")
    else:
        host, _, port = text.rpartition(":")
    return ipaddress.ip_address(host).packed, int(port)


class RecordStatus(Enum):
    MESSAGE = "message"
    END_OF_FILE = "end-of-file"       # BLANK record: continue at the next file
    INVALID = "invalid"               # torn, zero or unparsable: the end of the valid log
    SIZE_MISMATCH = "size-mismatch"   # header readable but TOTALSIZE disagrees with the fields


class _MessageMethods(P.PropertyFields):
    """What a Message answers beyond its fields (both Message classes below share it)."""
    __slots__ = ()

    @property
    def bornHost(self) -> str:
        return format_host(self.bornHostBytes[:-4], int.from_bytes(self.bornHostBytes[-4:], "big", signed=True))

    @property
    def storeHost(self) -> str:
        return format_host(self.storeHostBytes[:-4], int.from_bytes(self.storeHostBytes[-4:], "big", signed=True))

    @property
    def msgId(self) -> str:
        """Offset message id: store host address, port, stored physical offset, upper hex."""
        return (self.storeHostBytes + _I64.pack(self.physicalOffsetField)).hex().upper()

    @property
    def transactionType(self) -> str:
        return TRANSACTION_NAMES[self.sysFlag & 0x0C]

    @property
    def end_offset(self) -> int:
        return self.commitLogOffset + self.storeSize

    @property
    def is_v2(self) -> bool:
        return self.magicCode == MESSAGE_MAGIC_V2

    def body_decompressed(self) -> bytes:
        """The body as a consumer would see it (RocketMQ compresses; the broker never undoes it)."""
        if not self.sysFlag & COMPRESSED_FLAG:
            return self.body
        return decompress_body(self.body, (self.sysFlag >> 8) & 0x7)

    def to_json(self, with_body: bool = True) -> dict:
        d = {
            "topic": self.topic, "queueId": self.queueId, "queueOffset": self.queueOffset,
            "commitLogOffset": self.commitLogOffset, "storeSize": self.storeSize,
            "bodyCRC": self.bodyCRC, "flag": self.flag, "sysFlag": self.sysFlag,
            "bornTimestamp": self.bornTimestamp, "bornHost": self.bornHost,
            "storeTimestamp": self.storeTimestamp, "storeHost": self.storeHost,
            "reconsumeTimes": self.reconsumeTimes,
            "preparedTransactionOffset": self.preparedTransactionOffset,
            "properties": self.properties, "msgId": self.msgId, "uniqKey": self.uniqKey,
            "tags": self.tags, "keys": self.keys, "tagsCode": self.tagsCode,
            "transactionType": self.transactionType, "magicCode": self.magicCode,
            "bodyLength": len(self.body),
        }
        if with_body:
            d["body"] = base64.b64encode(self.body).decode("ascii")
        return d


FIELD_NAMES = ("topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag",
               "sysFlag", "bornTimestamp", "bornHostBytes", "storeTimestamp", "storeHostBytes",
               "reconsumeTimes", "preparedTransactionOffset", "body", "propertiesRaw", "properties",
               "magicCode", "physicalOffsetField", "tagsCode")


@dataclass(slots=True)
class PyMessage(_MessageMethods):
    """One decoded record, named like RocketMQ's MessageExt (the pure-Python Message)."""
    topic: str
    queueId: int
    queueOffset: int
    commitLogOffset: int          # where the record really is (scan position)
    storeSize: int
    bodyCRC: int
    flag: int
    sysFlag: int
    bornTimestamp: int
    bornHostBytes: bytes
    storeTimestamp: int
    storeHostBytes: bytes
    reconsumeTimes: int
    preparedTransactionOffset: int
    body: bytes
    propertiesRaw: str
    properties: dict
    magicCode: int
    physicalOffsetField: int      # the PHYSICALOFFSET written inside the record
    tagsCode: int = 0


assert tuple(PyMessage.__dataclass_fields__) == FIELD_NAMES
PyMessage.__name__ = PyMessage.__qualname__ = "Message"   # its repr and pickle name, as the compiled one's

_KERNEL = accel.load("_message")   # engine/accel/_message.pyx: the compiled Message (lazy parts, C answers)
Message = PyMessage if _KERNEL is None else _KERNEL.Message


@dataclass(slots=True)
class RecordResult:
    status: RecordStatus
    size: int                     # bytes to advance (0 for blank, -1 when invalid)
    message: Message | None = None
    reason: str = ""


_INVALID_CACHE: dict[str, RecordResult] = {}


def _invalid(reason: str) -> RecordResult:
    r = _INVALID_CACHE.get(reason)
    if r is None:
        r = _INVALID_CACHE[reason] = RecordResult(RecordStatus.INVALID, -1, None, reason)
    return r


@dataclass(slots=True, frozen=True)
class DecodeOptions:
    """What the parser checks; mirrors the recovery/dispatch switches of MessageStoreConfig.
    Frozen: a reader that wants other checks takes another DecodeOptions (dataclasses.replace),
    so the compiled reads may work out an options object's check flags once."""
    check_crc: bool = False
    force_verify_prop_crc: bool = False
    accept_v2: bool = True
    delay_level_millis: list[int] = field(default_factory=lambda: [
        1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000,
        480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000])


DEFAULT_OPTIONS = DecodeOptions()


def check_record(buf, pos: int, limit: int, offset: int, opts: DecodeOptions = DEFAULT_OPTIONS) -> RecordResult:
    """CommitLog.checkMessageAndReturnSize over buf[pos:limit]; `offset` is the physical
    offset of buf[pos]. Never raises on bad bytes: classification is the answer."""
    remaining = limit - pos
    if remaining >= HEAD_SIZE:  # the common case: the fixed head in one unpack
        head = _HEAD.unpack_from(buf, pos)
        total, magic = head[0], head[1]
    else:
        if remaining <= 4:
            return _invalid("no room for a record header")
        head = None
        total = _I32.unpack_from(buf, pos)[0]
        magic = _I32.unpack_from(buf, pos + OFF_MAGICCODE)[0] if remaining >= 8 else None
    if magic == BLANK_MAGIC:
        return RecordResult(RecordStatus.END_OF_FILE, 0)
    if total <= 0:
        return _invalid("zero or negative record size")
    if remaining < total:
        return _invalid("torn record: it runs past the readable data")
    if magic == MESSAGE_MAGIC_V1:
        tls = 1
    elif magic == MESSAGE_MAGIC_V2 and opts.accept_v2:
        tls = 2
    else:
        return _invalid("illegal magic code")
    end = pos + total
    try:
        (_, _, crc, qid, flag, qoff, phys, sysflag, born_ts) = head or _HEAD.unpack_from(buf, pos)
        bh = HOST_V6 if sysflag & BORNHOST_V6_FLAG else HOST_V4
        sh = HOST_V6 if sysflag & STOREHOST_V6_FLAG else HOST_V4
        mid = _MID[sysflag & 0x30]
        born_host, store_ts, store_host, reconsume, prep, body_len = mid.unpack_from(buf, pos + OFF_BORNHOST)
        p = pos + OFF_BORNHOST + mid.size
        if body_len > 0:
            if p + body_len > end:
                return RecordResult(RecordStatus.SIZE_MISMATCH, total, None, "body runs past the record")
            body = bytes(buf[p:p + body_len]); p += body_len
            if opts.check_crc and not opts.force_verify_prop_crc and body_crc(body) != crc:
                return _invalid("body CRC mismatch")
        else:
            body = b""
        if tls == 1:
            topic_len = _I8.unpack_from(buf, p)[0]; p += 1
        else:
            topic_len = _I16.unpack_from(buf, p)[0]; p += 2
        if topic_len < 0 or p + topic_len > end:
            return _invalid("illegal topic length")
        topic = str(buf[p:p + topic_len], "utf-8", "replace"); p += topic_len
        if p + 2 > end:
            return RecordResult(RecordStatus.SIZE_MISMATCH, total, None, "properties length past the record")
        prop_len = _I16.unpack_from(buf, p)[0]; p += 2
        raw_props, props, tcode = "", {}, 0
        if prop_len > 0:
            if p + prop_len > end:
                return RecordResult(RecordStatus.SIZE_MISMATCH, total, None, "properties run past the record")
            raw_props = str(buf[p:p + prop_len], "utf-8", "replace")
            props = P.parse_properties(raw_props)
            tcode = _tags_code(props.get(P.TAGS))
            level = props.get(P.DELAY)
            if topic == SCHEDULE_TOPIC and level is not None:
                if not _INT_RE.match(level):
                    return _invalid("non-numeric DELAY on a scheduled message")
                lv = min(int(level), len(opts.delay_level_millis))
                if lv > 0:
                    tcode = store_ts + opts.delay_level_millis[lv - 1]
            if opts.check_crc and opts.force_verify_prop_crc:
                if not verify_prop_crc(buf, pos, total):
                    return _invalid("record CRC (__CRC32#) mismatch")
    except struct.error:
        return _invalid("record truncated")
    expected = record_size(bh, sh, body_len, tls, topic_len, prop_len)
    if expected != total:
        return RecordResult(RecordStatus.SIZE_MISMATCH, total, None,
                            f"TOTALSIZE {total} != {expected} computed from the fields")
    msg = Message(topic, qid, qoff, offset, total, crc, flag, sysflag, born_ts, born_host, store_ts,
                  store_host, reconsume, prep, body, raw_props, props, magic, phys, tcode)
    return RecordResult(RecordStatus.MESSAGE, total, msg)


def verify_prop_crc(buf, pos: int, total: int) -> bool:
    """5.2+ whole-record CRC: the last 20 bytes are `__CRC32#` 0x01 <10 digits, LSD first> 0x02."""
    tail = bytes(buf[pos + total - PROP_CRC_TAIL_SIZE:pos + total])
    if not (tail[:9] == b"__CRC32#\x01" and tail[-1:] == b"\x02" and tail[9:19].isdigit()):
        return False
    value = int(tail[9:19][::-1])
    return crc32(bytes(buf[pos:pos + total - PROP_CRC_TAIL_SIZE])) & 0x7FFFFFFF == value


def prop_crc_tail(value: int) -> bytes:
    return b"__CRC32#\x01" + f"{value:010d}"[::-1].encode() + b"\x02"


COMPRESSION_NAMES = {0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib"}   # (sysFlag >> 8) & 7; 0: legacy, zlib


class DecompressionTooLarge(ValueError):
    pass


def decompress_body(body: bytes, ctype: int, limit: int | None = None) -> bytes:
    """The body a consumer gets from a compressed one (RocketMQ's zlib, LZ4 frame or ZSTD
    frame). `limit`: refuse (DecompressionTooLarge) an output longer than that many bytes,
    so a small body cannot make a huge one."""
    if ctype in (0, 3):
        if limit is None:
            return zlib.decompress(body)
        d = zlib.decompressobj()
        out = d.decompress(bytes(body), limit + 1)
        if len(out) > limit:
            raise DecompressionTooLarge(f"decompresses to more than {limit:,} bytes")
        if not d.eof:
            raise zlib.error("the zlib stream ends early")
        return out
    if ctype == 1:
        import lz4.frame
        if limit is None:
            return lz4.frame.decompress(body)
        d = lz4.frame.LZ4FrameDecompressor()
        out = d.decompress(bytes(body), limit + 1)
        if len(out) > limit:
            raise DecompressionTooLarge(f"decompresses to more than {limit:,} bytes")
        if not d.eof:
            raise ValueError("the LZ4 frame ends early")
        return out
    if ctype == 2:
        import zstandard
        if limit is not None:  # bounded first: a small body must not make a huge one
            parts, made = [], 0
            with zstandard.ZstdDecompressor().stream_reader(bytes(body), read_across_frames=True) as r:
                while made <= limit and (chunk := r.read(limit + 1 - made)):
                    parts.append(chunk)
                    made += len(chunk)
            if made > limit:
                raise DecompressionTooLarge(f"decompresses to more than {limit:,} bytes")
        d = zstandard.ZstdDecompressor().decompressobj()
        out = d.decompress(bytes(body))
        if not d.eof:  # a cut frame gives what it has without a word: the consumer's decompress fails
            raise zstandard.ZstdError("the ZSTD frame ends early")
        return out
    raise ValueError(f"unknown compression type {ctype}")


DECOMPRESS_CHECK_LIMIT = 256 << 20   # output verified at most: a bomb costs no more than this


def decompression_error(body: bytes, ctype: int) -> str | None:
    """Why a body whose SYSFLAG says compressed would not decompress for a consumer (None: it
    does, or no codec here can tell); decompress_body's rule, verified up to the check's limit
    (a bomb costs no more than that)."""
    try:
        decompress_body(body, ctype, DECOMPRESS_CHECK_LIMIT)
    except (ImportError, DecompressionTooLarge):
        return None
    except Exception as e:  # noqa: BLE001 - each codec has its own error types: all mean "does not decompress"
        return f"{type(e).__name__}: {e}"
    return None


def peek_physical_offset(buf, pos: int) -> int:
    """The record's PHYSICALOFFSET field (where its writer says it starts; not CRC-covered)."""
    return _I64.unpack_from(buf, pos + OFF_PHYSICALOFFSET)[0]


def peek_store_timestamp(buf, pos: int) -> int:
    """CommitLog.pickupStoreTimestamp: read STORETIMESTAMP honouring the born-host family."""
    sysflag = _I32.unpack_from(buf, pos + OFF_SYSFLAG)[0]
    return _I64.unpack_from(buf, pos + OFF_STORETIMESTAMP + host_sizes(sysflag)[0])[0]


# ---- encoding (the write path) --------------------------------------------------------------
@dataclass
class MessageDraft:
    """What a producer hands the store; the store fills in offsets and the store time."""
    topic: str
    body: bytes = b""
    queueId: int = 0
    flag: int = 0
    properties: dict = field(default_factory=dict)
    sysFlag: int = 0
    bornTimestamp: int = 0
    bornHost: bytes = b"\x7f\x00\x00\x01" + (0).to_bytes(4, "big")
    storeHost: bytes = b"\x7f\x00\x00\x01" + (10911).to_bytes(4, "big")
    reconsumeTimes: int = 0
    preparedTransactionOffset: int = 0
    propertiesRaw: str | None = None   # exact stored string (re-encoding a record as it was)


@dataclass
class EncodedRecord:
    data: bytearray
    qoff_pos: int = OFF_QUEUEOFFSET
    phys_pos: int = OFF_PHYSICALOFFSET
    store_ts_pos: int = OFF_STORETIMESTAMP + HOST_V4
    crc_tail: bool = False
    props_raw: bytes = b""        # PROPERTIES as written (before any CRC tail is patched)

    def patch(self, queue_offset: int, physical_offset: int, store_ts: int) -> None:
        d = self.data
        _I64.pack_into(d, self.qoff_pos, queue_offset)
        _I64.pack_into(d, self.phys_pos, physical_offset)
        _I64.pack_into(d, self.store_ts_pos, store_ts)
        if self.crc_tail:
            crc = crc32(memoryview(d)[:len(d) - PROP_CRC_TAIL_SIZE]) & 0x7FFFFFFF
            d[len(d) - PROP_CRC_TAIL_SIZE:] = prop_crc_tail(crc)


def encode_record(m: MessageDraft, v2: bool = False, props_trailing: bool = False,
                  crc_tail: bool = False) -> EncodedRecord:
    """MessageExtEncoder: the full record with queue offset, physical offset and store time
    left to patch at append time (under the append lock)."""
    sys_flag = m.sysFlag
    sys_flag = sys_flag | BORNHOST_V6_FLAG if len(m.bornHost) == HOST_V6 else sys_flag & ~BORNHOST_V6_FLAG
    sys_flag = sys_flag | STOREHOST_V6_FLAG if len(m.storeHost) == HOST_V6 else sys_flag & ~STOREHOST_V6_FLAG
    topic = m.topic.encode("utf-8")
    if m.propertiesRaw is not None:
        praw = m.propertiesRaw.encode("utf-8")
    else:
        props = {k: v for k, v in m.properties.items() if k != P.CRC32_PROP}
        praw = P.serialize_properties(props, trailing=props_trailing).encode("utf-8")
    if crc_tail:
        if praw and not praw.endswith(b"\x02"):
            praw += b"\x02"
        praw += prop_crc_tail(0)
    if len(praw) > 32767:
        raise MessageRejectedError(f"properties are {len(praw)} bytes; the limit is 32767")
    body = m.body or b""
    bh, sh = len(m.bornHost), len(m.storeHost)
    tls = 2 if v2 else 1
    total = record_size(bh, sh, len(body), tls, len(topic), len(praw))
    out = bytearray(total)
    _HEAD.pack_into(out, 0, total, MESSAGE_MAGIC_V2 if v2 else MESSAGE_MAGIC_V1, body_crc(body), m.queueId,
                    m.flag, 0, 0, sys_flag, m.bornTimestamp)
    p = OFF_BORNHOST
    out[p:p + bh] = m.bornHost; p += bh
    store_ts_pos = p; p += 8
    out[p:p + sh] = m.storeHost; p += sh
    _I32.pack_into(out, p, m.reconsumeTimes); p += 4
    _I64.pack_into(out, p, m.preparedTransactionOffset); p += 8
    _I32.pack_into(out, p, len(body)); p += 4
    out[p:p + len(body)] = body; p += len(body)
    if v2:
        _I16.pack_into(out, p, len(topic)); p += 2
    else:
        _I8.pack_into(out, p, len(topic)); p += 1
    out[p:p + len(topic)] = topic; p += len(topic)
    _I16.pack_into(out, p, len(praw)); p += 2
    out[p:p + len(praw)] = praw; p += len(praw)
    assert p == total
    return EncodedRecord(out, store_ts_pos=store_ts_pos, crc_tail=crc_tail, props_raw=praw)
