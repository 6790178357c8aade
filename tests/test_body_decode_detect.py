"""Format detection's shortcuts give the answer of the plain rule: every format of
body_decode._ORDER tried in turn, the first at ACCEPT wins, else the most confident (earlier
on a tie). The first-byte caps (_capped) and the compiled score only save time."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.format import body_decode as bd
from engine.format import protobuf_wire as pw
from test_body_decode import VALID, msgpack_body, order_pb, pb_len, pb_varint, varint


def plain_rule(data: bytes):
    """(format, confidence, value) by trying every format in _ORDER, no shortcut."""
    refused = bd._sniff(data)
    best = None
    for name in bd._ORDER:
        if name in refused or (name == bd.TEXT and bd._not_text(data)):
            continue
        v, conf, _ = bd._try(bd.DECODERS[name], data)
        if conf >= bd.ACCEPT:
            return name, conf, v
        if conf >= 0 and (best is None or conf > best[1]):
            best = (name, conf, v)
    if best is not None and best[1] >= bd.FLOOR:
        return best
    return bd.HEX, 0.0, data


def _same(data: bytes) -> None:
    d = bd.decode_body(data)
    fmt, conf, v = plain_rule(data)
    assert (d.format, d.confidence) == (fmt, conf), data.hex()
    assert bd.DecodedBody(fmt, None, v, conf).value == d.value


MSGPACK_LIKE = st.tuples(st.integers(0x80, 0xFF), st.binary(max_size=200)).map(lambda t: bytes([t[0]]) + t[1])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=300), MSGPACK_LIKE, st.sampled_from(VALID).flatmap(
    lambda b: st.tuples(st.integers(0, len(b)), st.integers(0, 255)).map(
        lambda t: b[:t[0]] + bytes([t[1]]) + b[t[0] + 1:]))))
def test_shortcuts_give_the_plain_rules_answer(data):
    if data:
        _same(data)


@pytest.mark.parametrize("data", [
    msgpack_body(), order_pb(), b"\x81\xa1a\x01", b"\x92\x01\x02", b"\xde\x00\x01\xa1k\xc0",
    b"\xc2", b"\xc3\xa9t\xc3\xa9", b"\xe4\xb8\xad\xe6\x96\x87", b"\xd6\xd0\xce\xc4\xca\xc7",   # UTF-8 and GBK text
    pb_varint(70, 1) + pb_len(71, b"x"), b"\x80\x01\x00", bytes([0xF8, 0x07]) + b"\x01",   # field 127 / 126
    pb_len(15, b"abc") + pb_varint(1, 5),
    b"\x82\x01\x01\x02\x92\x01\x00",   # MessagePack {1: 1, 2: [1, 0]} and Protobuf 16: "\x02", 18: "": Protobuf first
])
def test_shortcuts_at_their_edges(data):
    _same(data)


def test_capped_formats_cannot_reach_accept():
    assert bd._capped(msgpack_body()) == (bd.TEXT, bd.PROTOBUF)
    assert bd._capped(order_pb()) == ()
    assert bd.TEXT not in bd._capped(b"\xc3\xa9t")          # "ét" may be UTF-8 text
    assert bd.TEXT not in bd._capped(b"\xc3")               # a cut character: detect() forgives it
    assert bd._capped(b"\x80\x01\x00") == (bd.TEXT,)          # field 16: Protobuf may still be sure


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.sampled_from(VALID)))
def test_compiled_score_is_the_pure_one(data):
    if pw._KERNEL is None:
        pytest.skip("engine.accel._wire not built (or RMQSTORE_PURE_PYTHON=1)")
    fields, _ = pw.walk_py(data)
    if fields:
        assert pw._KERNEL.score(fields, len(data)) == pw.score_py(fields, len(data))


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.sampled_from(VALID),
                 st.lists(st.tuples(st.integers(1, 200), st.sampled_from([1, 5]), st.binary(min_size=8, max_size=8)),
                          min_size=1, max_size=6).map(
                     lambda fs: b"".join(varint(n << 3 | w) + (b if w == 1 else b[:4]) for n, w, b in fs))))
def test_compiled_to_value_is_the_pure_one(data):
    if pw._KERNEL is None:
        pytest.skip("engine.accel._wire not built (or RMQSTORE_PURE_PYTHON=1)")
    fields, _ = pw.walk_py(data)
    if fields:
        assert pw._KERNEL.to_value(fields) == pw.to_value_py(fields)


def test_to_value_reads_fixed_numbers_and_repeats():
    """fixed64 / fixed32 as unsigned integers with their float reading when it is a plain one;
    a repeated field as a list; unprintable bytes as hex (both twins)."""
    one = struct.pack("<d", 2.5)
    data = (bytes([1 << 3 | 1]) + one + bytes([2 << 3 | 5]) + struct.pack("<f", -0.25)
            + bytes([3 << 3 | 1]) + struct.pack("<d", float("nan")) + bytes([4 << 3 | 5]) + b"\xff\xff\xff\xff"
            + pb_varint(5, 1) + pb_varint(5, 2) + pb_varint(5, 3) + pb_len(6, b"\x00\x01"))
    want = {"1": {"fixed": int.from_bytes(one, "little"), "float": 2.5},
            "2": {"fixed": int.from_bytes(struct.pack("<f", -0.25), "little"), "float": -0.25},
            "3": int.from_bytes(struct.pack("<d", float("nan")), "little"), "4": 0xFFFFFFFF,
            "5": [1, 2, 3], "6": {"$bytes": "0001"}}
    fields, _ = pw.walk_py(data)
    assert pw.to_value_py(fields) == want
    if pw._KERNEL is not None:
        assert pw._KERNEL.to_value(fields) == want


_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(), st.text(max_size=5),
                  st.binary(max_size=3))
_TREE = st.recursive(_LEAF, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.tuples(kids, kids),
    st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 9)), kids, max_size=4)), max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(_TREE)
def test_a_value_kept_as_it_is_equals_the_converted_one(raw):
    """plain_json keeps a decoder's value when it is JSON already; the value is the one the
    conversion (JSON round trip, else jsonable) makes."""
    if pw.KERNEL is None:
        pytest.skip("engine.accel._wire not built (or RMQSTORE_PURE_PYTHON=1)")
    fast = bd.DecodedBody(bd.MSGPACK, None, raw, 1.0).value
    kernel, pw.KERNEL = pw.KERNEL, None
    try:
        slow = bd.DecodedBody(bd.MSGPACK, None, raw, 1.0).value
    finally:
        pw.KERNEL = kernel
    assert _typed(fast) == _typed(slow)


def _typed(v):
    """v with every node's type spelled out (1 == 1.0 == True and "1" keys vs 1 keys differ here)."""
    if isinstance(v, list):
        return ("list", [_typed(x) for x in v])
    if isinstance(v, dict):
        return ("dict", sorted((type(k).__name__, str(k), _typed(x)) for k, x in v.items()))
    return (type(v).__name__, v)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.sampled_from(VALID).flatmap(
    lambda b: st.tuples(st.integers(0, len(b)), st.integers(0, 255)).map(
        lambda t: b[:t[0]] + bytes([t[1]]) + b[t[0] + 1:]))))
def test_compiled_decode_raw_is_walk_score_and_to_value(data):
    """The one-pass kernel answers as walk_py, score_py and to_value_py do: value, score, reason."""
    if pw._KERNEL is None:
        pytest.skip("engine.accel._wire not built (or RMQSTORE_PURE_PYTHON=1)")
    assert pw._KERNEL.decode_raw(data) == pw.decode_raw_py(data)
    fields, why = pw.walk_py(data)
    assert pw.decode_raw_py(data) == ((pw.to_value_py(fields), pw.score_py(fields, len(data)), "") if fields
                                      else (None, 0.0, why))
