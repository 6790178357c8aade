"""Persistent preferences (QSettings): recent stores and the time zone choice."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

MAX_RECENT = 9


def app_settings() -> QSettings:
    return QSettings("rmqstore", "rmqstore-browser")


def recent_stores(s: QSettings) -> list[str]:
    v = s.value("recent", [])
    if isinstance(v, str):
        v = [v]
    return [str(p) for p in (v or [])][:MAX_RECENT]


def add_recent(s: QSettings, path) -> list[str]:
    p = str(Path(path).expanduser().resolve())
    items = [p] + [x for x in recent_stores(s) if x != p]
    items = items[:MAX_RECENT]
    s.setValue("recent", items)
    return items


def remove_recent(s: QSettings, path: str) -> list[str]:
    items = [x for x in recent_stores(s) if x != path]
    s.setValue("recent", items)
    return items


def use_utc(s: QSettings) -> bool:
    v = s.value("utc", False)
    return v in (True, "true", "1", 1)


def set_use_utc(s: QSettings, on: bool) -> None:
    s.setValue("utc", bool(on))
