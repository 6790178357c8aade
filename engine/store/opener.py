"""Opening a MessageStore and what goes with it: detecting its sizes and kind (which log,
which queue store), mapping its files, planning and applying recovery (engine.store.recovery),
following a writer (refresh), and what a read-write session leaves behind when it closes. A
collaborator of the store: functions over it, which MessageStore's open, refresh and close call."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from engine.config import StoreConfig
from engine.errors import NotAStoreError, StoreError
from engine.files.mapped_file import durable_touch, refuse_full_tmpfs
from engine.format.config_json import store_config_json
from engine.store import batch_consume_queue as _bcq, dledger_commit_log as _dledger, generation as _generation
from engine.store import crash_view, lmq as _lmq, queue_store as _queue_store, recovery
from engine.store.checkpoint import Checkpoint
from engine.store.commit_log import CommitLog
from engine.store.detect import detect_config, refuse_crashed_compaction, refuse_escaping_paths, refuse_foreign_files
from engine.store.index_service import IndexService
from engine.store.settings_fit import refuse_misfits
from engine.store.store_lock import StoreLock
from engine.store.timer_store import open_timer_store
from engine.tasks import CancelToken, Progress, Task, run


def open_task(cls, root, config, read_only: bool, config_file, tolerant: bool, cancel, served_view: bool):
    """MessageStore.open_task (its docstring says what)."""
    root = Path(root)
    if not root.exists():
        raise NotAStoreError("no such folder", path=str(root))
    if not root.is_dir():
        raise NotAStoreError("not a folder", path=str(root))
    cfg = config or (StoreConfig.from_file(config_file) if config_file else StoreConfig())
    refuse_escaping_paths(root, cfg)
    cfg = cfg.with_values(storePathRootDir=str(root))
    cfg.explicit.discard("storePathRootDir")
    cfg = cfg.under_store_settings(root)
    markers = [cfg.commitlog_dirs[0], root / "consumequeue", root / "index", root / "checkpoint"]
    dledger = _dledger.choose(root, cfg, read_only)  # DLedger mode: the log is dledger-<selfId>/
    if dledger is None and not any(m.exists() for m in markers):
        raise NotAStoreError("not a RocketMQ store: no commitlog, consumequeue, index or checkpoint",
                             path=str(root))
    queue_store = _queue_store.for_root(root, read_only)  # (RocksDB's refuses a read-write open)
    if tolerant and read_only:
        cfg = dataclasses.replace(cfg, tolerant=True)
    cfg = detect_config(root, cfg, read_only, dledger.data_dirs if dledger else None)
    if not read_only:  # appends take the form the store's generation writes
        cfg = _generation.write_defaults(cfg, _generation.detect(root, cfg))
    cfg.validate()
    store = cls(root, cfg, read_only)
    # the log and the queue store this store's files call for: chosen here, once
    store.log_type = CommitLog if dledger is None else (lambda c, writable: _dledger.DLedgerCommitLog(c, dledger))
    store.queue_store_type = queue_store
    store.served_view = served_view
    try:
        yield from load_task(store, cancel)
    except BaseException:
        store.close()
        if store.untouched is not None:  # refused before its first write: lock and abort put back
            store.untouched.restore()
        raise
    return store


def load_task(store, cancel: CancelToken | None = None) -> Task[None]:
    """Map the files, plan recovery and apply it (in memory when read-only), then start the writer."""
    root, cfg = store.root, store.cfg
    writable = not store.read_only
    if writable:
        refuse_full_tmpfs(root)
        refuse_foreign_files(root, cfg)
        refuse_crashed_compaction(root)
        refuse_misfits(root, cfg)  # every size against the files, before the lock: a refusal writes nothing
        store.lock = StoreLock(root)
        store.untouched = store.lock.acquire()
    store.abort_present = (root / "abort").exists()
    store.checkpoint, store.checkpoint_exists = Checkpoint.load(root / "checkpoint")
    store.commitlog = store.log_type(cfg, writable)
    for gap in store.commitlog.queue.gaps:
        store.warnings.append(f"commitlog files missing between offsets {gap[0]} and {gap[1]}")
    store.warnings.extend(getattr(store.commitlog, "warnings", []))  # DLedger: a mixed store's notes
    store.queue_store = store.queue_store_type(store)
    store.queue_store.load(writable)
    store.pages_compiled = store.queue_store.pages_compiled  # the compiled page loop reads CQ files
    queues = store.queues or getattr(store.queue_store, "queues", {})   # (RocksDB's join store.queues after recovery)
    if any(cq.lmq for cq in queues.values()):  # a multi-dispatch broker wrote it: dispatch as it did
        _lmq.detect_multi_dispatch(cfg)
    store.index = IndexService(cfg, writable).load()
    store.warnings.extend(store.cfg.notes + store.index.warnings)
    store.timer, notes = open_timer_store(root, cfg)  # 5.x timer store (read-only), None without one
    store.warnings.extend(notes)
    store.writer = None
    if writable:
        # an index file filled by recovery's re-dispatch is recorded in the checkpoint, as
        # RocketMQ's IndexService does: a later crash then keeps it
        store.index.on_file_full = lambda ts: index_file_full(store, ts)
    yield Progress(0, 1, "plan")
    store.recovery_plan = recovery.plan(store)
    yield Progress(1, 1, "plan")
    if writable:  # on disk before any write it vouches for (batch queues' cuts, the index's slot repair, recovery's)
        durable_touch(root / "abort")
        store.untouched = None  # from here a failed open keeps `abort`: the next open recovers
    store.batch_queues, store.cfg.mapperFileSizeBatchConsumeQueue = _bcq.load_batch_queues(
        root, cfg, writable, store.commitlog.min_offset, store.recovery_plan.end_offset, store.warnings)
    try:
        store.batch_topics = _bcq.batch_topics(store.batch_queues, store.topic_config())
    except StoreError as e:  # an unreadable topics.json: the folders still say which topics
        store.batch_topics = _bcq.batch_topics(store.batch_queues, {})
        store.warnings.append(str(e))
    store.recovery = yield from recovery.apply(store.recovery_plan, store, cancel)
    store.commitlog.after_recovery(store)  # what a restarted broker adds in memory (DLedger: its reput)
    store.queue_store.after_recovery()
    crash_view.serve_index(store)  # a crashed store's index (and RocksDB queues) as its recovery rebuilds them (read-only)
    if writable:
        from engine.store.writer import StoreWriter
        sync_recovery(store)
        store.writer = StoreWriter(store)
        store.writer.start_flush_service()


def sync_recovery(store) -> None:
    """Recovery truncates CQ units and zeroes torn tails through the maps: msync them before
    new writes reuse those offsets, or a power cut brings stale units back beside new records."""
    for cq in store.queues.values():
        for f in cq.queue.files[-2:]:
            f.sync()
    for f in store.commitlog.files[-3:]:
        f.sync()
    for f in store.index.files[-2:]:
        f.flush()


def index_file_full(store, end_timestamp: int) -> None:
    """The checkpoint then vouches for the full file: the records it indexes must be on
    disk first (the roll happens inside a put, before that put's msync): every commitlog file
    with unsynced bytes, a file that rolled since the flusher's last round too."""
    store.commitlog.queue.sync_written()
    store.checkpoint.indexMsgTimestamp = end_timestamp
    store.checkpoint.store(store.root / "checkpoint")


def refresh(store) -> bool:
    """Follow a store another process (a broker, a writer) is appending to: pick up new
    files, records and units. Read-only opens only; returns whether anything changed."""
    if not store.read_only:
        return False
    if store.queue_store.detects_sizes and sizes_found_late(store):
        return True
    cl = store.commitlog
    before = (cl.max_offset, {k: cq.max_offset for k, cq in store.queues.items()}, len(store.index.files),
              {k: b.max_offset for k, b in store.batch_queues.items()})
    cl.queue.load_new()
    end = cl.max_offset
    f = cl.queue.find(end) if cl.files else None
    if f is None and cl.files:
        f = next((g for g in cl.files if g.file_from_offset >= end), None)
    if f is not None:
        for g in cl.files[cl.queue.index_of(f):]:
            g.wrote_position = g.file_size
        scan = cl.scan(cl.queue.index_of(f), start_pos=max(0, end - f.file_from_offset))
        cl.apply_end(scan.end_offset, zero=False)
    store.queue_store.refresh(cl.max_offset, cl.min_offset)
    store.index.load_new()
    for idx in store.index.files[-2:]:
        idx.reload_header()
    _bcq.refresh_batch_queues(store)
    after = (cl.max_offset, {k: cq.max_offset for k, cq in store.queues.items()}, len(store.index.files),
             {k: b.max_offset for k, b in store.batch_queues.items()})
    return after != before


def sizes_found_late(store) -> bool:
    """Opened before the writer had created its files, the sizes not given were only
    defaults (1 GiB commitlog files...), so none of its files could be mapped. Once files
    exist, detect the sizes and load the store again with them."""
    known = store.cfg.explicit | store.cfg.detected
    if {"mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue"} <= known:
        return False
    cfg = detect_config(store.root, store.cfg, store.read_only)
    if not cfg.detected - store.cfg.detected:
        return False
    cfg.detected |= store.cfg.detected
    store.close()
    store.cfg, store.queues, store.warnings = cfg, {}, []
    store.queue_store_type = _queue_store.for_root(store.root, store.read_only)  # the files written since decide
    run(load_task(store))
    return True


def store_new_topics(store) -> None:
    """topics.json gains the topics this session created (fastjson layout, .bak kept)."""
    new = sorted(store.writer.new_topics) if store.writer else []
    if not new:
        return
    data = store.config_json("topics.json") or {}
    table = data.setdefault("topicConfigTable", {})
    for t in new:
        n = 1 + max((q for tt, q in store.queues if tt == t), default=3)
        table.setdefault(t, {"order": False, "perm": 6, "readQueueNums": max(4, n), "topicFilterType": "SINGLE_TAG",
                             "topicName": t, "topicSysFlag": 0, "writeQueueNums": max(4, n)})
    dv = data.setdefault("dataVersion", {"counter": 0, "timestamp": 0})
    dv["counter"] = int(dv.get("counter", 0)) + 1
    dv["timestamp"] = int(time.time() * 1000)
    store_config_json(store.root / "config", "topics.json", data)
