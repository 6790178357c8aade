"""Epoch milliseconds as text, written once for the CLI, the scan's tables and the GUI:
'2026-11-22 09:25:26.891 +08:00' (or ISO-8601 '2026-11-22T09:25:26.891+08:00'), always with
milliseconds and a numeric offset, never a zone abbreviation (CST is China, Cuba and US Central).

A zone is UTC, a fixed offset (the GUI's chosen zone), or LOCAL: the machine's zone at that
instant, so a summer time shows its summer offset. Milliseconds are taken from the integer
(no float rounding). A time beyond datetime's years 1..9999 gives None: each caller says how
it shows that, and what it shows for a missing time."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone, tzinfo

LOCAL = None            # zone: the machine's zone at each instant
UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def offset_text(off: timedelta | None) -> str:
    """+08:00, -03:30, +00:00."""
    minutes = int((off or timedelta(0)).total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    h, m = divmod(abs(minutes), 60)
    return f"{sign}{h:02d}:{m:02d}"


def local_zone() -> timezone:
    """The machine's current local zone as a fixed offset (named by the offset)."""
    off = datetime.now().astimezone().utcoffset() or timedelta(0)
    return timezone(off, offset_text(off))


def to_datetime(ms: int, zone: tzinfo | None = LOCAL) -> datetime | None:
    """The aware datetime of epoch ms in `zone` (LOCAL: the machine's zone then), or None when
    out of range."""
    try:
        dt = _EPOCH + timedelta(milliseconds=int(ms))
        return dt.astimezone(zone) if zone is not UTC else dt
    except (OverflowError, OSError, ValueError):
        return None


def format_time(ms: int, zone: tzinfo | None = LOCAL) -> str | None:
    """'2026-11-22 09:25:26.891 +08:00', or None out of range."""
    dt = to_datetime(ms, zone)
    if dt is None:
        return None
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d} {dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}."
            f"{dt.microsecond // 1000:03d} {offset_text(dt.utcoffset())}")


def format_iso(ms: int, zone: tzinfo | None = LOCAL) -> str | None:
    """'2026-11-22T09:25:26.891+08:00' (UTC too as +00:00, never Z), or None out of range."""
    dt = to_datetime(ms, zone)
    return None if dt is None else dt.isoformat(timespec="milliseconds")
