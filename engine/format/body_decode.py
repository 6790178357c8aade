"""A message body as people read it: one pipeline for the CLI, the scans and the GUI.

1. Decompress by the record's own sysFlag (engine.format.message.decompress_body: zlib,
   LZ4, ZSTD and the legacy flag), bounded so a small body cannot become a huge one; a cut
   or damaged body gives what its codec decompressed before it stopped (`truncated`).
2. Detect the format, most specific first, each with a confidence in [0, 1]: a user's schema
   (Protobuf descriptor set + message type, Avro schema), an Avro object container, JSON, XML,
   UTF-8 text, Protobuf without a schema (protoc --decode_raw's rules), MessagePack, CBOR,
   then hex. The first candidate at or above ACCEPT wins; otherwise the best one that parsed,
   if it reaches FLOOR; otherwise hex.
3. `value` is always JSON-able (bytes become {"$bytes": hex}); decoding never raises on bad
   bytes, and `note` says why it fell back. docs/formats/bodies.md has the rules."""
from __future__ import annotations

import datetime
import decimal
import io
import json
import math
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from engine.format import protobuf_wire as pw
from engine.format.message import COMPRESSED_FLAG, COMPRESSION_NAMES, DecompressionTooLarge, decompress_body
from engine.format.text import GBK, HEX, UTF8, detect, visible_text

JSON_F, TEXT, XML, PROTOBUF, MSGPACK, CBOR, AVRO = "json", "text", "xml", "protobuf", "msgpack", "cbor", "avro"
FORMATS = (JSON_F, TEXT, XML, PROTOBUF, MSGPACK, CBOR, AVRO, HEX)   # a caller's override picks one of these
ACCEPT = 0.8          # a candidate this sure ends the search
FLOOR = 0.3           # below this, hex says more than a guess
DECOMPRESS_LIMIT = 64 << 20
CONFLUENT_MAGIC = b"\x00"   # Confluent's Avro wire format: this byte, then a 4-byte schema id
_CTRL = bytes(c for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)) + b"\x7f"


@dataclass
class DecodedBody:
    """`raw` is the decoder's own result; `value` its JSON-able form, made when first asked
    for (a scan that only matches text, or a bench, pays for no conversion it does not use)."""
    format: str
    compression: str | None
    raw: object
    confidence: float
    note: str = ""
    truncated: bool = False       # a cut compressed body: the value is of what its codec gave
    schema_id: int | None = None  # a Confluent-framed Avro body's schema registry id
    _value: object = field(default=None, repr=False, compare=False)
    _made: bool = field(default=False, repr=False, compare=False)

    @property
    def value(self):
        if not self._made:
            if self.format == PROTOBUF:   # decode_raw's value, or a schema's MessageToDict: JSON already
                self._value = pw.to_value(self.raw) if isinstance(self.raw, list) else self.raw
            elif pw.KERNEL is not None and pw.KERNEL.plain_json(self.raw):   # JSON already: the same value
                self._value = self.raw
            else:
                try:   # plain JSON types (most MessagePack / CBOR / Avro values): a C round trip,
                    # which also turns map keys into text as jsonable() does
                    self._value = json.loads(json.dumps(self.raw, allow_nan=False))
                except (TypeError, ValueError, RecursionError):
                    self._value = jsonable(self.raw)
            self._made = True
        return self._value

    def to_json(self) -> dict:
        d = {"format": self.format, "compression": self.compression, "value": self.value,
             "confidence": self.confidence}
        if self.note:
            d["note"] = self.note
        if self.truncated:
            d["truncated"] = True
        if self.schema_id is not None:
            d["schemaId"] = self.schema_id
        return d

    def text(self) -> str:
        """The decoded body as one searchable text: the text itself, or the value as JSON."""
        if isinstance(self.value, str):
            return self.value
        return json.dumps(self.value, ensure_ascii=False)


# ---- schemas -------------------------------------------------------------------------------
class SchemaError(ValueError):
    """A schema file that cannot be used (the CLI says so and exits 2)."""


class Schemas:
    """What the user knows about a topic's bodies: a Protobuf message type from a descriptor
    set (`protoc --descriptor_set_out`), or an Avro schema (.avsc). Loaded once, reused."""

    def __init__(self, proto_desc: str | None = None, proto_type: str | None = None,
                 avro_schema: str | None = None):
        self.proto_desc, self.proto_type, self.avro_schema = proto_desc, proto_type, avro_schema
        self._proto_cls = None
        self._avro = None
        if bool(proto_desc) != bool(proto_type):
            raise SchemaError("a Protobuf schema needs both the descriptor set and the message type")
        if proto_desc:
            self._proto_cls = _load_proto(proto_desc, proto_type)
        if avro_schema:
            self._avro = _load_avro(avro_schema)

    @property
    def empty(self) -> bool:
        return self._proto_cls is None and self._avro is None

    def decode_proto(self, data: bytes):
        from google.protobuf import json_format
        msg = self._proto_cls()
        msg.ParseFromString(data)   # DecodeError on bad bytes (caught by the caller)
        d = json_format.MessageToDict(msg, preserving_proto_field_name=True)
        known = {f.number for f in msg.DESCRIPTOR.fields}
        fields, _ = pw.walk(data)
        unknown = [f for f in fields or () if f[0] not in known]
        if unknown:   # fields the schema does not name (a newer producer): kept, by number
            d["$unknown"] = pw.to_value(unknown)
        return d

    def decode_avro(self, data: bytes):
        """(record, Confluent schema id or None). A body in the Confluent wire format (0x00, a
        4-byte big-endian schema registry id, then the Avro binary) is read past its 5 bytes
        when they leave a whole record; else the body is read as plain Avro binary."""
        if data[:1] == CONFLUENT_MAGIC and len(data) >= 5:
            try:
                return self._avro_record(data[5:]), int.from_bytes(data[1:5], "big")
            except Exception:   # noqa: BLE001 - not framed after all: a record that starts with a 0 byte
                pass
        if data[:2] == b"\xc3\x01" and len(data) >= 10:   # Avro single-object encoding: marker + fingerprint
            data = data[10:]
        return self._avro_record(data), None

    def _avro_record(self, data: bytes):
        import fastavro
        fp = io.BytesIO(data)
        v = fastavro.schemaless_reader(fp, self._avro, None)
        if fp.tell() != len(data):
            raise ValueError(f"{len(data) - fp.tell()} bytes left after the record")
        return v


def _load_proto(path: str, type_name: str):
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
        fds = descriptor_pb2.FileDescriptorSet.FromString(Path(path).read_bytes())
        pool = descriptor_pool.DescriptorPool()
        pending = list(fds.file)
        while pending:   # dependencies first, whatever order protoc wrote them in
            ready = [f for f in pending if all(_has_file(pool, d) for d in f.dependency)]
            for f in ready:
                pool.Add(f)
            added = {f.name for f in ready}
            if not added:
                missing = sorted({d for f in pending for d in f.dependency if not _has_file(pool, d)})
                raise SchemaError(f"{path}: imports not in the descriptor set: {', '.join(missing)} "
                                  "(protoc --include_imports)")
            pending = [f for f in pending if f.name not in added]
        return message_factory.GetMessageClass(pool.FindMessageTypeByName(type_name.lstrip(".")))
    except SchemaError:
        raise
    except KeyError:
        raise SchemaError(f"{path}: no message type {type_name!r}") from None
    except Exception as e:   # OSError, DecodeError, TypeError from the pool: one clear line
        raise SchemaError(f"{path}: not a usable descriptor set ({type(e).__name__}: {e})") from None


def _has_file(pool, name: str) -> bool:
    try:
        pool.FindFileByName(name)
        return True
    except KeyError:
        return False


def _load_avro(path: str):
    try:
        import fastavro
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
        schema = fastavro.parse_schema(raw)
    except Exception as e:   # OSError, JSON or schema errors
        raise SchemaError(f"{path}: not a usable Avro schema ({type(e).__name__}: {e})") from None
    why = avro_unbounded(raw)
    if why:
        raise SchemaError(f"{path}: {why}")
    return schema


def avro_unbounded(schema) -> str | None:
    """Why reading `schema` could run without end on a few bytes (None: it cannot): an array
    whose items take no bytes (null, an empty record, fixed(0)), since a block count in the
    body then stands for items with nothing to read. fastavro would loop over them all."""
    named: dict = {}

    def collect(s):
        if isinstance(s, dict):
            if s.get("type") in ("record", "error", "enum", "fixed") and "name" in s:
                named[s["name"]] = s
                if s.get("namespace"):
                    named[f"{s['namespace']}.{s['name']}"] = s
            for f in s.get("fields", ()) if isinstance(s.get("fields"), list) else ():
                collect(f.get("type") if isinstance(f, dict) else None)
            for k in ("items", "values"):
                collect(s.get(k))
            if isinstance(s.get("type"), (dict, list)):
                collect(s["type"])
        elif isinstance(s, list):
            for x in s:
                collect(x)

    def empty(s, seen=()) -> bool:
        if isinstance(s, str):
            if s == "null":
                return True
            if s in named and s not in seen:
                return empty(named[s], seen + (s,))
            return False
        if isinstance(s, dict):
            t = s.get("type")
            if t in ("record", "error"):
                return all(empty(f.get("type"), seen) for f in s.get("fields", ()) if isinstance(f, dict))
            if t == "fixed":
                return s.get("size") == 0
            if isinstance(t, (str, dict)) and t not in ("array", "map", "enum"):
                return empty(t, seen)
        return False

    def walk(s) -> str | None:
        if isinstance(s, dict):
            if s.get("type") == "array" and empty(s.get("items")):
                return "an array of items that take no bytes: a count in a body could make it endless"
            for f in s.get("fields", ()) if isinstance(s.get("fields"), list) else ():
                if isinstance(f, dict) and (w := walk(f.get("type"))):
                    return w
            for k in ("items", "values", "type"):
                if isinstance(s.get(k), (dict, list)) and (w := walk(s[k])):
                    return w
        elif isinstance(s, list):
            for x in s:
                if w := walk(x):
                    return w
        return None

    collect(schema)
    return walk(schema)


# ---- JSON-able values ------------------------------------------------------------------------
def jsonable(v, depth: int = 0):
    """Any decoder's value as JSON: bytes as {"$bytes": hex}, non-finite floats as text, map
    keys as text, tags / extensions / dates spelled out."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if depth > 64:
        return "…"
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"$bytes": bytes(v).hex()}
    if isinstance(v, dict):
        return {k if isinstance(k, str) else json.dumps(jsonable(k, depth + 1), ensure_ascii=False):
                jsonable(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [jsonable(x, depth + 1) for x in v]
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, (decimal.Decimal, uuid.UUID)):
        return str(v)
    tag = getattr(v, "tag", None)
    if tag is not None and hasattr(v, "value"):   # cbor2.CBORTag
        return {"$tag": tag, "value": jsonable(v.value, depth + 1)}
    code = getattr(v, "code", None)
    if code is not None and hasattr(v, "data"):   # msgpack.ExtType
        return {"$ext": code, "data": bytes(v.data).hex()}
    return str(v)


# ---- the decoders: each (value, confidence) or raises -----------------------------------------
def _json(data: bytes):
    s = data[:64].lstrip()[:1]
    if s not in (b"{", b"["):
        raise ValueError("does not start with { or [")
    return json.loads(data.decode("utf-8")), 1.0


def _text(data: bytes):
    head = data[:256]
    if len(data) > 256 and detect(head, complete=False) == HEX:   # binary from its first bytes on
        raise ValueError("not printable UTF-8 or GBK text")
    kind = detect(data)
    if kind == UTF8:
        return data.decode("utf-8", "replace"), 0.9
    if kind == GBK:
        return data.decode("gbk", "replace"), 0.6
    raise ValueError("not printable UTF-8 or GBK text")


def _xml(data: bytes):
    head = data.lstrip()[:5]
    if not head.startswith(b"<") or head[1:2] not in b"?!abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_":
        raise ValueError("does not start with <")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise ValueError("has a DOCTYPE (entities are never expanded here)")
    from xml.etree import ElementTree
    return _element(ElementTree.fromstring(data)), 1.0


def _element(e) -> dict:
    d = {"tag": e.tag}
    if e.attrib:
        d["attributes"] = dict(e.attrib)
    if e.text and e.text.strip():
        d["text"] = e.text.strip()
    if len(e):
        d["children"] = [_element(c) for c in e]
    return d


def _protobuf(data: bytes):
    value, conf, why = pw.decode_raw(data)
    if value is None:
        raise ValueError(why)
    return value, conf


def _msgpack(data: bytes):
    import msgpack
    v = msgpack.unpackb(data, raw=False, strict_map_key=False)   # a str that is not UTF-8: not MessagePack
    return v, (0.85 if isinstance(v, (dict, list)) and v else 0.35 if len(data) <= 9 else 0.2)


def _cbor(data: bytes):
    import cbor2
    fp = io.BytesIO(data)
    v = cbor2.CBORDecoder(fp).decode()
    if fp.tell() != len(data):
        raise ValueError(f"{len(data) - fp.tell()} bytes after the item")
    if data.startswith(b"\xd9\xd9\xf7"):   # the self-described CBOR tag (cbor2 drops it)
        return getattr(v, "value", v) if getattr(v, "tag", None) == 55799 else v, 1.0
    return v, (0.8 if isinstance(v, (dict, list)) and v else 0.3 if len(data) <= 9 else 0.2)


def _avro_container(data: bytes):
    if not data.startswith(b"Obj\x01"):
        raise ValueError("no Avro object-container header")
    import fastavro
    r = fastavro.reader(io.BytesIO(data))
    raw = json.loads(r.metadata.get("avro.schema", "null"))
    why = avro_unbounded(raw) or ("its records take no bytes: a block count could make it endless"
                                  if avro_unbounded({"type": "array", "items": raw}) else None)
    if why:   # else every record and item takes a byte: the body's length bounds the work
        raise ValueError(f"the container's schema: {why}")
    return list(r), 1.0


def _hex(data: bytes):
    return data, 0.0


def _sniff(data: bytes) -> dict[str, str]:
    """Why each cheap-to-refuse format does not fit, from its first bytes, without calling its
    decoder (no exception per body on the common path). TEXT is judged by _not_text, only
    when it is tried: it reads more than the first bytes."""
    no = {}
    if not data.startswith(b"Obj\x01"):
        no[AVRO] = "no Avro object-container header"
    first = data[:64].lstrip()[:1]
    if first not in (b"{", b"["):
        no[JSON_F] = "does not start with { or ["
    if first != b"<":
        no[XML] = "does not start with <"
    return no


def _not_text(data: bytes) -> str:
    """Why the body is not text ("" when it may be), at less cost than detect()."""
    sample = data[:4096]
    if (len(sample) - len(sample.translate(None, _CTRL))) * 20 > len(sample):
        return "control bytes: not text"
    head = data[:256]
    if head.decode("utf-8", "replace").count("\ufffd") * 20 > len(head) and \
            head.decode("gbk", "replace").count("\ufffd") * 20 > len(head):
        return "not UTF-8 or GBK text"
    return ""


def _capped(data: bytes) -> tuple[str, ...]:
    """The formats whose first bytes already show they cannot reach ACCEPT: tried after the
    rest, only when nothing else is accepted (the answer is the one the full order gives).
    TEXT: bytes that cannot start UTF-8 leave at most GBK (0.6). PROTOBUF: a first field
    number of 64 or more caps score() at 0.7 (a MessagePack map or array starts so)."""
    b0 = data[0]
    out = ()
    if 0x80 <= b0 < 0xC2 or b0 >= 0xF5 or (b0 >= 0xC2 and len(data) > 1 and not 0x80 <= data[1] < 0xC0):
        out = (TEXT,)
    if b0 >= 0x80 and (len(data) < 2 or data[1] >= 0x80 or ((b0 & 0x7F) | data[1] << 7) >> 3 >= 64):
        out += (PROTOBUF,)   # (a one-byte key is field 15 at most)
    return out


DECODERS = {JSON_F: _json, TEXT: _text, XML: _xml, PROTOBUF: _protobuf, MSGPACK: _msgpack, CBOR: _cbor,
            AVRO: _avro_container, HEX: _hex}
_ORDER = (AVRO, JSON_F, XML, TEXT, PROTOBUF, MSGPACK, CBOR)


def _try(fn, data: bytes):
    try:
        v, conf = fn(data)
        return v, conf, ""
    except RecursionError:
        return None, -1.0, "nested too deep"
    except Exception as e:   # noqa: BLE001 - every library has its own errors: all mean "not this format"
        return None, -1.0, f"{type(e).__name__}: {e}"[:160]


# ---- the pipeline ----------------------------------------------------------------------------
def decompressed(body: bytes, sys_flag: int) -> tuple[bytes | None, str | None, str]:
    """(consumer's bytes or None, compression name or None, why it failed). A cut or damaged
    body gives what its codec decompressed before it stopped, with why saying so (whole
    blocks for LZ4 and ZSTD, a prefix of the stream for zlib). ZSTD is read here, frame by
    frame: decompress_body's reader ends quietly where a cut frame stops."""
    if not sys_flag & COMPRESSED_FLAG:
        return body, None, ""
    ctype = (sys_flag >> 8) & 0x7
    name = COMPRESSION_NAMES.get(ctype, f"type {ctype}")
    why = ""
    if ctype != 2:
        try:
            return decompress_body(body, ctype, DECOMPRESS_LIMIT), name, ""
        except Exception as e:   # noqa: BLE001 - zlib / LZ4 errors, too large, unknown type
            why = f"{type(e).__name__}: {e}"
            if isinstance(e, DecompressionTooLarge) or ctype not in COMPRESSION_NAMES:
                return None, name, f"the {name} body does not decompress: {why}"[:200]
    part, done, err = _stream(body, ctype)
    if len(part) > DECOMPRESS_LIMIT:
        return None, name, f"the {name} body does not decompress: decompresses to more than {DECOMPRESS_LIMIT:,} bytes"
    if done and not why:
        return part, name, ""
    why = why or err or "the frame ends early"
    if not part:
        return None, name, f"the {name} body does not decompress: {why}"[:200]
    return part, name, f"the {name} body is cut or damaged: decoded the first {len(part):,} bytes it gives ({why})"[:240]


_STREAM_CHUNK = 256   # compressed bytes fed at a time: a ZSTD chunk makes 8 MiB at most (RLE blocks)


def _stream(body: bytes, ctype: int) -> tuple[bytes, bool, str]:
    """(what the codec of `ctype` makes of `body` before it stops, whether every frame ended,
    why it stopped early). Stops soon after DECOMPRESS_LIMIT bytes."""
    def codec():
        if ctype == 1:
            import lz4.frame
            return lz4.frame.LZ4FrameDecompressor()
        if ctype == 2:
            import zstandard
            return zstandard.ZstdDecompressor().decompressobj()
        import zlib
        return zlib.decompressobj()
    d, parts, made, pending = codec(), [], 0, bytes(body)
    try:
        while pending and made <= DECOMPRESS_LIMIT:
            chunk, pending = pending[:_STREAM_CHUNK], pending[_STREAM_CHUNK:]
            out = d.decompress(chunk)
            parts.append(out)
            made += len(out)
            if d.eof:
                pending = d.unused_data + pending
                if not pending or ctype != 2:   # ZSTD reads frame after frame, as decompress_body does
                    break
                d = codec()
    except Exception as e:   # noqa: BLE001 - the damage: keep what came before it
        return b"".join(parts), False, f"{type(e).__name__}: {e}"
    return b"".join(parts), d.eof and not pending, ""


def decode_body(body: bytes, sys_flag: int = 0, schemas: Schemas | None = None,
                format: str | None = None) -> DecodedBody:
    """The body as people read it. `format` forces one decoder (a user's override); when it
    fails the result is hex, with the note saying why."""
    body = bytes(body)
    data, comp, why = decompressed(body, sys_flag)
    if data is None:
        return DecodedBody(HEX, comp, body, 0.0, why)
    d = _decode(data, comp, schemas, format)
    if why:   # a cut or damaged compressed body: the decoded value is of what it gave
        d.truncated = True
        d.note = "; ".join(x for x in (why, d.note) if x)
    return d


def _decode(data: bytes, comp: str | None, schemas: Schemas | None, format: str | None) -> DecodedBody:
    if format is not None and format not in DECODERS:
        return DecodedBody(HEX, comp, data, 0.0, f"unknown format {format!r}")
    if not data and format in (None, TEXT, JSON_F):
        return DecodedBody(TEXT, comp, "", 1.0, "empty body")
    notes = []
    if schemas is not None and not schemas.empty:
        for name, fn in ((PROTOBUF, (lambda d: (schemas.decode_proto(d), None)) if schemas._proto_cls else None),
                         (AVRO, schemas.decode_avro if schemas._avro else None)):
            if fn is None or format not in (None, name):
                continue
            v, conf, err = _try(lambda d: (fn(d), 1.0), data)
            if conf >= 0:
                v, sid = v
                what = "schema: " + (schemas.proto_type if name == PROTOBUF else schemas.avro_schema)
                return DecodedBody(name, comp, v, 1.0, "; ".join(
                    notes + [what + (f" (Confluent framing, schema id {sid})" if sid is not None else "")]),
                    schema_id=sid)
            notes.append(f"{name} schema: {err}")
    if format is not None:
        v, conf, err = _try(DECODERS[format], data)
        if conf >= 0:
            return DecodedBody(format, comp, v, max(conf, 0.0), "; ".join(notes + ["format chosen by the user"]))
        return DecodedBody(HEX, comp, data, 0.0, "; ".join(notes + [f"not {format}: {err}"]))
    refused = _sniff(data)
    capped = _capped(data)
    best = None   # (confidence, -place in _ORDER, name, value): ties go to the earlier format
    for i, name in enumerate(_ORDER + capped):
        if name in refused or (i < len(_ORDER) and name in capped):
            continue
        if name == TEXT and _not_text(data):
            continue
        v, conf, err = _try(DECODERS[name], data)
        if conf >= ACCEPT:
            return DecodedBody(name, comp, v, conf, "; ".join(notes))
        if conf >= 0 and (best is None or (conf, -_ORDER.index(name)) > best[:2]):
            best = (conf, -_ORDER.index(name), name, v)
    if best is not None and best[0] >= FLOOR:
        return DecodedBody(best[2], comp, best[3], best[0], "; ".join(notes + ["a guess: nothing parsed with certainty"]))
    return DecodedBody(HEX, comp, data, 0.0,
                       "; ".join(notes + ["no format fits" + (f" (best guess {best[2]}, {best[0]:.2f})" if best else "")]))


PREVIEW_DECODE_BYTES = 16 * 1024   # a body longer than this keeps its hex preview (a table row stays cheap)
_BINARY = (PROTOBUF, MSGPACK, CBOR, AVRO)


def decoded_preview(body: bytes, sys_flag: int = 0, limit: int = 80) -> str | None:
    """A one-line preview of a binary or compressed body from its decoded value, e.g.
    'protobuf: {"1": "A-1", ...}' (None: it decodes to nothing better than hex, or to text
    the plain preview shows as it is, or it is too long to decode for a preview)."""
    if len(body) > PREVIEW_DECODE_BYTES:
        return None
    d = decode_body(body, sys_flag)
    if d.format == HEX or (d.compression is None and d.format not in _BINARY):
        return None
    label = d.format + (f", {d.compression}" if d.compression else "") + (", cut" if d.truncated else "")
    text = visible_text(f"{label}: {d.text()}"[:limit + 1], one_line=True)
    return text[:limit] + " …" if len(text) > limit else text


def decoded_json(body: bytes | None, sys_flag: int) -> str:
    """decodedBody of a body as one compact JSON text, as the CSV exports carry it (the
    Spark export's tasks return this for its decodedBody column)."""
    d = decode_body(body or b"", sys_flag or 0).to_json()
    return json.dumps(d, ensure_ascii=False, separators=(",", ":"))


def decode_message(m, schemas: Schemas | None = None, format: str | None = None) -> DecodedBody:
    """decode_body of an engine Message (its body and sysFlag)."""
    return decode_body(m.body, m.sysFlag, schemas, format)
