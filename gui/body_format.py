"""How a message body is shown: detection (JSON / UTF-8 / GBK / binary), safe text (control
characters made visible, never interpreted), pretty JSON, `hexdump -C` layout, one-line
previews and truncation. Pure Python (no Qt)."""
from __future__ import annotations

import base64
import codecs
import json

AUTO, UTF8, GBK, JSON, HEX = "auto", "utf-8", "gbk", "json", "hex"
MODES = (AUTO, UTF8, GBK, JSON, HEX)
MODE_LABELS = {AUTO: "Auto", UTF8: "Text (UTF-8)", GBK: "Text (GBK)", JSON: "JSON (pretty)", HEX: "Hex dump"}

TEXT_LIMIT = 64 * 1024      # bytes shown as text before "show all"
HEX_LIMIT = 16 * 1024       # bytes shown as hex before "show all"
PREVIEW_BYTES = 160         # bytes a table row ever looks at

_KEEP = {0x09, 0x0A}        # tab and newline stay as they are in the text views
_PICTURES = {c: chr(0x2400 + c) for c in range(0x20) if c not in _KEEP}
_PICTURES[0x7F] = "\u2421"
_CTRL_TABLE = str.maketrans({chr(c): p for c, p in _PICTURES.items()})
# C1 controls and bidi overrides would also change how text is drawn: show them as escapes
for _c in list(range(0x80, 0xA0)) + [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]:
    _CTRL_TABLE[_c] = f"\\u{_c:04x}"


def visible_text(text: str, one_line: bool = False) -> str:
    """Control characters as Unicode control pictures (ESC -> ␛), so escape sequences are
    shown, never acted on. one_line also turns newlines and tabs into pictures."""
    text = text.replace("\r\n", "\n").translate(_CTRL_TABLE)
    if one_line:
        text = text.replace("\n", "\u240A").replace("\t", "\u2409")
    return text


def _printable_ratio(text: str) -> float:
    if not text:
        return 1.0
    bad = sum(1 for ch in text if (ord(ch) < 0x20 and ch not in "\t\n\r") or ch == "\ufffd" or 0x7F <= ord(ch) < 0xA0)
    return 1.0 - bad / len(text)


def _decode_prefix(data: bytes, encoding: str) -> str | None:
    """Strict decode that forgives a multi-byte character cut by truncation at the end."""
    try:
        return codecs.getincrementaldecoder(encoding)("strict").decode(data, final=False)
    except UnicodeDecodeError:
        return None


def detect(body: bytes, complete: bool = True) -> str:
    """Best mode for a body: JSON, UTF-8 text, GBK text or hex. `complete=False` when `body`
    is only a prefix (JSON cannot be confirmed then; text can)."""
    if not body:
        return UTF8
    sample = body[:TEXT_LIMIT]
    text = _decode_prefix(sample, "utf-8")
    if text is not None and _printable_ratio(text) >= 0.95:
        stripped = text.lstrip()
        if complete and stripped[:1] in ("{", "[") and len(body) <= 8 * 1024 * 1024:
            try:
                json.loads(body.decode("utf-8"))
                return JSON
            except (ValueError, UnicodeDecodeError):
                pass
        return UTF8
    if any(b >= 0x80 for b in sample[:4096]):
        text = _decode_prefix(sample, "gbk")
        if text is not None and _printable_ratio(text) >= 0.95:
            return GBK
    return HEX


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


def decode_text(data: bytes, encoding: str) -> str:
    return data.decode(encoding, errors="replace")


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


def preview(body: bytes, compressed: bool = False, limit: int = 80) -> str:
    """A one-line preview from at most PREVIEW_BYTES of the body (never the whole body)."""
    total = len(body)
    if compressed:
        return f"[compressed, {total:,} B] " + body[:16].hex(" ")
    head = body[:PREVIEW_BYTES]
    mode = detect(head, complete=False)
    if mode == HEX:
        return "hex: " + head[:24].hex(" ") + (" …" if total > 24 else "")
    enc = GBK if mode == GBK else UTF8
    text = codecs.getincrementaldecoder(enc)("replace").decode(head, final=total <= PREVIEW_BYTES)
    text = visible_text(text, one_line=True)
    if len(text) > limit or total > len(head):
        text = text[:limit] + " …"
    return text


def as_hex(data: bytes) -> str:
    return data.hex()


def as_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
