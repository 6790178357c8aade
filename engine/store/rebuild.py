"""Rebuild (§12.7): every ConsumeQueue and index file dropped, then rebuilt from the commitlog
by the recovery of a read-write open (normal, or abnormal when `abort` is there: the same
commitlog end), which re-dispatches from the first record since nothing is dispatched yet."""
from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

from engine.tasks import NEVER, CancelToken, Progress, Task

REBUILD_TRASH = ".rmqstore-rebuild-trash"  # what a rebuild is deleting; a killed rebuild may leave it
DROPPED = ("consumequeue", "consumequeue_ext", "index")
REBUILT = {"mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum"}  # the sizes of what is rebuilt


def rebuild_task(root: Path, cfg, cancel: CancelToken | None = None, overwrite_geometry: bool = False) -> Task[dict]:
    """Sizes given for the rebuilt files (mappedFileSizeConsumeQueue, maxHashSlotNum,
    maxIndexNum) that contradict the files there are refused, nothing changed, unless
    overwrite_geometry: then the new files take them.

    Each folder is moved aside whole (one rename) before it is deleted, so a rebuild killed
    at any point leaves every folder complete or absent, never a queue or an index with files
    missing from the middle; the next read-write open (or rebuild) dispatches what is missing.
    Cancel is honoured before anything is moved and then during the re-dispatch (which the
    next open simply continues).

    Before anything is moved the checkpoint stops vouching for what is deleted (§12.7):
    logicsMsgTimestamp and indexMsgTimestamp become 0 (no consume-queue unit flushed, no
    index file full), so a rebuild cut short leaves a checkpoint a broker could have written:
    its crash recovery then starts at the first commitlog file and keeps no index file by an
    old timestamp. A completed rebuild puts logicsMsgTimestamp back."""
    from engine.store.detect import refuse_foreign_files
    from engine.store.message_store import MessageStore
    from engine.store.store_lock import StoreLock
    cancel = cancel or NEVER
    root = Path(root)
    yield Progress(0, 1, "plan", message="checking the store")
    asked = cfg
    replaced = REBUILT & cfg.explicit if cfg is not None else set()
    # validates the store first (the files as they are)
    with MessageStore.open(root, _without(cfg, replaced), read_only=True, served_view=False) as probe:
        cfg = probe.cfg
        refusal = probe.rebuild_refusal()  # (a DLedger log; queues in a RocksDB database, never deleted)
        if refusal is not None:
            from engine.errors import ReadOnlyStoreError
            raise ReadOnlyStoreError(refusal[0], path=str(refusal[1]))
    if replaced:
        cfg = _geometry_asked(root, cfg, asked, replaced, overwrite_geometry)
    refuse_foreign_files(root, cfg)
    cancel.raise_if_cancelled()
    yield Progress(0, 1, "index", message="deleting the consume queues and the index")
    lock = StoreLock(root)
    lock.acquire()  # never delete the queues of a store a broker or another writer is using
    try:
        logics = _forget_dropped(root)
        trash = root / REBUILD_TRASH
        shutil.rmtree(trash, ignore_errors=True)
        trash.mkdir(exist_ok=True)
        for d in DROPPED:
            if os.path.lexists(root / d):
                os.rename(root / d, trash / d)
        shutil.rmtree(trash, ignore_errors=True)
    finally:
        lock.release()
    s = yield from MessageStore.open_task(root, cfg, read_only=False, cancel=cancel)
    with s:
        r = s.recovery
        if logics > s.checkpoint.logicsMsgTimestamp:  # every record is in its queue again
            s.checkpoint.logicsMsgTimestamp = logics  # (the close stores it)
        return {"dispatched": r.dispatched, "unitsWritten": r.units_written, "indexEntries": r.index_entries_added,
                "queues": len(s.queues), "indexFiles": len(s.index.files), "commitlogMaxOffset": s.max_offset,
                "abnormal": r.abnormal}


def _forget_dropped(root: Path) -> int:
    """The checkpoint without the timestamps of the consume queues and the index about to be
    deleted, stored before they go; returns the logicsMsgTimestamp it had."""
    from engine.store.checkpoint import Checkpoint
    path = root / "checkpoint"
    cp, existed = Checkpoint.load(path)
    if existed and (cp.logicsMsgTimestamp or cp.indexMsgTimestamp):
        logics = cp.logicsMsgTimestamp
        cp.logicsMsgTimestamp = cp.indexMsgTimestamp = 0
        cp.store(path)
        return logics
    return cp.logicsMsgTimestamp


def _without(cfg, names: set[str]):
    """cfg with `names` back to what the files decide (the probe reads the store as it is)."""
    if not names:
        return cfg
    from engine.config import StoreConfig
    out = dataclasses.replace(cfg, **{k: getattr(StoreConfig(), k) for k in names})
    out.explicit = cfg.explicit - names
    return out


def _geometry_asked(root: Path, found, asked, names: set[str], overwrite: bool):
    """The probe's settings with the sizes asked for the rebuilt files; refused (ConfigError,
    nothing changed) where the files there contradict them, unless `overwrite`."""
    from engine.store.settings_fit import COMMITLOG, misfits
    cfg = found.with_values(**{k: getattr(asked, k) for k in names})
    cfg.detected = found.detected - names
    contradicted = [m for m in misfits(root, cfg) if m.kind != COMMITLOG]
    if contradicted and not overwrite:
        more = f" (and {len(contradicted) - 1} more file(s))" if len(contradicted) > 1 else ""
        raise contradicted[0].error(f"{more}: rebuild would replace the store's {contradicted[0].kind} files "
                                    "with files of the sizes given; give --overwrite-geometry to do that")
    return cfg
