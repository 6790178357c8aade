"""How a message body is shown: detection (JSON / UTF-8 / GBK / binary), safe text (control
characters made visible, never interpreted), pretty JSON, `hexdump -C` layout, one-line
previews and truncation. Pure Python (no Qt). Sniffing, escaping and the one-line preview are
the engine's (engine/format/text.py), shared with the CLI."""
from __future__ import annotations

import base64
import codecs
import json

from engine.format.text import GBK, HEX, JSON, TEXT_LIMIT, UTF8, detect, preview, visible_text  # noqa: F401

AUTO = "auto"
MODES = (AUTO, UTF8, GBK, JSON, HEX)
MODE_LABELS = {AUTO: "Auto", UTF8: "Text (UTF-8)", GBK: "Text (GBK)", JSON: "JSON (pretty)", HEX: "Hex dump"}

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
