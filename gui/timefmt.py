"""Times as the browser shows them: ISO-8601 with milliseconds, in one chosen zone (the local
zone or UTC), always with the zone written out. Pure Python (no Qt), so it is tested alone."""
from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

MISSING = "—"


def local_zone() -> timezone:
    """The machine's current local zone as a fixed offset (and its name)."""
    now = datetime.now().astimezone()
    return timezone(now.utcoffset() or timedelta(0), now.tzname() or "local")


def zone_of(utc: bool) -> timezone:
    return timezone.utc if utc else local_zone()


def zone_label(utc: bool) -> str:
    """'UTC' or 'local +01:00 CET' — what a time column or a date picker says it uses."""
    if utc:
        return "UTC"
    tz = local_zone()
    off = datetime.now(tz).strftime("%z")
    name = time.tzname[time.localtime().tm_isdst] if time.daylight else time.tzname[0]
    return f"local {off[:3]}:{off[3:]} {name}"


def to_datetime(ms: int, utc: bool) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).astimezone(zone_of(utc))


def format_ms(ms: int | None, utc: bool = False) -> str:
    """2026-11-22T01:25:26.891+00:00 (ISO-8601, milliseconds, offset). Negative or None -> '—'."""
    if ms is None or ms < 0:
        return MISSING
    try:
        dt = to_datetime(int(ms), utc)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms (out of range)"
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z" if utc else "+00:00")


def format_ms_with_raw(ms: int | None, utc: bool = False) -> str:
    """'2026-11-22T01:25:26.891Z  (1795310726891)': the exact integer next to the readable time."""
    if ms is None:
        return MISSING
    return f"{format_ms(ms, utc)}  ({ms})"


def parse_time(text: str, utc: bool = False) -> int:
    """Epoch milliseconds from digits or ISO-8601; a time without a zone is in the chosen zone."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    dt = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=zone_of(utc))
    return int(round(dt.timestamp() * 1000))


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
