"""Inner-batch messages: the body of a record stored with INNER_BATCH_FLAG is a client batch
in MessageDecoder.encodeMessages form, one encoded message after another:

    +0 totalSize i32 | +4 magic i32 (0) | +8 bodyCRC i32 (0) | +12 flag i32
    +16 bodyLength i32 | body | propertiesLength i16 | properties   (big-endian)

Each inner message keeps its own properties (UNIQ_KEY, KEYS, TAGS); its queue offset is the
record's INNER_BASE (= its queueOffset) plus its position in the batch."""
from __future__ import annotations

import struct
from dataclasses import dataclass

from engine.format import properties as P

NEED_UNWRAP_FLAG = 0x40      # MessageSysFlag.NEED_UNWRAP_FLAG
INNER_BATCH_FLAG = 0x80      # MessageSysFlag.INNER_BATCH_FLAG
INNER_NUM = "INNER_NUM"      # MessageConst.PROPERTY_INNER_NUM: inner messages in the record
INNER_BASE = "INNER_BASE"    # MessageConst.PROPERTY_INNER_BASE: queue offset of the first
_HEAD = struct.Struct(">iiiii")
_I16 = struct.Struct(">h")
HEAD_SIZE = _HEAD.size + _I16.size  # 22: the smallest encoded message (no body, no properties)


@dataclass(slots=True)
class InnerMessage(P.PropertyFields):
    """One message of an inner batch, named like RocketMQ's Message, with where it lives."""
    index: int                 # position in the batch
    queueOffset: int           # base + index
    flag: int
    body: bytes
    propertiesRaw: str
    properties: dict
    offsetInBody: int          # where its encoding starts in the record body
    storeSize: int             # its encoded size

    def body_decompressed(self) -> bytes:
        """Inner bodies are stored as the client encoded them (Message-like, for filters)."""
        return self.body

    def to_json(self, with_body: bool = True) -> dict:
        import base64
        d = {"index": self.index, "queueOffset": self.queueOffset, "flag": self.flag,
             "uniqKey": self.uniqKey, "tags": self.tags, "keys": self.keys, "properties": self.properties,
             "bodyLength": len(self.body), "storeSize": self.storeSize, "offsetInBody": self.offsetInBody}
        if with_body:
            d["body"] = base64.b64encode(self.body).decode("ascii")
        return d


class InnerBatchError(ValueError):
    """The body is not a well-formed inner batch (the message says where)."""


def decode_inner(body: bytes, base: int = 0) -> list[InnerMessage]:
    """MessageDecoder.decodeMessages over a record body; raises InnerBatchError at the first
    encoded message that does not fit."""
    out: list[InnerMessage] = []
    p, n = 0, len(body)
    while p < n:
        if n - p < HEAD_SIZE:
            raise InnerBatchError(f"inner message {len(out)} at body offset {p}: {n - p} bytes left, "
                                  f"less than a message head ({HEAD_SIZE})")
        total, _magic, _crc, flag, blen = _HEAD.unpack_from(body, p)
        if blen < 0 or p + _HEAD.size + blen + 2 > n:
            raise InnerBatchError(f"inner message {len(out)} at body offset {p}: body length {blen} runs past the batch")
        b = bytes(body[p + _HEAD.size:p + _HEAD.size + blen])
        q = p + _HEAD.size + blen
        plen = _I16.unpack_from(body, q)[0]
        q += 2
        if plen < 0 or q + plen > n:
            raise InnerBatchError(f"inner message {len(out)} at body offset {p}: properties length {plen} "
                                  "runs past the batch")
        raw = bytes(body[q:q + plen]).decode("utf-8", "replace")
        q += plen
        if total != q - p:
            raise InnerBatchError(f"inner message {len(out)} at body offset {p}: totalSize {total} != {q - p} "
                                  "from its fields")
        out.append(InnerMessage(len(out), base + len(out), flag, b, raw, P.parse_properties(raw), p, total))
        p = q
    return out


def encode_inner(messages: list[tuple[bytes, dict | str, int]]) -> bytes:
    """MessageDecoder.encodeMessages: (body, properties dict or raw string, flag) each."""
    parts = []
    for body, props, flag in messages:
        raw = props if isinstance(props, str) else P.serialize_properties(props, trailing=True)
        pr = raw.encode("utf-8")
        if len(pr) > 32767:
            raise ValueError(f"inner message properties are {len(pr)} bytes; the limit is 32767")
        total = HEAD_SIZE + len(body) + len(pr)
        parts.append(_HEAD.pack(total, 0, 0, flag, len(body)) + bytes(body) + _I16.pack(len(pr)) + pr)
    return b"".join(parts)


def count_inner(body: bytes) -> int:
    """MessageDecoder.countInnerMsgNum: walk the totalSize fields."""
    p, n, c = 0, len(body), 0
    while p + 4 <= n:
        total = struct.unpack_from(">i", body, p)[0]
        if total <= 0:
            break
        p += total
        c += 1
    return c


def batch_position(props: dict, queue_offset: int) -> tuple[int, int] | None:
    """Where a record's batch unit goes (DispatchRequest's msgBaseOffset and batchSize):
    INNER_BASE and INNER_NUM when the record has both, else its own queue offset as a batch
    of one; None when either is there but not a number."""
    if INNER_NUM in props and INNER_BASE in props:
        try:
            return int(props[INNER_BASE]), int(props[INNER_NUM])
        except ValueError:
            return None
    return queue_offset, 1


def inner_num(props: dict) -> int | None:
    """INNER_NUM as an int (None when absent or not a number)."""
    v = props.get(INNER_NUM)
    try:
        return int(v) if v is not None else None
    except ValueError:
        return None
