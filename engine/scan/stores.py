"""The stores one scan covers: a cluster's brokers, each with its store.

A scan takes one or many store specs (`--store` repeated): a store folder, a glob of them,
or a cluster layout folder -- `<root>/<brokerName>/store` or `<root>/<brokerName>/<store>...`
(a broker's master and slave copies side by side). Each store gets a broker name: broker.conf's
`brokerName` when a broker.conf lies in the store (or its `config/`) or in its parent folder
(or its `conf/`), else the folder's name (the parent's when the folder is called `store`).

With more than one store every row of a job carries `broker` (aggregates group by it as well
as by topic and queue) and message rows carry `store` (its path) too; one store keeps the
shapes jobs had before."""
from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path

from engine.scan.jobs import local_path_of
from engine.scan.remote import is_remote, remote_stores, store_uri

ORIGIN_COLUMNS = [("broker", "string"), ("store", "string")]
_CONF_PLACES = ("broker.conf", "config/broker.conf", "../broker.conf", "../conf/broker.conf")
MAX_STORES = 4096


@dataclass(frozen=True)
class StoreRef:
    broker: str
    path: str


@dataclass
class ScanStore:
    """An open store in a scan, with its broker name and path (the `store` column)."""
    broker: str
    path: str
    store: object   # engine's MessageStore, opened read-only by the caller


def looks_like_store(d) -> bool:
    d = Path(d)
    return (d / "checkpoint").is_file() or (d / "commitlog").is_dir() or (d / "consumequeue").is_dir()


def broker_name(path) -> str:
    """brokerName from a broker.conf beside the store, else the folder's name."""
    from engine.config import read_properties
    p = Path(path)
    for rel in _CONF_PLACES:
        conf = (p / rel).resolve()
        if conf.is_file():
            try:
                name = read_properties(conf).get("brokerName", "").strip()
            except Exception:   # an unreadable broker.conf names nothing; the folder does
                continue
            if name:
                return name
    p = p.resolve()
    return p.parent.name if p.name == "store" and p.parent.name else p.name


def _children(d: Path) -> list[Path]:
    try:
        return sorted(c for c in d.iterdir() if c.is_dir() and not c.name.startswith("."))
    except OSError:
        return []


def _layout(root: Path) -> list[tuple[Path, str | None]]:
    """(store folder, broker name from the layout) under a cluster layout folder."""
    out = []
    for b in _children(root):
        if looks_like_store(b):
            out.append((b, None))
            continue
        for s in _children(b):
            if looks_like_store(s):
                out.append((s, b.name))
    return out


def resolve_stores(specs: list[str]) -> list[StoreRef]:
    """Store folders named by `specs` (paths, file:// URIs, globs, cluster layouts), sorted by
    (broker, path), each once. ValueError when a spec names no store."""
    found: dict[str, StoreRef] = {}
    for spec in specs:
        if is_remote(spec):   # a filesystem URI (or any store, forced): a store or a cluster layout, no glob
            for uri, name in remote_stores(store_uri(spec)):
                found.setdefault(uri, StoreRef(name, uri))
            continue
        local = local_path_of(spec)
        paths = sorted(glob.glob(local)) if glob.has_magic(local) else [local]
        hits = []
        for p in map(Path, paths):
            if looks_like_store(p):
                hits.append((p, None))
            elif p.is_dir():
                layout = _layout(p)
                # a plain folder that holds no layout is handed to the store opener as it is,
                # which says exactly why it is no store (DLedger, RocksDB, empty, ...)
                hits.extend(layout or ([] if glob.has_magic(local) else [(p, None)]))
            elif not glob.has_magic(local):
                raise ValueError(f"{spec}: no such folder")
        if not hits:
            raise ValueError(f"{spec}: no RocketMQ store there (a store folder, a glob of them, or a cluster "
                             f"layout <root>/<brokerName>/store)")
        for p, layout_broker in hits:
            key = os.path.realpath(p)
            if key not in found:
                conf_name = broker_name(p)
                # a layout's broker folder names the broker unless a broker.conf says otherwise
                name = conf_name if layout_broker is None or _has_conf(p) else layout_broker
                found[key] = StoreRef(name, str(p.absolute()))
        if len(found) > MAX_STORES:
            raise ValueError(f"more than {MAX_STORES} stores: narrow the glob")
    return sorted(found.values(), key=lambda r: (r.broker, r.path))


def _has_conf(p: Path) -> bool:
    return any((p / rel).is_file() for rel in _CONF_PLACES)


def members_of(stores) -> list[ScanStore]:
    """A MessageStore, or ScanStores: the list of ScanStores a job runs over, sorted."""
    if isinstance(stores, ScanStore):
        return [stores]
    if isinstance(stores, (list, tuple)):
        out = [s if isinstance(s, ScanStore) else ScanStore(_name_of(s), _path_of(s), s) for s in stores]
        if not out:
            raise ValueError("no store to scan")
        return sorted(out, key=lambda m: (m.broker, m.path))
    return [ScanStore(_name_of(stores), _path_of(stores), stores)]


def _path_of(store) -> str:
    return getattr(store, "display_root", None) or str(store.root)


def _name_of(store) -> str:
    return getattr(store, "scan_broker", None) or broker_name(store.root)


def by_broker(members: list[ScanStore]) -> list[tuple[str, list[ScanStore]]]:
    """Members grouped by broker name, in broker order."""
    groups: dict[str, list[ScanStore]] = {}
    for m in members:
        groups.setdefault(m.broker, []).append(m)
    return sorted(groups.items())
