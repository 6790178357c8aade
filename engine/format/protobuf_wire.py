"""Protobuf's wire format read without a schema, by `protoc --decode_raw`'s rules: every
field is (number, wire type, value); a length-delimited value is shown as a nested message
when its bytes parse as one, as a string when they are printable UTF-8, else as bytes
(packed repeated fields among them: nothing says which they are). Never raises on bad
input: `walk` returns None and says why."""
from __future__ import annotations

import struct

from engine import accel

VARINT, I64, LEN, SGROUP, EGROUP, I32 = 0, 1, 2, 3, 4, 5
MAX_FIELD = (1 << 29) - 1
MAX_DEPTH = 32                # nesting deeper than protoc's own limit (100) is not worth showing
_F64, _F32 = struct.Struct("<d"), struct.Struct("<f")
_CTRL = bytes(c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)) + b"\x7f"


class WireError(ValueError):
    pass


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise WireError(f"varint cut at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos   # protobuf keeps the low 64 bits
        shift += 7
        if shift >= 70:
            raise WireError(f"varint longer than 10 bytes at byte {pos}")


def _text(data: bytes) -> str | None:
    """Printable UTF-8 (tabs and newlines allowed), else None."""
    if len(data.translate(None, _CTRL)) != len(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _fields(buf: bytes, pos: int, end: int, depth: int, group: int | None = None) -> tuple[list, int]:
    """[(number, wire type, value), ...] of buf[pos:end] (to the END_GROUP of `group`).
    One-byte varints (most keys and lengths) are read inline: this loop is the decoder's cost."""
    out = []
    append = out.append
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos, end)
        num, wt = key >> 3, key & 7
        if num == 0 or num > MAX_FIELD:
            raise WireError(f"field number {num} at byte {pos}")
        if wt == VARINT:
            if pos < end and buf[pos] < 0x80:
                v = buf[pos]
                pos += 1
            else:
                v, pos = _varint(buf, pos, end)
        elif wt == LEN:
            if pos < end and buf[pos] < 0x80:
                n = buf[pos]
                pos += 1
            else:
                n, pos = _varint(buf, pos, end)
            if n > end - pos:
                raise WireError(f"field {num}: {n} bytes announced, {end - pos} left")
            v = _len_value(buf, pos, pos + n, depth)
            pos += n
        elif wt == I64:
            if pos + 8 > end:
                raise WireError(f"field {num}: fixed64 cut")
            v = buf[pos:pos + 8]
            pos += 8
        elif wt == I32:
            if pos + 4 > end:
                raise WireError(f"field {num}: fixed32 cut")
            v = buf[pos:pos + 4]
            pos += 4
        elif wt == SGROUP:
            if depth >= MAX_DEPTH:
                raise WireError("groups nested too deep")
            v, pos = _fields(buf, pos, end, depth + 1, num)
        elif wt == EGROUP:
            if group != num:
                raise WireError(f"END_GROUP {num} without its START_GROUP")
            return out, pos
        else:
            raise WireError(f"wire type {wt} at byte {pos}")
        append((num, wt, v))
    if group is not None:
        raise WireError(f"group {group} never ends")
    return out, pos


_TAG_WT_OK = frozenset((VARINT, I64, LEN, SGROUP, I32))


def _len_value(buf: bytes, pos: int, end: int, depth: int):
    """A length-delimited value: a nested message if it parses whole, else text, else bytes.
    Printable bytes are tried as a message only when they start like one with field 1 (a key
    byte of \\t or \\n, a nested message's usual start); else they stay a string."""
    data = buf[pos:end]
    if not data:
        return ""
    first = data[0]
    if depth < MAX_DEPTH and (first & 7) in _TAG_WT_OK and (first >= 0x80 or first >> 3) and \
            (first in (0x09, 0x0A) or len(data.translate(None, _CTRL)) != len(data)):
        try:
            sub, at = _fields(buf, pos, end, depth + 1)
            if at == end and sub and (first not in (0x09, 0x0A) or _plausible(sub) or _text(data) is None):
                return sub
        except (WireError, RecursionError):
            pass
    text = _text(data)
    return text if text is not None else data


def _plausible(fields: list) -> bool:
    """Printable text that also parses as a message (e.g. "hello" would not, "2:a" might):
    call it a message only when its field numbers look like a schema's (small)."""
    return all(f[0] < 64 for f in fields)


def walk(data: bytes) -> tuple[list | None, str]:
    """(fields, "") or (None, why it is not Protobuf). The compiled twin (engine/accel/_wire)
    answers the same when it is built."""
    if _KERNEL is not None:
        return _KERNEL.walk(data)
    return walk_py(data)


def walk_py(data: bytes) -> tuple[list | None, str]:
    if not data:
        return None, "empty"
    try:
        fields, at = _fields(bytes(data), 0, len(data), 0)
    except (WireError, RecursionError) as e:
        return None, str(e)
    return fields, ""


def to_value(fields: list) -> dict:
    """decode_raw as JSON: {"1": value, "2": [repeated values], ...}; fixed64/fixed32 shown
    as unsigned integers (with their double / float reading when it is a plain number), bytes
    as {"$bytes": hex}. The compiled twin gives the same value."""
    if _KERNEL is not None:
        return _KERNEL.to_value(fields)
    return to_value_py(fields)


def to_value_py(fields: list) -> dict:
    out: dict = {}
    repeated = set()
    for num, wt, v in fields:
        if wt == LEN or wt == SGROUP:
            v = to_value_py(v) if isinstance(v, list) else ({"$bytes": v.hex()} if isinstance(v, bytes) else v)
        elif wt == I64:
            v = _fixed(v, _F64)
        elif wt == I32:
            v = _fixed(v, _F32)
        k = str(num)
        if k in repeated:
            out[k].append(v)
        elif k in out:
            out[k] = [out[k], v]
            repeated.add(k)
        else:
            out[k] = v
    return out


def _fixed(raw: bytes, st: struct.Struct):
    u = int.from_bytes(raw, "little")
    f = st.unpack(raw)[0]
    if f == f and abs(f) not in (float("inf"),) and (f == 0 or 1e-6 < abs(f) < 1e15):
        return {"fixed": u, "float": f}
    return u


def score(fields: list, size: int) -> float:
    """How sure a walk that consumed every byte is that the bytes are Protobuf: small field
    numbers, more than one field, nested messages or strings all count for it. The compiled
    twin gives the same number (it costs less than the walk; this one cost nearly as much)."""
    if _KERNEL is not None:
        return _KERNEL.score(fields, size)
    return score_py(fields, size)


def score_py(fields: list, size: int) -> float:
    nums = [f[0] for f in fields]
    conf = 0.5
    if max(nums) < 64:
        conf += 0.2
    if len(fields) >= 2 or size <= 2:
        conf += 0.1
    if any(f[1] == LEN and not isinstance(f[2], bytes) for f in fields):
        conf += 0.1
    if any(f[1] in (SGROUP, I64, I32) for f in fields) and max(nums) >= 64:
        conf -= 0.2
    return round(min(conf, 0.9), 2)


def decode_raw(data: bytes) -> tuple[dict | None, float, str]:
    """(decode_raw's JSON value, score, "") or (None, 0.0, why it is not Protobuf): walk,
    score and to_value in one. The compiled twin builds the value as it walks."""
    return decode_raw_py(data)


def decode_raw_py(data: bytes) -> tuple[dict | None, float, str]:
    fields, why = walk_py(data)
    if fields is None:
        return None, 0.0, why
    return to_value_py(fields), score_py(fields, len(data)), ""


_KERNEL = accel.load("_wire")
KERNEL = _KERNEL   # for body_decode: the compiled plain_json test (None: not built)
if _KERNEL is not None:   # the compiled twins answer in the Python ones' place: one call less a body
    walk, score, to_value, decode_raw = _KERNEL.walk, _KERNEL.score, _KERNEL.to_value, _KERNEL.decode_raw
