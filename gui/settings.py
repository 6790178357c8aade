"""Persistent preferences (QSettings): recent stores, the time zone choice, the index chain
copies switch, and each store's settings (RocketMQ property names -> text, keyed by the
store's resolved path)."""
from __future__ import annotations

import hashlib
import json
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


def make_chain_copies(s: QSettings) -> bool:
    """Store ▸ Make In-Memory Index Copies for Key Queries (on unless turned off)."""
    return s.value("chainCopies", True) in (True, "true", "1", 1)


def set_make_chain_copies(s: QSettings, on: bool) -> None:
    s.setValue("chainCopies", bool(on))


def _store_key(path) -> tuple[str, str]:
    """One QSettings key per store: a hash of the resolved path (paths hold '/', which QSettings
    reads as groups); the path itself is stored next to the values."""
    p = str(Path(path).expanduser().resolve())
    return "storeSettings/" + hashlib.sha1(p.encode("utf-8")).hexdigest()[:16], p


def store_settings(s: QSettings, path) -> dict[str, str]:
    """The settings remembered for a store ({} when none: everything detected)."""
    key, p = _store_key(path)
    raw = s.value(key)
    if not raw:
        return {}
    try:
        data = json.loads(str(raw))
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("path") != p or not isinstance(data.get("settings"), dict):
        return {}
    return {str(k): str(v) for k, v in data["settings"].items()}


def set_store_settings(s: QSettings, path, values: dict[str, str]) -> None:
    """Remember a store's settings (empty: forget them, so everything is detected again)."""
    key, p = _store_key(path)
    if values:
        s.setValue(key, json.dumps({"path": p, "settings": dict(values)}, sort_keys=True))
    else:
        s.remove(key)
