"""MessageStore: the one object the CLI and the GUI use (DefaultMessageStore's read side,
plus the write side when opened read-write).

Opening read-only maps every file with ACCESS_READ, takes no lock and writes nothing; it
still plans recovery (engine.store.recovery: where valid data ends, which CQ units are dirty)
and applies the plan in memory, so that it reads exactly the prefix RocketMQ would keep."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.store.checkpoint import Checkpoint
from engine.store.commit_log import CommitLog
from engine.store import dledger_commit_log as _dledger, dledger_reput as _dledger_reput
from engine.config import StoreConfig
from engine.format.config_json import CONFIG_FILES, consumer_offsets, load_config_json, store_config_json
from engine.store import generation as _generation, recovery
from engine.store.detect import _subdirs, detect_config, refuse_escaping_paths, refuse_foreign_files
from engine.store.recovery import RecoveryPlan, RecoveryReport
from engine.tasks import CancelToken, Progress, Task, run
from engine.store.consume_queue import ConsumeQueue
from engine.store import rocksdb_cq
from engine.errors import MessageRejectedError, NotAStoreError, ReadOnlyStoreError, StoreError
from engine.store.queries import Queries, QueryResult  # noqa: F401 (QueryResult: engine's facade)
from engine.files.mapped_file import durable_touch, refuse_full_tmpfs
from engine.store.index_service import IndexService
from engine.store.timer_store import TimerStore, open_timer_store
from engine.format.message import Message
from engine.store.store_lock import StoreLock, Untouched, holder_pid
from engine.store.settings_fit import refuse_misfits
from engine.store import page as _page  # getMessage's loop and its lazy page
from engine.store.page import MessagePage as _PAGE, confirm as _CONFIRM
from engine.store import batch_consume_queue as _bcq, batch_page as _batch_page, lmq as _lmq
from engine.store.queue_kinds import QueueKinds
from engine.accel import load as _load_accel

_APPEND = _load_accel("_append")  # the compiled put loop for plain messages (None: Python's own)


def _put_message_py(self, topic: str, body: bytes = b"", queue_id: int | None = None, tags: str | None = None,
                    keys=None, properties: dict | None = None, flag: int = 0, **kw):
    """Append one message (RocketMQ encoding, UNIQ_KEY generated unless given) and dispatch it.
    The reference: the writer's draft and put (the compiled front hands it what it does not take)."""
    w = self.writer or self._writer()
    return w.put([w.draft(topic, body, queue_id, tags, keys, properties, flag, **kw)])[0]


# MessageStore.put_message: the compiled front (a plain message to the Appender in one call) or it
_put_message = _APPEND.put_message if _APPEND is not None else _put_message_py


@dataclass  # no slots: the compiled getMessage builds it with __new__, the later fields keep their defaults
class GetMessageResult:
    """`messages` is a MessagePage (a list of Message built on access, plus numpy columns)
    when the read found any; an empty list otherwise. LMQ and BatchCQ queues also answer
    RocketMQ's messageQueueOffset (each record's offset in this queue), a BatchCQ its
    messageCount (inner messages) and the inner messages of its records."""
    status: str
    nextBeginOffset: int
    minOffset: int
    maxOffset: int
    messages: list[Message] | _page.MessagePage = field(default_factory=list)
    bufferTotalSize: int = 0
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (queue offset, why)
    messageQueueOffset: list[int] | None = None  # LMQ and BatchCQ queues
    messageCount: int | None = None              # BatchCQ: inner messages (else len(messages))
    cqType: str = "SimpleCQ"
    innerMessages: list | None = None            # BatchCQ: batch_page.BatchedMessage per offset
    source: str | None = None                    # a store with its tier: which one answered, and why

    def to_json(self, with_body: bool = True) -> dict:
        d = {"status": self.status, "nextBeginOffset": self.nextBeginOffset,
             "minOffset": self.minOffset, "maxOffset": self.maxOffset,
             "messageCount": len(self.messages) if self.messageCount is None else self.messageCount,
             "bufferTotalSize": self.bufferTotalSize,
             "messages": [m.to_json(with_body) for m in self.messages],
             "skipped": [{"queueOffset": q, "reason": r} for q, r in self.skipped]}
        if self.messageQueueOffset is not None:
            d["messageQueueOffset"] = self.messageQueueOffset
        if self.source is not None:
            d["source"] = self.source
        if self.innerMessages is not None:
            d["cqType"] = self.cqType
            d["innerMessages"] = [b.to_json(with_body) for b in self.innerMessages]
        return d


class MessageStore(Queries, QueueKinds):
    """Open with MessageStore.open(root); close() (or use as a context manager) when done."""

    def __init__(self, root: Path, cfg: StoreConfig, read_only: bool):
        self.root = root
        self.cfg = cfg
        self.read_only = read_only
        self.lock: StoreLock | None = None
        self.untouched: Untouched | None = None  # lock and abort as found, until the open's first write
        self.commitlog: CommitLog | None = None
        self.dledger: _dledger.DLedgerFolder | None = None  # DLedger mode: where the log is
        self.index: IndexService | None = None
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.batch_queues: dict = {}  # (topic, queueId) -> BatchConsumeQueue (5.x BatchCQ topics)
        self.batch_topics: set[str] = set()  # topics dispatched to BatchCQ queues
        self.pages_compiled = True  # the compiled page loop reads these queues (not RocksDB's)
        self.warnings: list[str] = []
        self.recovery_plan: RecoveryPlan | None = None
        self.recovery: RecoveryReport | None = None
        self.rocksdb: rocksdb_cq.RocksDBConsumeQueueStore | None = None  # CQs in RocksDB (read-only)
        self.timer: TimerStore | None = None

    # ---- opening ---------------------------------------------------------------------
    @classmethod
    def open(cls, root, config: StoreConfig | None = None, read_only: bool = True,
             config_file: str | None = None, tolerant: bool = False, served_view: bool = True) -> "MessageStore":
        """tolerant (read-only, for check): files that do not fit the sizes are passed over and
        listed in `refused_files` instead of refusing the store; mixed sizes take the majority.
        served_view=False: a DLedger store as its files are, without what a restarted broker
        would add in memory (engine.store.dledger_reput), as the scans read it."""
        return run(cls.open_task(root, config, read_only, config_file, tolerant, served_view=served_view))

    @classmethod
    def open_task(cls, root, config: StoreConfig | None = None, read_only: bool = True,
                  config_file: str | None = None, tolerant: bool = False,
                  cancel: CancelToken | None = None, served_view: bool = True) -> Task["MessageStore"]:
        """`open` as a task: Progress in the phases "plan", "consume queues", "index",
        "commitlog"; returns the store. A cancelled open closes what it opened (`abort` stays:
        the next open recovers again)."""
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
        if rocksdb_cq.is_rocksdb_cq(root) and not read_only:
            raise ReadOnlyStoreError("consume queues are in RocksDB (storeType=defaultRocksDB): such a store "
                                     "opens read-only; writing to it is not supported", path=str(root / "consumequeue"))
        if tolerant and read_only:
            cfg = dataclasses.replace(cfg, tolerant=True)
        cfg = detect_config(root, cfg, read_only, dledger.data_dirs if dledger else None)
        if not read_only:  # appends take the form the store's generation writes
            cfg = _generation.write_defaults(cfg, _generation.detect(root, cfg))
        cfg.validate()
        store = cls(root, cfg, read_only)
        store.dledger = dledger
        store.served_view = served_view
        try:
            yield from store._load_task(cancel)
        except BaseException:
            store.close()
            if store.untouched is not None:  # refused before its first write: lock and abort put back
                store.untouched.restore()
            raise
        return store

    @classmethod
    def create(cls, root, config: StoreConfig | None = None) -> "MessageStore":
        """A new store (the folder is created; an existing store is simply opened) read-write."""
        root = Path(root)
        cfg = config or StoreConfig()
        (root / "commitlog").mkdir(parents=True, exist_ok=True)
        return cls.open(root, cfg, read_only=False)

    def _load(self) -> None:
        run(self._load_task())

    def _load_task(self, cancel: CancelToken | None = None) -> Task[None]:
        root, cfg = self.root, self.cfg
        writable = not self.read_only
        if writable:
            refuse_full_tmpfs(root)
            refuse_foreign_files(root, cfg)
            refuse_misfits(root, cfg)  # every size against the files, before the lock: a refusal writes nothing
            self.lock = StoreLock(root)
            self.untouched = self.lock.acquire()
        self.abort_present = (root / "abort").exists()
        self.checkpoint, self.checkpoint_exists = Checkpoint.load(root / "checkpoint")
        self.commitlog = _dledger.DLedgerCommitLog(cfg, self.dledger) if self.dledger else CommitLog(cfg, writable)
        for gap in self.commitlog.queue.gaps:
            self.warnings.append(f"commitlog files missing between offsets {gap[0]} and {gap[1]}")
        self.warnings.extend(getattr(self.commitlog, "warnings", []))  # DLedger: a mixed store's notes
        rocks = rocksdb_cq.is_rocksdb_cq(root)
        if rocks:  # read before recovery (its end vouches for the commitlog's); shown after it
            self.rocksdb = rocksdb_cq.RocksDBConsumeQueueStore(root)
        else:
            self._load_queues(writable)
        if any(cq.lmq for cq in self.queues.values()):  # a multi-dispatch broker wrote it: dispatch as it did
            for k in ("enableLmq", "enableMultiDispatch"):
                if k not in cfg.explicit and not getattr(cfg, k):
                    setattr(cfg, k, True)
                    cfg.detected.add(k)
        self.index = IndexService(cfg, writable).load()
        self.warnings.extend(self.cfg.notes + self.index.warnings)
        self.timer, notes = open_timer_store(root, cfg)  # 5.x timer store (read-only), None without one
        self.warnings.extend(notes)
        self.writer = None
        if writable:
            # an index file filled by recovery's re-dispatch is recorded in the checkpoint, as
            # RocketMQ's IndexService does: a later crash then keeps it
            self.index.on_file_full = self._index_file_full
        yield Progress(0, 1, "plan")
        self.recovery_plan = recovery.plan(self)
        yield Progress(1, 1, "plan")
        if writable:  # on disk before any write it vouches for (batch queues' cuts, the index's slot repair, recovery's)
            durable_touch(root / "abort")
            self.untouched = None  # from here a failed open keeps `abort`: the next open recovers
        self.batch_queues, self.cfg.mapperFileSizeBatchConsumeQueue = _bcq.load_batch_queues(
            root, cfg, writable, self.commitlog.min_offset, self.recovery_plan.end_offset, self.warnings)
        try:
            self.batch_topics = _bcq.batch_topics(self.batch_queues, self.topic_config())
        except StoreError as e:  # an unreadable topics.json: the folders still say which topics
            self.batch_topics = _bcq.batch_topics(self.batch_queues, {})
            self.warnings.append(str(e))
        self.recovery = yield from recovery.apply(self.recovery_plan, self, cancel)
        if self.dledger is not None and getattr(self, "served_view", True):
            # what the restarted broker serves: its reput, its index (in memory)
            _dledger_reput.restart_view(self)
        if rocks:
            self._load_rocksdb()
        if writable:
            from engine.store.writer import StoreWriter
            self._sync_recovery()
            self.writer = StoreWriter(self)
            self.writer.start_flush_service()

    def _load_rocksdb(self, again: bool = False) -> None:
        """The RocksDB consume queues (after recovery: units past the commitlog end are not
        shown). Their pages go through the reference loop (the compiled one reads CQ files)."""
        if again:  # a refresh: the database read anew
            self.rocksdb.close()
            self.rocksdb = rocksdb_cq.RocksDBConsumeQueueStore(self.root)
        self.queues = {}
        self.warnings.extend(w for w in self.rocksdb.warnings if w not in self.warnings)
        end = self.commitlog.max_offset
        for key, cq in self.rocksdb.queues.items():
            cq.truncate_dirty(end)
            self.queues[key] = cq
        self.pages_compiled = False

    def _load_queues(self, writable: bool, skip: set | None = None) -> None:
        cq_root = self.root / "consumequeue"
        for tdir in sorted(_subdirs(cq_root)):
            for qdir in sorted(_subdirs(tdir)):
                try:
                    qid = int(qdir.name)
                except ValueError:
                    if skip is None:
                        self.warnings.append(f"skipped {qdir}: queue id is not a number")
                    continue
                if skip and (tdir.name, qid) in skip:
                    continue
                try:
                    cq = ConsumeQueue(tdir.name, qid, qdir, self.cfg.mappedFileSizeConsumeQueue, writable,
                                      tolerant=self.cfg.tolerant)
                except StoreError:
                    if skip is None:
                        raise
                    continue  # refresh: a file still being created (or sizes not known yet): next time
                self.queues[(tdir.name, qid)] = cq

    def _store_new_topics(self) -> None:
        """topics.json gains the topics this session created (fastjson layout, .bak kept)."""
        new = sorted(self.writer.new_topics) if self.writer else []
        if not new:
            return
        data = self.config_json("topics.json") or {}
        table = data.setdefault("topicConfigTable", {})
        for t in new:
            n = 1 + max((q for tt, q in self.queues if tt == t), default=3)
            table.setdefault(t, {"order": False, "perm": 6, "readQueueNums": max(4, n), "topicFilterType": "SINGLE_TAG",
                                 "topicName": t, "topicSysFlag": 0, "writeQueueNums": max(4, n)})
        dv = data.setdefault("dataVersion", {"counter": 0, "timestamp": 0})
        dv["counter"] = int(dv.get("counter", 0)) + 1
        dv["timestamp"] = int(time.time() * 1000)
        store_config_json(self.root / "config", "topics.json", data)

    def _sync_recovery(self) -> None:
        """Recovery truncates CQ units and zeroes torn tails through the maps: msync them before
        new writes reuse those offsets, or a power cut brings stale units back beside new records."""
        for cq in self.queues.values():
            for f in cq.queue.files[-2:]:
                f.sync()
        for f in self.commitlog.files[-3:]:
            f.sync()
        for f in self.index.files[-2:]:
            f.flush()

    def _index_file_full(self, end_timestamp: int) -> None:
        """The checkpoint then vouches for the full file: the records it indexes must be on
        disk first (the roll happens inside a put, before that put's msync)."""
        last = self.commitlog.queue.last
        if last is not None:
            last.flush()
        self.checkpoint.indexMsgTimestamp = end_timestamp
        self.checkpoint.store(self.root / "checkpoint")

    def queue_for_write(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The CQ for a dispatched record, created on first use. A topic that is not a safe
        directory name (from a damaged or hostile commitlog) gets no CQ."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            if not topic or "/" in topic or "\\" in topic or topic in (".", "..") or "\0" in topic or queue_id < 0:
                self.warnings.append(f"record for topic {topic!r} queue {queue_id} not dispatched: unsafe name")
                return None
            d = self.root / "consumequeue" / topic / str(queue_id)
            cq = ConsumeQueue(topic, queue_id, d, self.cfg.mappedFileSizeConsumeQueue, writable=not self.read_only)
            self.queues[(topic, queue_id)] = cq
        return cq

    # ---- writing -------------------------------------------------------------------------
    def _writer(self):
        if self.writer is None:
            raise ReadOnlyStoreError("store is open read-only; open it read-write to write", path=str(self.root))
        return self.writer

    put_message = _put_message   # one message: _put_message_py says what (compiled front or it, chosen above)
    _put_message_py = _put_message_py

    def put_messages(self, topic: str, bodies: list[bytes], queue_id: int | None = None, tags: str | None = None,
                     keys=None, properties: dict | None = None, user_properties: dict | None = None):
        """A batch: consecutive records in one queue with one store time, never spanning files.
        (user_properties: as a producer's putUserProperty, reserved names refused.)"""
        w = self._writer()
        if not bodies:
            raise MessageRejectedError("a batch needs at least one message")
        if user_properties:
            from engine.store.writer import validate_message
            validate_message(self.cfg, topic, user_properties=user_properties)   # putUserProperty's refusals
            properties = {**(properties or {}), **user_properties}
        if _APPEND is not None and properties is None:
            out = (w._appender or _APPEND.appender(w)).put(
                topic, bodies if type(bodies) is list else list(bodies), queue_id, tags, keys)
            if out is not None:
                return out
        first = w.draft(topic, bodies[0], queue_id, tags, keys, properties)
        drafts = [first] + [w.draft(topic, b, first.queueId, tags, keys, properties) for b in bodies[1:]]
        return w.put(drafts)

    def flush(self) -> None:
        self._writer().flush()

    def close(self) -> None:
        try:
            if getattr(self, "writer", None) is not None:
                self.writer.stop()
                self._store_new_topics()
                if self.writer.broken is None:  # a failed dispatch leaves it: the next open re-dispatches
                    (self.root / "abort").unlink(missing_ok=True)  # clean shutdown
        finally:  # a failed final flush (full disk) still unmaps and unlocks; `abort` stays
            self.writer = None
            for cq in self.queues.values():
                cq.close()
            for bcq in self.batch_queues.values():
                bcq.close()
            if self.index:
                self.index.close()
            if self.commitlog:
                self.commitlog.close()
            if self.timer:
                self.timer.close()
            if self.lock:
                self.lock.release()
                self.lock = None
            if self.rocksdb is not None:
                self.rocksdb.close()
                self.rocksdb = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def refresh(self) -> bool:
        """Follow a store another process (a broker, a writer) is appending to: pick up new
        files, records and units. Read-only opens only; returns whether anything changed."""
        if not self.read_only:
            return False
        if self.rocksdb is None and self._sizes_found_late():
            return True
        cl = self.commitlog
        before = (cl.max_offset, {k: cq.max_offset for k, cq in self.queues.items()}, len(self.index.files),
                  {k: b.max_offset for k, b in self.batch_queues.items()})
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
        if self.rocksdb is not None:
            self._load_rocksdb(again=True)
        else:
            self._load_queues(False, skip=set(self.queues))
        for cq in (self.queues.values() if self.rocksdb is None else ()):
            cq.queue.load_new()
            for g in cq.queue.files[-3:]:
                g.wrote_position = g.file_size
            cq.recover(exact=False)
            if cq.max_physic_offset >= cl.max_offset:
                cq.truncate_dirty(cl.max_offset)
            cq.correct_min_offset(cl.min_offset)
        self.index.load_new()
        for idx in self.index.files[-2:]:
            idx.reload_header()
        _bcq.refresh_batch_queues(self)
        after = (cl.max_offset, {k: cq.max_offset for k, cq in self.queues.items()}, len(self.index.files),
                 {k: b.max_offset for k, b in self.batch_queues.items()})
        return after != before

    def _sizes_found_late(self) -> bool:
        """Opened before the writer had created its files, the sizes not given were only
        defaults (1 GiB commitlog files...), so none of its files could be mapped. Once files
        exist, detect the sizes and load the store again with them."""
        known = self.cfg.explicit | self.cfg.detected
        if {"mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue"} <= known:
            return False
        cfg = detect_config(self.root, self.cfg, self.read_only)
        if not cfg.detected - self.cfg.detected:
            return False
        cfg.detected |= self.cfg.detected
        self.close()
        self.cfg, self.queues, self.warnings = cfg, {}, []
        self._load()
        return True

    @property
    def refused_files(self) -> list[str]:
        """Files a tolerant open passed over (wrong size or name), each with why."""
        out = list(self.commitlog.queue.refused) if self.commitlog else []
        for cq in self.queues.values():
            out.extend(cq.queue.refused)
        return out

    # ---- overview --------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_offset(self) -> int:
        return self.commitlog.max_offset

    def find_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The 20-byte-unit ConsumeQueue (an LMQ is one too); BatchCQ queues: find_batch_queue."""
        return self.queues.get((topic, queue_id))

    def topics(self) -> list[str]:
        names = {t for t, _ in self.queues}
        names.update(t for t, _ in self.batch_queues)
        names.update(self.topic_config().keys())
        return sorted(names)

    def queue_list(self) -> list[dict]:
        """Every queue: cqType "SimpleCQ" (lmq: an LMQ name) or "BatchCQ" (offsets count inner messages)."""
        rows = [{"topic": t, "queueId": q, "minOffset": cq.min_offset, "maxOffset": cq.max_offset,
                 "cqType": "SimpleCQ", "lmq": cq.lmq} for (t, q), cq in self.queues.items()]
        rows += [{"topic": t, "queueId": q, "minOffset": b.min_offset, "maxOffset": b.max_offset,
                  "cqType": "BatchCQ", "lmq": False, "units": b.unit_count} for (t, q), b in self.batch_queues.items()]
        return sorted(rows, key=lambda r: (r["topic"], r["queueId"], r["cqType"]))

    def broker_holding_lock(self) -> int | None:
        """PID of a process (a running broker) holding the lock, if any."""
        return holder_pid(self.root / "lock") if (self.root / "lock").exists() else None

    def config_json(self, name: str) -> dict | None:
        return load_config_json(self.root / "config", name)

    def topic_config(self) -> dict:
        data = self.config_json("topics.json") or {}
        table = data.get("topicConfigTable") or {}
        return table if isinstance(table, dict) else {}

    def consumer_offsets(self) -> dict[tuple[str, str, int], int]:
        return consumer_offsets(self.config_json("consumerOffset.json"))

    def consumer_lag(self) -> list[dict]:
        rows = []
        for (topic, group, qid), off in sorted(self.consumer_offsets().items()):
            cq = self.find_queue(topic, qid)
            mx = cq.max_offset if cq else 0
            rows.append({"group": group, "topic": topic, "queueId": qid, "consumerOffset": off,
                         "maxOffset": mx, "lag": max(0, mx - off)})
        return rows

    def info(self) -> dict:
        cl = self.commitlog
        warnings = list(self.warnings)
        try:
            lag = self.consumer_lag()
        except StoreError as e:
            lag = []
            warnings.append(str(e))
        try:
            topics = sorted(self.topic_config())
        except StoreError as e:
            topics = []
            warnings.append(str(e))
        return {
            "root": str(self.root),
            "readOnly": self.read_only,
            "config": self.cfg.to_dict(),
            # where each size came from: "set" (caller or broker.conf), "files" (detected), else default
            "configSources": {k: "set" if k in self.cfg.explicit else "files" if k in self.cfg.detected else "default"
                              for k in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum",
                                        "maxIndexNum")},
            "abort": self.abort_present,
            "checkpoint": self.checkpoint.to_json(),
            "commitlog": {
                "minOffset": cl.min_offset, "maxOffset": cl.max_offset,
                "files": [{"name": f.path.name, "size": f.file_size, "wrotePosition": f.wrote_position}
                          for f in cl.files],
            },
            "queues": self.queue_list(),
            "consumeQueueStore": self.rocksdb.info() if self.rocksdb is not None else {"storeType": "default"},
            "indexFiles": [dict(name=f.name, **f.header.to_json()) for f in self.index.files],
            "configFiles": [n for n in CONFIG_FILES if (self.root / "config" / n).exists()],
            "topicsJson": topics,
            "consumerLag": lag,
            "recovery": {"abnormal": self.recovery.abnormal, "endOffset": self.recovery.commitlog.end_offset,
                         "stopReason": self.recovery.commitlog.stop_reason,
                         "truncatedQueues": self.recovery.truncated_queues},
            "generation": self.generation().to_json(),
            "warnings": warnings,
            "timerStore": self.timer.summary() if self.timer else None,
            "dledger": cl.info() if self.dledger else None,
        }

    def dledger_entry(self, offset: int) -> dict | None:
        """The DLedger entry around the message at `offset` (index, term, pos, ...; None in a
        classic store or where no entry holds it)."""
        h = self.commitlog.entry_at(offset) if self.dledger else None
        return h.to_json() if h else None

    # ---- reading by queue offset -------------------------------------------------------
    def _get_message_py(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                    broker: bool = False) -> GetMessageResult:
        """getMessage. broker=True reproduces the broker exactly (a page stops at the end of
        a CQ file; 32 messages / 256 KiB per page); the default reads `max_count` messages
        across CQ files and reports units it had to skip. (The reference: get_message.)"""
        cq = self.find_queue(topic, queue_id)
        if cq is None:
            bcq = self.find_batch_queue(topic, queue_id)
            if bcq is not None:
                return self._get_batch_message(bcq, offset, max_count, broker)
            return GetMessageResult("NO_MESSAGE_IN_QUEUE", 0, 0, 0)
        mn, mx = cq.min_offset, cq.max_offset
        if mx == 0:
            return GetMessageResult("NO_MESSAGE_IN_QUEUE", 0, mn, mx)
        if offset < mn:
            return GetMessageResult("OFFSET_TOO_SMALL", mn, mn, mx)
        if offset == mx:
            return GetMessageResult("OFFSET_OVERFLOW_ONE", offset, mn, mx)
        if offset > mx:
            return GetMessageResult("OFFSET_OVERFLOW_BADLY", mx, mn, mx)
        if broker:
            limit_count = self.cfg.maxTransferCountOnMessageInMemory
            limit_bytes = self.cfg.maxTransferBytesOnMessageInMemory
        else:
            limit_count, limit_bytes = (max_count if max_count > 1 else 1), 0
        status, nxt, page, total, skipped = _page.read_page(self.commitlog, cq, offset, mx, max_count, broker,
                                                            limit_count, limit_bytes, kernel=False)
        if status is None:
            return GetMessageResult("OFFSET_FOUND_NULL", offset, mn, mx)
        r = GetMessageResult(status, nxt, mn, mx, page, total, skipped)
        if cq.lmq:  # the stored queueOffset is the real topic's: the LMQ positions are the units'
            r.messageQueueOffset = _lmq.unit_offsets_of(cq, offset, nxt, [m.commitLogOffset for m in page])
        return r

    def _get_batch_message(self, bcq, offset: int, max_count: int, broker: bool) -> GetMessageResult:
        return _batch_page.get_message_result(self, bcq, offset, max_count, broker, GetMessageResult)

    def get_message(self, topic: str, queue_id: int, offset: int, max_count: int = 32,
                    broker: bool = False) -> GetMessageResult:
        """getMessage (_get_message_py says what it answers): the compiled page loop builds the
        whole answer in one call, and hands anything unusual to _get_message_py."""
        k = _page.KERNEL
        if k is not None and self.pages_compiled:
            return k.get_message(self, topic, queue_id, offset, max_count, broker, GetMessageResult, _PAGE, _CONFIRM)
        return self._get_message_py(topic, queue_id, offset, max_count, broker)

    # ---- whole log ---------------------------------------------------------------------
    def iter_messages(self, start: int | None = None, end: int | None = None):
        return self.commitlog.iter_messages(start, end)

    def walk(self, start: int | None = None, end: int | None = None):
        return self.commitlog.walk(start, end)
