"""MessageStore: the one object the CLI and the GUI use (DefaultMessageStore's read side,
plus the write side when opened read-write).

Opening read-only maps every file with ACCESS_READ, takes no lock and writes nothing; it
still plans recovery (engine.store.recovery: where valid data ends, which CQ units are dirty)
and applies the plan in memory, so that it reads exactly the prefix RocketMQ would keep."""
from __future__ import annotations

from operator import attrgetter
from pathlib import Path

from engine.accel import load as _load_accel
from engine.config import StoreConfig
from engine.errors import MessageRejectedError, ReadOnlyStoreError, StoreError
from engine.format.config_json import CONFIG_FILES, consumer_offsets, load_config_json
from engine.store import opener as _opener
from engine.store import page_reader as _page_reader
from engine.store import queries as _queries
from engine.store import queue_store as _queue_store
from engine.store.commit_log import CommitLog
from engine.store.consume_queue import ConsumeQueue
from engine.store.index_service import IndexService
from engine.store.page import MessagePage as _PAGE, confirm as _CONFIRM
from engine.store.page_reader import GetMessageResult, PageReader  # noqa: F401 (GetMessageResult: the facade's)
from engine.store.queries import QueryResult, QueryService  # noqa: F401 (QueryResult: engine's facade)
from engine.store.queue_kinds import QueueKinds
from engine.store.recovery import RecoveryPlan, RecoveryReport
from engine.store.store_lock import StoreLock, Untouched, holder_pid
from engine.store.timer_store import TimerStore
from engine.tasks import CancelToken, Task, run

_APPEND = _load_accel("_append")  # the compiled put loop for plain messages (None: Python's own)


def _put_message_py(self, topic: str, body: bytes = b"", queue_id: int | None = None, tags: str | None = None,
                    keys=None, properties: dict | None = None, flag: int = 0, **kw):
    """Append one message (RocketMQ encoding, UNIQ_KEY generated unless given) and dispatch it.
    The reference: the writer's draft and put (the compiled front hands it what it does not take)."""
    w = self.writer or self._writer()
    return w.put([w.draft(topic, body, queue_id, tags, keys, properties, flag, **kw)])[0]


# MessageStore.put_message: the compiled front (a plain message to the Appender in one call) or it
_put_message = _APPEND.put_message if _APPEND is not None else _put_message_py


class _Via(property):
    """store.<name> is the method `name` of the store's collaborator `part`, handed out as the
    store's own. The read is operator.attrgetter's ("part.name"): no Python frame between a
    caller and the collaborator's method."""

    def __init__(self, part: str, name: str | None = None):
        self.part = part
        if name is not None:
            self.__set_name__(None, name)

    def __set_name__(self, owner, name: str) -> None:
        if self.fget is None:
            super().__init__(attrgetter(f"{self.part}.{name}"))


class MessageStore:
    """Open with MessageStore.open(root); close() (or use as a context manager) when done.

    A facade over its collaborators: the log and the queue store (chosen at open), the index,
    engine.store.opener (opening, recovery, refresh), the writer, PageReader (getMessage's
    reference), QueryService (by key, id and time) and QueueKinds (LMQ, BatchCQ)."""
    # what the compiled page loop and key query read of a store on every call are slots (a
    # member read from C, where an instance-dict attribute costs a dict lookup more)
    __slots__ = ("queues", "cfg", "commitlog", "index", "pages_compiled", "__dict__", "__weakref__")
    tier_store = None                            # (engine.store.view: no tier behind it)
    local_store = property(lambda self: self)    # its own files are the local ones

    # QueryService's and QueueKinds' answers, as the store's own; query_message is the module's
    # function over the store (compiled or the reference, engine.store.queries says which)
    query_message = _queries.query_message
    query_messages, look_message_by_offset, lookup_id, query_uniq = _Via("queries"), _Via("queries"), _Via("queries"), _Via("queries")
    store_time_at, get_offset_in_queue_by_time, generation, time_rule = _Via("queries"), _Via("queries"), _Via("queries"), _Via("queries")
    offset_by_time, earliest_message_time, _query_exact = _Via("queries"), _Via("queries"), _Via("queries")
    find_batch_queue, queue_bounds, lmq_dispatch, lmq_queue_offset = _Via("kinds"), _Via("kinds"), _Via("kinds"), _Via("kinds")
    batch_units, inner_messages, put_inner_batch, find_inner = _Via("kinds"), _Via("kinds"), _Via("kinds"), _Via("kinds")
    _get_message_py = _Via("pages", "get_message_py")   # (the compiled page loop hands it the unusual)

    def __init__(self, root: Path, cfg: StoreConfig, read_only: bool):
        self.root = root
        self.cfg = cfg
        self.read_only = read_only
        self.served_view = True  # False: a DLedger or crashed store as its files are (after_recovery, crash_view)
        self.lock: StoreLock | None = None
        self.untouched: Untouched | None = None  # lock and abort as found, until the open's first write
        self.commitlog: CommitLog | None = None
        self.index: IndexService | None = None
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.batch_queues: dict = {}  # (topic, queueId) -> BatchConsumeQueue (5.x BatchCQ topics)
        self.batch_topics: set[str] = set()  # topics dispatched to BatchCQ queues
        self.pages_compiled = True  # the compiled page loop reads these queues (not RocksDB's)
        self.warnings: list[str] = []
        self.recovery_plan: RecoveryPlan | None = None
        self.recovery: RecoveryReport | None = None
        self.log_type = CommitLog                              # the log's kind and the queue store's,
        self.queue_store_type = _queue_store.FileQueueStore  # chosen at open (engine.store.opener)
        self.queue_store = None
        self.timer: TimerStore | None = None
        self.writer = None
        self.queries, self.kinds, self.pages = QueryService(self), QueueKinds(self), PageReader(self)

    # ---- opening ---------------------------------------------------------------------
    @classmethod
    def open(cls, root, config: StoreConfig | None = None, read_only: bool = True,
             config_file: str | None = None, tolerant: bool = False, served_view: bool = True) -> "MessageStore":
        """tolerant (read-only, for check): files that do not fit the sizes are passed over and
        listed in `refused_files` instead of refusing the store; mixed sizes take the majority.
        served_view=False: a DLedger or crashed store as its files are, without what a
        restarted broker would add in memory (engine.store.dledger_reput, crash_view), as the
        scans and the probes before a write read it."""
        return run(cls.open_task(root, config, read_only, config_file, tolerant, served_view=served_view))

    @classmethod
    def open_task(cls, root, config: StoreConfig | None = None, read_only: bool = True,
                  config_file: str | None = None, tolerant: bool = False,
                  cancel: CancelToken | None = None, served_view: bool = True) -> Task["MessageStore"]:
        """`open` as a task: Progress in the phases "plan", "consume queues", "index",
        "commitlog"; returns the store. A cancelled open closes what it opened (`abort` stays:
        the next open recovers again)."""
        return _opener.open_task(cls, root, config, read_only, config_file, tolerant, cancel, served_view)

    @classmethod
    def create(cls, root, config: StoreConfig | None = None) -> "MessageStore":
        """A new store (the folder is created; an existing store is simply opened) read-write."""
        root = Path(root)
        cfg = config or StoreConfig()
        (root / "commitlog").mkdir(parents=True, exist_ok=True)
        return cls.open(root, cfg, read_only=False)

    def queue_for_write(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The CQ for a dispatched record, created on first use. A topic that is not a safe
        directory name (from a damaged or hostile commitlog) gets no CQ."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            if not topic or "/" in topic or "\\" in topic or topic in (".", "..") or "\0" in topic or queue_id < 0:
                self.warnings.append(f"record for topic {topic!r} queue {queue_id} not dispatched: unsafe name")
                return None
            make = getattr(self.queue_store, "make_queue", None)   # (RocksDB's: the crash view's, in memory)
            cq = make(topic, queue_id) if make is not None else ConsumeQueue(
                topic, queue_id, self.root / "consumequeue" / topic / str(queue_id), self.cfg.mappedFileSizeConsumeQueue,
                writable=not self.read_only)
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
                _opener.store_new_topics(self)
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
            if self.queue_store is not None:
                self.queue_store.close()
                self.queue_store = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def refresh(self) -> bool:
        """Follow a store another process (a broker, a writer) is appending to: pick up new
        files, records and units. Read-only opens only; returns whether anything changed."""
        return _opener.refresh(self)

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

    @property
    def cq_file_size(self) -> int:
        """The ConsumeQueue files' size (0: the queues are kept elsewhere, RocksDB)."""
        return self.queue_store_type.file_size(self.cfg)

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
            "consumeQueueStore": self.queue_store.info(),
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
            "dledger": cl.info(),
        }

    def rebuild_refusal(self) -> tuple[str, Path] | None:
        """(why, where) when `rebuild` may not replace this store's queues and index; None: it may."""
        return self.commitlog.rebuild_refusal(self.root) or self.queue_store.rebuild_refusal()

    def dledger_entry(self, offset: int) -> dict | None:
        """The DLedger entry around the message at `offset` (index, term, pos, ...; None in a
        classic store or where no entry holds it)."""
        h = self.commitlog.entry_at(offset)
        return h.to_json() if h else None

    # ---- reading by queue offset -------------------------------------------------------
    # getMessage (PageReader.get_message_py says what it answers): the compiled page loop builds
    # the whole answer in one call (no Python frame around it), and hands anything unusual to
    # _get_message_py; it makes its pages of `_page_kit`'s class, confirming units with its hook
    get_message = _page_reader.get_message
    _page_kit = (_PAGE, _CONFIRM)

    # ---- whole log ---------------------------------------------------------------------
    def iter_messages(self, start: int | None = None, end: int | None = None):
        return self.commitlog.iter_messages(start, end)

    def walk(self, start: int | None = None, end: int | None = None):
        return self.commitlog.walk(start, end)
