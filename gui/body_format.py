"""How a message body is shown: detection (JSON / UTF-8 / GBK / binary), safe text (control
characters made visible, never interpreted), pretty JSON, `hexdump -C` layout, one-line
previews and truncation, and the Decoded view's tree rows and per store / topic schemas.
Pure Python (no Qt). Sniffing, escaping, the one-line preview and decoding are the engine's
(engine/format/text.py, engine/format/body_decode.py), shared with the CLI."""
from __future__ import annotations

import base64
import codecs
import hashlib
import json

from engine.format import body_decode as bd
from engine.format.text import GBK, HEX, JSON, TEXT_LIMIT, UTF8, detect, preview, visible_text  # noqa: F401

AUTO = "auto"
DECODED = "decoded"
MODES = (AUTO, UTF8, GBK, JSON, HEX, DECODED)
MODE_LABELS = {AUTO: "Auto", UTF8: "Text (UTF-8)", GBK: "Text (GBK)", JSON: "JSON (pretty)", HEX: "Hex dump",
               DECODED: "Decoded (tree)"}
FORMAT_LABELS = {None: "Detected", bd.JSON_F: "JSON", bd.TEXT: "Text", bd.XML: "XML", bd.PROTOBUF: "Protobuf",
                 bd.MSGPACK: "MessagePack", bd.CBOR: "CBOR", bd.AVRO: "Avro", bd.HEX: "Hex"}
TREE_NODES = 5000           # tree items made for one body before "… more"
LEAF_CHARS = 400            # characters of a leaf value shown

HEX_LIMIT = 16 * 1024       # bytes shown as hex before "show all"

def hexdump_c(data: bytes, base: int = 0, total: int | None = None) -> str:
    """`hexdump -C` layout: offset, 16 bytes in two groups of 8, |ASCII|, repeated lines
    folded into '*', and the final offset. `total` is the length to print at the end when
    `data` is a truncated prefix."""
    lines = []
    prev = None
    starred = False
    n = len(data)
    for i in range(0, n, 16):
        chunk = data[i:i + 16]
        if chunk == prev and len(chunk) == 16:
            if not starred:
                lines.append("*")
                starred = True
            continue
        prev, starred = chunk, False
        left = " ".join(f"{b:02x}" for b in chunk[:8])
        right = " ".join(f"{b:02x}" for b in chunk[8:])
        hexpart = f"{left:<23}  {right:<23}"
        asc = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{base + i:08x}  {hexpart}  |{asc}|")
    if n or total:
        lines.append(f"{base + (n if total is None else total):08x}")
    return "\n".join(lines)


def render(body: bytes, mode: str, show_all: bool = False) -> tuple[str, str, int, bool]:
    """(text for a plain-text view, the mode used, bytes shown, truncated?). JSON that does
    not parse falls back to UTF-8 text, never to an error."""
    used = detect(body) if mode == AUTO else mode
    if used == HEX:
        limit = len(body) if show_all else HEX_LIMIT
        part = body[:limit]
        return hexdump_c(part, total=len(body) if len(part) < len(body) else None), HEX, len(part), len(part) < len(body)
    if used == JSON:
        try:
            obj = json.loads(body.decode("utf-8"))
            text = json.dumps(obj, indent=2, ensure_ascii=False)
            if not show_all and len(text) > TEXT_LIMIT:
                return visible_text(text[:TEXT_LIMIT]), JSON, len(body), True
            return visible_text(text), JSON, len(body), False
        except (ValueError, UnicodeDecodeError):
            used = UTF8
    enc = GBK if used == GBK else UTF8
    limit = len(body) if show_all else TEXT_LIMIT
    part = body[:limit]
    text = codecs.getincrementaldecoder(enc)("replace").decode(part, final=len(part) == len(body))
    return visible_text(text), used, len(part), len(part) < len(body)


def as_hex(data: bytes) -> str:
    return data.hex()


def as_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# ---- the Decoded view ------------------------------------------------------------------------
def auto_mode(data: bytes, sys_flag: int = 0, schemas=None) -> tuple[str, "bd.DecodedBody | None"]:
    """What Auto shows: the text modes as before, but a body they would show as hex (or any
    body a topic has a schema for) goes to the Decoded view when it decodes confidently."""
    if schemas is None or schemas.empty:
        used = detect(data) if not sys_flag & bd.COMPRESSED_FLAG else None
        if used is not None and used != HEX:
            return used, None
    d = bd.decode_body(data, sys_flag, schemas)
    if d.format in (bd.TEXT, bd.JSON_F):
        return (JSON if d.format == bd.JSON_F else UTF8), d
    if d.format != bd.HEX and d.confidence >= bd.ACCEPT:
        return DECODED, d
    return HEX, d


def leaf_text(v) -> tuple[str, str]:
    """(shown value, type) of a tree leaf; bytes as hex, strings made inert."""
    if isinstance(v, dict) and set(v) == {"$bytes"}:
        h = v["$bytes"]
        n = len(h) // 2
        return (h[:2 * 64] + (" …" if n > 64 else "")), f"bytes[{n}]"
    if isinstance(v, str):
        t = visible_text(v, one_line=True)
        return (t[:LEAF_CHARS] + " …" if len(t) > LEAF_CHARS else t), "string"
    if isinstance(v, bool) or v is None:
        return json.dumps(v), "bool" if isinstance(v, bool) else "null"
    if isinstance(v, (int, float)):
        return repr(v), type(v).__name__
    return visible_text(json.dumps(v, ensure_ascii=False)[:LEAF_CHARS], one_line=True), type(v).__name__


def children(v) -> list[tuple[str, object]] | None:
    """(label, value) of a container's members, None for a leaf (bytes are a leaf)."""
    if isinstance(v, dict) and set(v) != {"$bytes"}:
        return [(str(k), x) for k, x in v.items()]
    if isinstance(v, list):
        return [(f"[{i}]", x) for i, x in enumerate(v)]
    return None


def _schema_key(store, topic: str) -> str:
    h = hashlib.sha1(f"{store}\0{topic}".encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return f"bodySchemas/{h}"


def load_schema(settings, store, topic: str) -> dict:
    """{"protoDesc", "protoType", "avroSchema"} saved for a store's topic (QSettings-like)."""
    if settings is None or store is None:
        return {}
    try:
        v = json.loads(settings.value(_schema_key(store, topic), "") or "{}")
    except (TypeError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


def save_schema(settings, store, topic: str, schema: dict) -> None:
    keep = {k: v for k, v in schema.items() if v}
    if keep:
        settings.setValue(_schema_key(store, topic), json.dumps({**keep, "store": str(store), "topic": topic}))
    else:
        settings.remove(_schema_key(store, topic))


_SCHEMAS: dict = {}


def schemas_for(schema: dict):
    """bd.Schemas of a saved setting (cached by file and type), or (None, why it is unusable)."""
    key = (schema.get("protoDesc") or None, schema.get("protoType") or None, schema.get("avroSchema") or None)
    if not any(key):
        return None, ""
    if key not in _SCHEMAS:
        try:
            _SCHEMAS[key] = bd.Schemas(*key)
        except bd.SchemaError as e:   # not cached: the user may fix the file
            return None, str(e)
    return _SCHEMAS[key], ""


def proto_types(path: str) -> list[str]:
    """The message types a descriptor set defines (for the schema dialog's chooser)."""
    from google.protobuf import descriptor_pb2
    try:
        with open(path, "rb") as fh:
            fds = descriptor_pb2.FileDescriptorSet.FromString(fh.read())
    except Exception:   # noqa: BLE001 - not a descriptor set: no types to offer
        return []
    out = []

    def walk(prefix, msgs):
        for m in msgs:
            out.append(prefix + m.name)
            walk(prefix + m.name + ".", m.nested_type)
    for f in fds.file:
        walk(f"{f.package}." if f.package else "", f.message_type)
    return out
