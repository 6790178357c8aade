"""Presentation rules shared by the CLI and the GUI, written once: times typed by a user,
one-line body previews (and the body sniffing and control-character escaping they use), send
templates and tag (subscription) expressions."""
from __future__ import annotations

import codecs
import json
import re
import time
import uuid
from datetime import datetime, timezone

UTF8, GBK, JSON, HEX = "utf-8", "gbk", "json", "hex"
TEXT_LIMIT = 64 * 1024      # bytes sniffed (and shown as text before "show all")
PREVIEW_BYTES = 160         # bytes a preview ever looks at

_KEEP = {0x09, 0x0A}        # tab and newline stay as they are in text views
_PICTURES = {c: chr(0x2400 + c) for c in range(0x20) if c not in _KEEP}
_PICTURES[0x7F] = "\u2421"
_CTRL_TABLE = str.maketrans({chr(c): p for c, p in _PICTURES.items()})
# C1 controls and bidi overrides would also change how text is drawn: show them as escapes
for _c in list(range(0x80, 0xA0)) + [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069]:
    _CTRL_TABLE[_c] = f"\\u{_c:04x}"


# ---- times ----------------------------------------------------------------------------------
_SPACED_OFFSET = re.compile(r"\s+([+-]\d\d:?\d\d|[Zz])$")   # '... 09:25:26.891 +08:00' as printed


def parse_time(text: str, utc: bool = False) -> int:
    """Epoch milliseconds from digits or ISO-8601, also as the CLI and the GUI print times
    ('2026-11-22 09:25:26.891 +08:00': a space before the offset). A time without a zone is
    local time (its own date's offset, so DST counts) or UTC when `utc`. ValueError says
    what is accepted."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    iso = _SPACED_OFFSET.sub(r"\1", text)
    try:
        dt = datetime.fromisoformat(iso[:-1] + "+00:00" if iso[-1:] in ("Z", "z") else iso)
    except ValueError:
        raise ValueError(f"not a time: {text!r} (epoch milliseconds or ISO-8601)") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc) if utc else dt.astimezone()
    return int(round(dt.timestamp() * 1000))


# ---- bodies ---------------------------------------------------------------------------------
def visible_text(text: str, one_line: bool = False) -> str:
    """Control characters as Unicode control pictures (ESC -> ␛), so escape sequences are
    shown, never acted on. one_line also turns newlines and tabs into pictures."""
    text = text.replace("\r\n", "\n").translate(_CTRL_TABLE)
    if one_line:
        text = text.replace("\n", "\u240A").replace("\t", "\u2409")
    return text


_NOT_PRINTABLE = {c: None for c in [*range(0x20), *range(0x7F, 0xA0), 0xFFFD] if c not in (0x09, 0x0A, 0x0D)}


def _printable_ratio(text: str) -> float:
    """Share of characters that are not controls (C0 but tab / newline / CR, DEL, C1) nor U+FFFD."""
    if not text:
        return 1.0
    return len(text.translate(_NOT_PRINTABLE)) / len(text)


def _decode_prefix(data: bytes, encoding: str) -> str | None:
    """Strict decode that forgives a multi-byte character cut by truncation at the end."""
    try:
        return codecs.getincrementaldecoder(encoding)("strict").decode(data, final=False)
    except UnicodeDecodeError:
        return None


def detect(body: bytes, complete: bool = True) -> str:
    """Best way to show a body: JSON, UTF-8 text, GBK text or hex. `complete=False` when
    `body` is only a prefix (JSON cannot be confirmed then; text can)."""
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


def preview(body: bytes, compressed: bool = False, limit: int = 80) -> str:
    """A one-line preview from at most PREVIEW_BYTES of the body (never the whole body):
    text with control characters made visible, or `hex: ..` for binary bodies."""
    total = len(body)
    if compressed:
        return f"[compressed, {total:,} B] " + bytes(body[:16]).hex(" ")
    head = bytes(body[:PREVIEW_BYTES])
    mode = detect(head, complete=False)
    if mode == HEX:
        return "hex: " + head[:24].hex(" ") + (" …" if total > 24 else "")
    enc = GBK if mode == GBK else UTF8
    text = codecs.getincrementaldecoder(enc)("replace").decode(head, final=total <= PREVIEW_BYTES)
    text = visible_text(text, one_line=True)
    if len(text) > limit or total > len(head):
        text = text[:limit] + " …"
    return text


# ---- send templates ---------------------------------------------------------------------------
def render_template(s: str | None, i: int, count: int = 1, now_ms: int | None = None) -> str | None:
    """Message i of `count`: {i} 0-based index, {n} 1-based, {count}, {ts} epoch ms now,
    {uuid} a random UUID. None stays None."""
    if s is None or "{" not in s:
        return s
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return (s.replace("{i}", str(i)).replace("{n}", str(i + 1)).replace("{count}", str(count))
            .replace("{ts}", str(now_ms)).replace("{uuid}", str(uuid.uuid4())))


# ---- tag expressions --------------------------------------------------------------------------
def parse_tags_expression(expr: str | None) -> frozenset[str] | None:
    """SubscriptionData's rule: tags split on '||' and trimmed; None (every tag) for '*' or
    nothing. An expression that names no tag ('||') is an error, not 'every tag'."""
    if expr is None:
        return None
    expr = expr.strip()
    if not expr or expr == "*":
        return None
    tags = frozenset(t.strip() for t in expr.split("||") if t.strip())
    if not tags:
        raise ValueError(f"tag expression {expr!r} names no tag")
    return tags
