"""Times as the browser shows them, in one chosen zone (the local zone or UTC): the engine's
formatting (engine.format.timefmt, the CLI's and the scan's too) with the GUI's words for a
missing or out-of-range time. Pure Python (no Qt), so it is tested alone."""
from __future__ import annotations

from datetime import timezone

from engine.format.text import parse_time  # noqa: F401 - one rule for the CLI and the GUI
from engine.format.timefmt import format_iso, format_time, local_zone, offset_text  # noqa: F401 - one home

MISSING = "—"
NOT_SET = "not set"


def zone_of(utc: bool) -> timezone:
    return timezone.utc if utc else local_zone()


def zone_label(utc: bool) -> str:
    """'UTC' or 'local +01:00' — what a time column or a date picker says it uses."""
    if utc:
        return "UTC"
    return f"local {offset_text(local_zone().utcoffset(None))}"


def _out_of_range(ms) -> str:
    return f"{ms} ms (out of range)"


def format_ms(ms: int | None, utc: bool = False) -> str:
    """2026-11-22T01:25:26.891+00:00 (ISO-8601, milliseconds, offset; UTC is +00:00, never Z).
    Negative or None -> '—'."""
    if ms is None or ms < 0:
        return MISSING
    return format_iso(int(ms), zone_of(utc)) or _out_of_range(ms)


def format_ms_readable(ms: int | None, utc: bool = False, tz: timezone | None = None) -> str:
    """'2026-11-22 09:25:26.891 +08:00': date, time with milliseconds and the numeric offset
    (in `tz` when given, else the chosen zone). Negative or None -> '—'."""
    if ms is None or ms < 0:
        return MISSING
    return format_time(int(ms), tz or zone_of(utc)) or _out_of_range(ms)


def format_set_ms(ms: int | None, utc: bool = False) -> str:
    """A stored time where 0 (or less) means "never written" (checkpoint fields, index
    headers): 'not set' rather than 1970-01-01."""
    if ms is None or ms <= 0:
        return NOT_SET
    return format_ms(ms, utc)


def read_time(text: str, utc: bool) -> tuple[int | None, str]:
    """What a typed or pasted time means, by the CLI's rule (parse_time): (epoch ms, 'read as
    2026-11-28 16:00:00.000 +00:00'), or (None, 'not a time: ...'); (None, '') when empty."""
    if not text.strip():
        return None, ""
    try:
        ms = parse_time(text, utc)
    except ValueError as exc:
        return None, str(exc)
    shown = format_ms_readable(ms, utc)
    if shown.endswith("(out of range)"):
        return None, f"not a time: {text.strip()!r} is out of range"
    return ms, f"read as {shown}"


def format_epoch_ms(ms: int | None, utc: bool = False, tz: timezone | None = None) -> str:
    """'1732500000123 (2024-11-25 10:00:00.123 +08:00)': the stored integer, then the date."""
    if ms is None:
        return MISSING
    if ms < 0:
        return str(ms)
    return f"{ms} ({format_ms_readable(ms, utc, tz)})"


def format_duration_ms(ms: int) -> str:
    s, ms = divmod(max(0, int(ms)), 1000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    d, h = divmod(h, 24)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m {s}s"
    if m:
        return f"{m}m {s}.{ms:03d}s"
    return f"{s}.{ms:03d}s"


def format_bytes(n: int) -> str:
    """Exact bytes with a readable unit: '65,536 B (64.0 KiB)'."""
    n = int(n)
    if n < 1024:
        return f"{n:,} B"
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div:
            return f"{n:,} B ({n / div:.1f} {unit})"
    return f"{n:,} B"
