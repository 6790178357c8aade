"""Bodies as people read them (engine/format/body_decode.py): every wire format hand-encoded
here (no library on the encoding side), sent with the engine or `rmqstore send`, read back
through `rmqstore get --json` / `query-key --json`; the compressed bodies RocketMQ wrote in
the shared fixtures; a fuzz run over every decoder."""
from __future__ import annotations

import json
import lzma
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import unpack
from engine import MessageStore
from engine.cli.app import main
from engine.format import body_decode as bd
from engine.format.message import COMPRESSION_NAMES


# ---- hand encoders -------------------------------------------------------------------------
def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_varint(num: int, v: int) -> bytes:
    return varint(num << 3 | 0) + varint(v)


def pb_len(num: int, payload: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def pb_fixed32(num: int, raw: bytes) -> bytes:
    return varint(num << 3 | 5) + raw


def order_pb() -> bytes:
    """shop.Order {id: "A-1", qty: 3, item {sku: "sku-7", price_cents: 1999}, note: "gift"}."""
    item = pb_len(1, b"sku-7") + pb_varint(2, 1999)
    return pb_len(1, b"A-1") + pb_varint(2, 3) + pb_len(3, item) + pb_len(4, b"gift")


def mp_str(s: str) -> bytes:
    b = s.encode()
    assert len(b) < 32
    return bytes([0xA0 | len(b)]) + b


def msgpack_body() -> bytes:
    """{"id": "A-1", "qty": 300, "price": 19.99, "tags": ["x", "y"], "ok": true, "none": nil}."""
    return (bytes([0x86]) + mp_str("id") + mp_str("A-1") + mp_str("qty") + b"\xcd" + struct.pack(">H", 300)
            + mp_str("price") + b"\xcb" + struct.pack(">d", 19.99) + mp_str("tags") + b"\x92" + mp_str("x")
            + mp_str("y") + mp_str("ok") + b"\xc3" + mp_str("none") + b"\xc0")


def cb_text(s: str) -> bytes:
    b = s.encode()
    assert len(b) < 24
    return bytes([0x60 | len(b)]) + b


def cbor_body() -> bytes:
    """{"id": "A-1", "qty": 3, "delta": -5, "price": 2.5, "tags": ["x"], "ok": true}."""
    return (b"\xa6" + cb_text("id") + cb_text("A-1") + cb_text("qty") + b"\x03" + cb_text("delta") + b"\x24"
            + cb_text("price") + b"\xfb" + struct.pack(">d", 2.5) + cb_text("tags") + b"\x81" + cb_text("x")
            + cb_text("ok") + b"\xf5")


def zigzag(n: int) -> bytes:
    return varint((n << 1) ^ (n >> 63))


def av_str(s) -> bytes:
    b = s if isinstance(s, bytes) else s.encode()
    return zigzag(len(b)) + b


AVRO_SCHEMA = {"type": "record", "name": "Order", "namespace": "shop",
               "fields": [{"name": "id", "type": "string"}, {"name": "qty", "type": "int"},
                          {"name": "tags", "type": {"type": "array", "items": "string"}}]}


def avro_record(i="A-1", qty=-3) -> bytes:
    return av_str(i) + zigzag(qty) + zigzag(2) + av_str("x") + av_str("y") + zigzag(0)


def avro_container(records: list[bytes]) -> bytes:
    sync = bytes(range(16))
    meta = zigzag(2) + av_str("avro.schema") + av_str(json.dumps(AVRO_SCHEMA).encode()) \
        + av_str("avro.codec") + av_str(b"null") + zigzag(0)
    data = b"".join(records)
    return b"Obj\x01" + meta + sync + zigzag(len(records)) + zigzag(len(data)) + data + sync


def descriptor_set(tmp_path):
    """shop.Order's descriptor set, as `protoc --descriptor_set_out` writes it (the schema;
    the bodies stay hand-encoded)."""
    from google.protobuf import descriptor_pb2 as d
    f = d.FileDescriptorProto(name="shop.proto", package="shop", syntax="proto3")
    item = f.message_type.add(name="Item")
    item.field.add(name="sku", number=1, type=d.FieldDescriptorProto.TYPE_STRING, label=1)
    item.field.add(name="price_cents", number=2, type=d.FieldDescriptorProto.TYPE_INT64, label=1)
    order = f.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=d.FieldDescriptorProto.TYPE_STRING, label=1)
    order.field.add(name="qty", number=2, type=d.FieldDescriptorProto.TYPE_INT32, label=1)
    order.field.add(name="item", number=3, type=d.FieldDescriptorProto.TYPE_MESSAGE, type_name=".shop.Item", label=1)
    order.field.add(name="note", number=4, type=d.FieldDescriptorProto.TYPE_STRING, label=1)
    p = tmp_path / "shop.desc"
    p.write_bytes(d.FileDescriptorSet(file=[f]).SerializeToString())
    return p


# ---- the pipeline on its own ---------------------------------------------------------------
def test_protobuf_without_a_schema_reads_like_decode_raw():
    d = bd.decode_body(order_pb())
    assert d.format == "protobuf" and d.confidence >= bd.ACCEPT
    assert d.value == {"1": "A-1", "2": 3, "3": {"1": "sku-7", "2": 1999}, "4": "gift"}
    rep = pb_len(1, b"a") + pb_len(1, b"b") + pb_len(1, b"c") + pb_fixed32(2, struct.pack("<f", 1.5))
    assert bd.decode_body(rep).value == {"1": ["a", "b", "c"], "2": {"fixed": 0x3FC00000, "float": 1.5}}
    packed = pb_len(5, varint(1) + varint(300) + varint(2))   # packed repeated: left as bytes
    assert bd.decode_body(pb_varint(1, 7) + packed).value["5"] == {"$bytes": (varint(1) + varint(300) + varint(2)).hex()}


def test_every_format_is_detected():
    assert bd.decode_body(msgpack_body()).to_json() == {
        "format": "msgpack", "compression": None, "confidence": 0.85,
        "value": {"id": "A-1", "qty": 300, "price": 19.99, "tags": ["x", "y"], "ok": True, "none": None}}
    c = bd.decode_body(cbor_body())
    assert (c.format, c.value) == ("cbor", {"id": "A-1", "qty": 3, "delta": -5, "price": 2.5, "tags": ["x"], "ok": True})
    assert bd.decode_body(b"\xd9\xd9\xf7" + cbor_body()).confidence == 1.0   # self-described CBOR
    a = bd.decode_body(avro_container([avro_record(), avro_record("B-2", 5)]))
    assert (a.format, a.confidence) == ("avro", 1.0)
    assert a.value == [{"id": "A-1", "qty": -3, "tags": ["x", "y"]}, {"id": "B-2", "qty": 5, "tags": ["x", "y"]}]
    assert bd.decode_body(b' {"a": [1, 2]}').value == {"a": [1, 2]}
    x = bd.decode_body(b'<order id="A-1"><qty>3</qty></order>')
    assert (x.format, x.value) == ("xml", {"tag": "order", "attributes": {"id": "A-1"},
                                           "children": [{"tag": "qty", "text": "3"}]})
    assert bd.decode_body("订单 A-1 已发货".encode("gbk")).format == "text"
    assert bd.decode_body("plain words\n".encode()).to_json()["value"] == "plain words\n"
    h = bd.decode_body(b"\x00\xff\xfe\x07" * 8)
    assert h.format == "hex" and h.value == {"$bytes": (b"\x00\xff\xfe\x07" * 8).hex()} and "no format fits" in h.note
    assert bd.decode_body(b"").to_json()["value"] == ""


def test_a_doctype_is_never_expanded():
    bomb = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaa">]><l>&a;</l>'
    assert bd.decode_body(bomb).format == "text"


def test_schemas_give_field_names(tmp_path):
    s = bd.Schemas(str(descriptor_set(tmp_path)), "shop.Order")
    d = bd.decode_body(order_pb(), 0, s)
    assert (d.format, d.confidence) == ("protobuf", 1.0)
    assert d.value == {"id": "A-1", "qty": 3, "item": {"sku": "sku-7", "price_cents": "1999"}, "note": "gift"}
    avsc = tmp_path / "order.avsc"
    avsc.write_text(json.dumps(AVRO_SCHEMA))
    a = bd.decode_body(avro_record(), 0, bd.Schemas(avro_schema=str(avsc)))
    assert (a.format, a.value) == ("avro", {"id": "A-1", "qty": -3, "tags": ["x", "y"]})
    # a body the schema does not fit falls back to detection and says why
    j = bd.decode_body(b'{"k": 1}', 0, bd.Schemas(avro_schema=str(avsc)))
    assert j.format == "json" and "avro schema" in j.note
    with pytest.raises(bd.SchemaError, match="no message type"):
        bd.Schemas(str(descriptor_set(tmp_path)), "shop.Nope")
    with pytest.raises(bd.SchemaError, match="both"):
        bd.Schemas(proto_type="shop.Order")


def test_a_chosen_format_is_obeyed_or_explained():
    assert bd.decode_body(order_pb(), format="hex").format == "hex"
    m = bd.decode_body(b"\x01", format="msgpack")
    assert (m.format, m.value) == ("msgpack", 1)
    bad = bd.decode_body(b"\xc1", format="msgpack")
    assert bad.format == "hex" and bad.note.startswith("not msgpack")


@pytest.mark.parametrize("ctype,compress", [(0, "zlib"), (3, "zlib"), (1, "lz4"), (2, "zstd")])
def test_compressed_bodies_decode_and_damaged_ones_say_why(ctype, compress):
    import zlib

    import lz4.frame
    import zstandard
    raw = msgpack_body()
    body = {"zlib": zlib.compress, "lz4": lz4.frame.compress, "zstd": zstandard.compress}[compress](raw)
    flag = 1 | ctype << 8
    d = bd.decode_body(body, flag)
    assert (d.format, d.compression) == ("msgpack", COMPRESSION_NAMES[ctype])
    assert d.value["qty"] == 300
    bad = bd.decode_body(b"\x00garbage", flag)
    assert bad.format == "hex" and "does not decompress" in bad.note and bad.value == {"$bytes": b"\x00garbage".hex()}


def test_a_decompression_bomb_is_refused(monkeypatch):
    import zlib
    monkeypatch.setattr(bd, "DECOMPRESS_LIMIT", 1 << 20)
    d = bd.decode_body(zlib.compress(b"\0" * (4 << 20)), 1)
    assert d.format == "hex" and "more than 1,048,576 bytes" in d.note


# ---- the fixtures RocketMQ wrote: compressed bodies decode with the core install ---------------
@pytest.mark.parametrize("name", ["default", "small", "v5"])
def test_fixture_compressed_bodies_decode(name):
    import base64
    manifest = json.loads(lzma.decompress(_manifest(name)))
    compressed = [m for m in manifest["messages"] if m["sysFlag"] & 1]
    assert compressed, f"{name} has no compressed body"
    kinds = set()
    with MessageStore.open(unpack(name), read_only=True) as s:
        for mm in compressed:
            r = s.get_message(mm["topic"], mm["queueId"], mm["queueOffset"], 1)
            m = r.messages[0]
            assert m.commitLogOffset == mm["phyOffset"]
            data, comp, why = bd.decompressed(m.body, m.sysFlag)
            assert data == base64.b64decode(mm["bodyDecompressed"]), why
            d = bd.decode_message(m)
            assert d.compression == COMPRESSION_NAMES[(m.sysFlag >> 8) & 7] and d.format != "hex", d.note
            kinds.add(d.compression)
    assert kinds == {"zlib", "lz4", "zstd"}


def _manifest(name: str) -> bytes:
    from pathlib import Path
    return (Path(__file__).parent / "fixtures" / f"{name}.manifest.json.xz").read_bytes()


# ---- sent, then read back through the CLI ------------------------------------------------------
def _get(capsys, root, topic, *extra) -> list[dict]:
    assert main(["get", str(root), topic, "0", "0", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)["messages"]


def test_cli_get_and_query_key_carry_decodedBody(tmp_path, capsys):
    import lz4.frame
    root = tmp_path / "store"
    bodies = [order_pb(), msgpack_body(), cbor_body(), avro_container([avro_record()]), b'{"a": 1}',
              b"<a>1</a>", b"hello", b"\x00\xff\x01"]
    with MessageStore.create(root) as s:
        for i, b in enumerate(bodies):
            s.put_message("Bin", b, queue_id=0, keys=f"k{i}")
        s.put_message("Bin", lz4.frame.compress(msgpack_body()), queue_id=0, keys="lz", sys_flag=1 | 1 << 8)
    got = _get(capsys, root, "Bin", "--count", "32")
    formats = [(m["decodedBody"]["format"], m["decodedBody"]["compression"]) for m in got]
    assert formats == [("protobuf", None), ("msgpack", None), ("cbor", None), ("avro", None), ("json", None),
                       ("xml", None), ("text", None), ("hex", None), ("msgpack", "lz4")]
    assert got[0]["decodedBody"]["value"]["3"] == {"1": "sku-7", "2": 1999}
    assert got[8]["decodedBody"]["value"]["tags"] == ["x", "y"]
    assert got[1]["body"]   # the raw bytes stay where they are
    assert main(["query-key", str(root), "Bin", "k2", "--json"]) == 0
    q = json.loads(capsys.readouterr().out)["messages"]
    assert [m["decodedBody"]["value"]["delta"] for m in q] == [-5]
    msg_id = got[1]["msgId"]
    assert main(["msgid", str(root), msg_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["decodedBody"]["format"] == "msgpack"
    assert main(["uniq", str(root), "Bin", got[2]["uniqKey"], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["decodedBody"]["format"] == "cbor"
    # the human output shows them with --decoded
    assert main(["get", str(root), "Bin", "0", "0", "--decoded", "--count", "1"]) == 0
    assert 'protobuf (0.90) {"1": "A-1"' in capsys.readouterr().out


def test_cli_send_body_file_and_schema_flags(tmp_path, capsys):
    root = tmp_path / "store"
    assert main(["init", str(root)]) == 0
    body = tmp_path / "order.bin"
    body.write_bytes(order_pb())
    capsys.readouterr()
    assert main(["send", str(root), "Orders", "--queue", "0", "--body-file", str(body)]) == 0
    capsys.readouterr()
    desc = descriptor_set(tmp_path)
    got = _get(capsys, root, "Orders", "--proto-desc", str(desc), "--proto-type", "shop.Order")
    assert got[0]["decodedBody"] == {"format": "protobuf", "compression": None, "confidence": 1.0,
                                     "note": "schema: shop.Order",
                                     "value": {"id": "A-1", "qty": 3, "item": {"sku": "sku-7", "price_cents": "1999"},
                                               "note": "gift"}}
    assert _get(capsys, root, "Orders", "--body-format", "hex")[0]["decodedBody"]["format"] == "hex"
    # a bad schema file is one line and exit 2, not a traceback
    assert main(["get", str(root), "Orders", "0", "0", "--json", "--proto-desc", str(body),
                 "--proto-type", "shop.Order"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rmqstore: error: ") and "Traceback" not in err


# ---- fuzz: random and truncated bytes to every decoder --------------------------------------------
VALID = [order_pb(), msgpack_body(), cbor_body(), avro_container([avro_record()]), b'{"a": [1, {"b": 2}]}',
         b'<a x="1"><b/></a>']
PER_EXAMPLE_S = 1.0


def _check(data: bytes, sys_flag: int = 0, fmt: str | None = None) -> None:
    t = time.perf_counter()
    d = bd.decode_body(data, sys_flag, None, fmt)
    json.dumps(d.to_json())    # always JSON-able
    assert d.text() is not None
    assert time.perf_counter() - t < PER_EXAMPLE_S, f"{len(data)} bytes took too long"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512), st.sampled_from([None, *bd.FORMATS]),
       st.sampled_from([0, 1, 1 | 1 << 8, 1 | 2 << 8, 1 | 3 << 8, 1 | 7 << 8]))
def test_fuzz_random_bytes_never_raise(data, fmt, flag):
    _check(data, flag, fmt)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(VALID), st.data())
def test_fuzz_truncated_and_flipped_never_raise(body, draw):
    cut = draw.draw(st.integers(0, len(body)))
    at = draw.draw(st.integers(0, max(0, len(body) - 1)))
    flipped = bytearray(body)
    flipped[at] ^= draw.draw(st.integers(1, 255))
    for data in (body[:cut], bytes(flipped)):
        for fmt in (None, *bd.FORMATS):
            _check(data, 0, fmt)


def test_avro_counts_cannot_make_endless_work(tmp_path):
    """A block count in the body stands for items to read; items that take no bytes (null, an
    empty record) would let 20 bytes ask for 2^40 of them: such schemas are refused."""
    schema = {"type": "record", "name": "R", "fields": [{"name": "n", "type": {"type": "array", "items": "null"}}]}
    meta = zigzag(1) + av_str("avro.schema") + av_str(json.dumps(schema).encode()) + zigzag(0)
    datum = zigzag(1 << 40) + zigzag(0)
    body = b"Obj\x01" + meta + bytes(16) + zigzag(1) + zigzag(len(datum)) + datum + bytes(16)
    t = time.perf_counter()
    d = bd.decode_body(body)
    assert time.perf_counter() - t < PER_EXAMPLE_S and d.format != "avro"
    assert "take no bytes" in bd.decode_body(body, format="avro").note
    nulls = b"Obj\x01" + zigzag(1) + av_str("avro.schema") + av_str(b'"null"') + zigzag(0) + bytes(16) \
        + zigzag(1 << 40) + zigzag(0) + bytes(16)
    assert "records take no bytes" in bd.decode_body(nulls, format="avro").note
    avsc = tmp_path / "bad.avsc"
    avsc.write_text(json.dumps(schema))
    with pytest.raises(bd.SchemaError, match="take no bytes"):
        bd.Schemas(avro_schema=str(avsc))
    maps = {"type": "record", "name": "M", "fields": [{"name": "m", "type": {"type": "map", "values": "null"}}]}
    assert bd.avro_unbounded(maps) is None and bd.avro_unbounded(AVRO_SCHEMA) is None   # a key is a byte at least
    by_name = {"type": "record", "name": "Outer", "fields": [
        {"name": "e", "type": {"type": "record", "name": "Empty", "fields": []}},
        {"name": "a", "type": {"type": "array", "items": "Empty"}}]}
    assert bd.avro_unbounded(by_name)


def test_deep_nesting_is_no_crash():
    for data in (b"\x91" * 100_000 + b"\x00", b"\x81" * 100_000 + b"\x00", b"[" * 100_000,
                 (b"\x0a\x02" * 40) + b"\x08\x01", b"\x0b" * 5000):
        for fmt in (None, *bd.FORMATS):
            _check(data, 0, fmt)


# ---- the scans: decodedBody on the rows a scan returns, the body regex over decoded text ---------
def test_scan_filter_and_export_decode_and_search_decoded_text(tmp_path, capsys):
    import csv
    root = tmp_path / "store"
    with MessageStore.create(root) as s:
        s.put_message("Bin", order_pb(), queue_id=0)
        s.put_message("Bin", msgpack_body(), queue_id=0)
        s.put_message("Bin", b"qty is written here as text", queue_id=0)
    # "qty" is a map key in the MessagePack body: its raw bytes hold it too, but "qty":300 is
    # only in the decoded text
    assert main(["scan", str(root), "filter", "--local", "--json", "--body", '"qty": 300']) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == []
    assert main(["scan", str(root), "filter", "--local", "--json", "--body", '"qty": 300', "--body-decoded",
                 "--decode-body"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["decodedBody"]["format"] for r in rows] == ["msgpack"] and rows[0]["decodedBody"]["value"]["qty"] == 300
    assert main(["scan", str(root), "filter", "--local", "--json", "--body", '"4": "gift"', "--body-decoded"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert len(rows) == 1 and "decodedBody" not in rows[0]   # decoded only when asked for
    out = tmp_path / "out.jsonl"
    assert main(["scan", str(root), "export", "--local", "--format", "jsonl", "--out", str(out), "--decode-body"]) == 0
    got = [json.loads(line)["decodedBody"]["format"] for line in out.read_text().splitlines()]
    assert got == ["protobuf", "msgpack", "text"]
    out_csv = tmp_path / "out.csv"
    assert main(["scan", str(root), "export", "--local", "--format", "csv", "--out", str(out_csv), "--decode-body"]) == 0
    with open(out_csv, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert json.loads(rows[0]["decodedBody"])["value"]["3"] == {"1": "sku-7", "2": 1999}
    capsys.readouterr()
    assert main(["scan", str(root), "export", "--local", "--out", str(tmp_path / "x.parquet"), "--decode-body"]) == 2
    assert "jsonl or csv" in capsys.readouterr().err


# ---- the compiled wire walk (engine/accel/_wire) answers as the pure-Python one ----------------
def _kernel():
    from engine.format import protobuf_wire as pw
    if pw._KERNEL is None:
        pytest.skip("engine.accel._wire not built (or RMQSTORE_PURE_PYTHON=1)")
    return pw


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.sampled_from(VALID).flatmap(
    lambda b: st.tuples(st.integers(0, len(b)), st.integers(0, 255)).map(
        lambda t: b[:t[0]] + bytes([t[1]]) + b[t[0] + 1:]))))
def test_compiled_wire_walk_is_the_pure_one(data):
    pw = _kernel()
    assert pw._KERNEL.walk(data) == pw.walk_py(data)


def test_compiled_wire_walk_edge_cases():
    pw = _kernel()
    for data in (b"", b"\x0b" * 50, b"\x0a\x02" * 40 + b"\x08\x01", b"\xff" * 11, b"\x08" + b"\xff" * 9 + b"\x7f",
                 b"\x0b\x0c", b"\x0c", b"\x00", order_pb() + b"\x0a\x05hello", pb_len(1, b"\x0a\x01a")):
        assert pw._KERNEL.walk(data) == pw.walk_py(data), data.hex()
    assert pw.walk_py(b"\x08" + b"\xff" * 9 + b"\x7f")[0] == [(1, 0, (1 << 64) - 1)]   # the low 64 bits
