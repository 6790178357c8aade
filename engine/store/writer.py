"""The write side of a store opened read-write: append (single writer, one lock), dispatch
to ConsumeQueue and index right after each append, flush (sync or async) and the checkpoint.

Crash policy: a record becomes visible to readers only when its TOTALSIZE is written, which
happens last; under SYNC_FLUSH a put returns only after msync of its bytes; the checkpoint
is written only after the data it vouches for is durable, so crash recovery always starts
early enough (§12.4)."""
from __future__ import annotations

import errno
import operator
import threading

from engine.format import properties as P
from engine.format.properties import user_property_problem
from engine.format.put_result import PutResult, wall_clock_ms  # noqa: F401 (the write path's answer)
from engine.errors import MessageRejectedError, StoreError, StoreFullError
from engine.format.message import (BLANK_MAGIC, BLANK_RECORD_MIN, SCHEDULE_TOPIC, TRANSACTION_COMMIT_TYPE,
                      TRANSACTION_NOT_TYPE, EncodedRecord, Message, MessageDraft, check_record, encode_record, parse_host)
from engine.store.dispatcher import dispatch
from engine.store import lmq as _lmq, put_assign as _assign
from engine.format.javahash import tags_code
from engine.format.topic import needs_v2, topic_problem
from engine.format.msgid import UniqKeyGenerator
from engine.accel import load as _load_accel, state_property


class PyWriterState:
    """WriterState's pure twin (engine/accel/_state.pyx): a StoreWriter's store and dispatch
    timestamps, its failure, its time source and its dirty flag."""
    __slots__ = ("last_store_ts", "last_dispatched_ts", "broken", "clock", "_dirty")

    def __init__(self):
        self.last_store_ts = self.last_dispatched_ts = 0
        self.broken = self.clock = None
        self._dirty = False


_STATE = _load_accel("_state")
WriterState = PyWriterState if _STATE is None else _STATE.WriterState   # C fields for the compiled put

import struct
_BLANK = struct.Struct(">ii")
_MAGIC_CRC = struct.Struct(">ii")
_I32 = struct.Struct(">i")


def validate_topic(topic: str, allow_v2: bool, producer: bool = False) -> bool:
    """engine.format.topic's rules as the write path's error; True when the topic needs a
    V2 record."""
    problem = topic_problem(topic, allow_v2, producer)
    if problem:
        raise MessageRejectedError(problem)
    return needs_v2(topic)


INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def validate_message(cfg, topic: str, body_size: int = 0, queue_id: int | None = None, flag: int = 0,
                     delay_level: int = 0, properties: dict | None = None, producer: bool = False,
                     user_properties: dict | None = None) -> None:
    """Every rule a message must pass that needs no store (the CLI checks them before it opens
    a store read-write; draft() and encode() apply them again). producer=True: also the
    client's topic rules (no broker-only or system topic), as a producer's send would.
    user_properties: Message.putUserProperty's rules (no reserved name, nothing blank)."""
    for k, v in (user_properties or {}).items():
        problem = user_property_problem(k, v)
        if problem:
            raise MessageRejectedError(problem)
    validate_topic(topic, cfg.autoMessageVersionOnTopicLen, producer)
    if queue_id is not None and not 0 <= _integer(queue_id, "queue id") <= INT32_MAX:
        raise MessageRejectedError(f"queue id {queue_id} is outside 0..{INT32_MAX}")
    if not INT32_MIN <= _integer(flag, "flag") <= INT32_MAX:
        raise MessageRejectedError(f"flag {flag} does not fit a 32-bit int ({INT32_MIN}..{INT32_MAX})")
    if not 0 <= _integer(delay_level, "delay level") <= INT32_MAX:
        raise MessageRejectedError(f"delay level {delay_level} is negative or too large")
    if body_size > cfg.maxMessageSize:
        raise MessageRejectedError(f"body is {body_size} bytes; maxMessageSize is {cfg.maxMessageSize}")
    for k, v in (properties or {}).items():
        if not isinstance(k, str) or not isinstance(v, str) or not k or "\x01" in k or "\x02" in k \
                or "\x02" in v:
            raise MessageRejectedError(f"invalid property {k!r}={v!r}")


def as_store_error(e: BaseException, what: str, root) -> StoreError:
    """A typed error for a failure below the engine: a full disk is StoreFullError, any other
    OS error a StoreError naming its file; other exceptions keep their type in the message."""
    if isinstance(e, StoreError):
        return e
    if isinstance(e, OSError):
        cls = StoreFullError if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else StoreError
        return cls(f"{what}: {e.strerror or e}", path=e.filename or str(root))
    return StoreError(f"{what}: {type(e).__name__}: {e}", path=str(root))


def _integer(v, what: str) -> int:
    if isinstance(v, bool):
        raise MessageRejectedError(f"{what} {v!r} is not an integer")
    try:
        return operator.index(v)
    except TypeError:
        raise MessageRejectedError(f"{what} {v!r} is not an integer") from None


class StoreWriter:
    """The store's single writer. The fields a compiled put reads and writes live in `state`
    (a WriterState), which the Appender takes; the properties below reach them there."""
    last_store_ts = state_property("last_store_ts", "the last record's STORETIMESTAMP (never goes back)")
    last_dispatched_ts = state_property("last_dispatched_ts", "the last dispatched record's store time")
    broken = state_property("broken", "the StoreError a failed dispatch or flush left: every put is refused")
    clock = state_property("clock", "the store's time source (ms)")
    _dirty = state_property("_dirty", "a put since the last flush (the flusher polls it; no one waits on it)")

    def __init__(self, store):
        self.store = store
        self.state = WriterState()
        self.cfg = store.cfg
        self.lock = threading.RLock()
        self.uniq = UniqKeyGenerator(ip=parse_host(f"{self.cfg.brokerIP1}:0")[0][:16])
        addr, port = parse_host(f"{self.cfg.brokerIP1}:{self.cfg.listenPort}")
        self.store_host = addr + struct.pack(">i", port)
        born = parse_host(f"{self.cfg.brokerIP1}:0")
        self.default_born_host = born[0] + struct.pack(">i", born[1])
        self.queue_offsets: dict[tuple[str, int], int] = {
            k: cq.max_offset for k, cq in store.queues.items()}
        self.queue_offsets.update((k, b.max_offset) for k, b in store.batch_queues.items())
        self.last_store_ts = 0
        self.last_dispatched_ts = store.checkpoint.logicsMsgTimestamp
        self.new_topics: set[str] = set()
        self.clock = wall_clock_ms  # store time source (the demo generator replays a day)
        self.topic_table = store.topic_config()  # read once; topics.json is rewritten at close
        self._rr: dict[str, int] = {}
        self._appender = None  # engine.accel._append.Appender, made on the first plain put
        # the property string's form: 5.x ends it with 0x02 (engine/store/generation.py)
        self.props_trailing = self.cfg.enabledAppendPropCRC or store.generation().version == "5.x"
        self._flusher: threading.Thread | None = None
        self._stop = threading.Event()
        self._flush_lock = threading.Lock()
        self._dirty = False  # a put since the last flush (the flusher polls it; no one waits on it)
        self.broken: StoreError | None = None  # set when a dispatch or flush failed: every put is refused
        self.flush_failed: StoreError | None = None  # the background flusher's failure, raised at close

    # ---- building records ----------------------------------------------------------------
    def draft(self, topic: str, body: bytes, queue_id: int | None = None, tags: str | None = None,
              keys=None, properties: dict | None = None, flag: int = 0, sys_flag: int = 0,
              born_host: str | None = None, delay_level: int = 0, uniq_key: str | None = None,
              user_properties: dict | None = None) -> MessageDraft:
        """`properties` are set as Message.putProperty sets them (system names too);
        `user_properties` as putUserProperty does: a reserved name is refused."""
        props = dict(properties or {})
        if user_properties:
            validate_message(self.cfg, topic, user_properties=user_properties)
            props.update(user_properties)
        if tags:
            props[P.TAGS] = tags
        if keys:
            props[P.KEYS] = keys if isinstance(keys, str) else P.KEY_SEPARATOR.join(keys)
        props[P.UNIQ_KEY] = uniq_key or props.get(P.UNIQ_KEY) or self.uniq.next()
        props.setdefault("CLUSTER", self.cfg.brokerClusterName)
        validate_message(self.cfg, topic, len(body), queue_id, flag, max(0, delay_level), props)
        if queue_id is None:  # a producer's default selector: round robin over the write queues
            n = self._rr.get(topic, -1) + 1
            self._rr[topic] = n
            queue_id = n % self._queue_count(topic)
        qid = queue_id
        now = self.clock()
        if born_host:
            born = parse_host(born_host)
            born_bytes = born[0] + struct.pack(">i", born[1])
        else:
            born_bytes = self.default_born_host
        d = MessageDraft(topic=topic, body=body, queueId=qid, flag=flag, properties=props, sysFlag=sys_flag,
                         bornTimestamp=now, bornHost=born_bytes, storeHost=self.store_host)
        if delay_level > 0:  # the 4.9 store rewrites delayed messages to SCHEDULE_TOPIC_XXXX itself
            levels = len(self.cfg.delay_level_millis)
            level = min(delay_level, levels)
            props[P.REAL_TOPIC], props[P.REAL_QID] = topic, str(qid)
            props[P.DELAY] = str(level)
            d.topic, d.queueId = SCHEDULE_TOPIC, level - 1
        return d

    def _queue_count(self, topic: str) -> int:
        tc = self.topic_table.get(topic) or {}
        n = tc.get("writeQueueNums") if isinstance(tc, dict) else None
        if isinstance(n, int) and n > 0:
            return n
        if topic in self.new_topics:  # created this session: the default, without a walk over every queue
            return 4
        existing = [q for t, q in self.store.queues if t == topic and self.store.queues[(t, q)].max_offset]
        return max(existing) + 1 if existing else 4

    def encode(self, d: MessageDraft) -> EncodedRecord:
        v2 = validate_topic(d.topic, self.cfg.autoMessageVersionOnTopicLen)
        if len(d.body) > self.cfg.maxMessageSize:
            raise MessageRejectedError(f"body is {len(d.body)} bytes; maxMessageSize is {self.cfg.maxMessageSize}")
        crc = self.cfg.enabledAppendPropCRC
        rec = encode_record(d, v2=v2, props_trailing=self.props_trailing, crc_tail=crc)
        if len(rec.data) + BLANK_RECORD_MIN > self.cfg.mappedFileSizeCommitLog:
            raise MessageRejectedError(f"record of {len(rec.data)} bytes does not fit a commitlog file of "
                                       f"{self.cfg.mappedFileSizeCommitLog} bytes")
        return rec

    # ---- appending -------------------------------------------------------------------------
    def put(self, drafts: list[MessageDraft]) -> list[PutResult]:
        """Append a message or a batch (one queue; the batch never spans files), dispatch it,
        flush per the flush mode. Returns only after the bytes are acknowledged. LMQ
        multi-dispatch and BatchCQ topics get their store-added properties first (put_assign)."""
        if _assign.needs_assign(self.store, drafts):
            with self.lock:
                if self.broken is None:
                    names = _assign.assign(self, drafts)
                out = self._put(drafts)
                _lmq.advance(self, names)
                return out
        return self._put(drafts)

    def _put(self, drafts: list[MessageDraft]) -> list[PutResult]:
        if self.broken is not None:
            raise type(self.broken)(f"writes refused since an earlier failure ({self.broken.message}); "
                                    "reopen the store to recover", path=str(self.store.root))
        recs = [self.encode(d) for d in drafts]
        if len({(d.topic, d.queueId) for d in drafts}) > 1:
            raise MessageRejectedError("a batch must go to one topic and queue")
        total = sum(len(r.data) for r in recs)
        if total + BLANK_RECORD_MIN > self.cfg.mappedFileSizeCommitLog:
            raise MessageRejectedError(f"batch of {total} bytes does not fit one commitlog file")
        with self.lock:
            cl = self.store.commitlog
            f = self._file_with_room(total)
            store_ts = max(self.clock(), self.last_store_ts)
            results, start = [], f.wrote_position
            pos = start
            buf = f.buf
            for d, rec in zip(drafts, recs):
                tt = d.sysFlag & 0x0C
                key = (d.topic, d.queueId)
                qoff = self.queue_offsets.get(key, 0) if tt in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE) else 0
                phys = f.file_from_offset + pos
                rec.patch(qoff, phys, store_ts)
                # the batch's first TOTALSIZE goes last: a reader sees no record until all are whole
                n = len(rec.data)
                if pos == start:
                    buf[pos + 4:pos + n] = memoryview(rec.data)[4:]
                else:
                    buf[pos:pos + n] = rec.data
                if tt in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
                    self.queue_offsets[key] = qoff + (_assign.queue_step(d) if d.sysFlag & 0x80 else 1)
                results.append((pos, rec, d, qoff, phys))
                pos += n
            buf[start:start + 4] = memoryview(recs[0].data)[:4]
            f.wrote_position = pos
            self.last_store_ts = store_ts
            out = []
            for p, rec, d, qoff, phys in results:
                msg = self._message_of(d, rec, qoff, phys, store_ts)
                if msg is None:  # scheduled or CRC-tailed records: decode what was written
                    msg = check_record(buf, p, pos, phys, cl.read_opts).message
                self.dispatch(msg)
                out.append(PutResult("PUT_OK", phys, qoff, store_ts, msg.msgId, msg.uniqKey,
                                     d.topic, d.queueId, len(rec.data)))
                if d.topic not in self.topic_table and not d.topic.startswith(SCHEDULE_TOPIC):
                    self.new_topics.add(d.topic)
            if self.cfg.sync_flush:
                f.flush()
            self._dirty = True
        return out

    @staticmethod
    def _message_of(d: MessageDraft, rec: EncodedRecord, qoff: int, phys: int, store_ts: int) -> Message | None:
        """The Message check_record would decode from the bytes just written, built from the
        draft instead (no re-decode); None where decoding is simpler (SCHEDULE_TOPIC's
        delivery-time tagsCode, the CRC tail property)."""
        if rec.crc_tail or d.topic == SCHEDULE_TOPIC:
            return None
        data = rec.data
        magic, crc = _MAGIC_CRC.unpack_from(data, 4)
        sys_flag = _I32.unpack_from(data, 36)[0]
        # what parse_properties returns for the written string: empty values are dropped
        props = {k: v for k, v in d.properties.items() if v and k != P.CRC32_PROP}
        body = d.body if type(d.body) is bytes else bytes(d.body or b"")
        return Message(d.topic, d.queueId, qoff, phys, len(data), crc, d.flag, sys_flag, d.bornTimestamp,
                       d.bornHost, store_ts, d.storeHost, d.reconsumeTimes, d.preparedTransactionOffset, body,
                       rec.props_raw.decode("utf-8"), props, magic, phys,
                       tags_code(props.get(P.TAGS)) if rec.props_raw else 0)

    def _file_with_room(self, size: int):
        q = self.store.commitlog.queue
        f = q.last
        if f is not None and f.wrote_position < f.file_size and size + BLANK_RECORD_MIN <= f.file_size - f.wrote_position:
            f.ensure_room(f.wrote_position + size + BLANK_RECORD_MIN)  # a full disk refuses here, before any write
            return f
        start = f.end_offset if f is not None else 0
        try:  # the next file first: if the disk is full, nothing (not even the BLANK) is written
            nf = q.create_next(start)
        except OSError as e:
            raise StoreFullError(f"cannot create commitlog file: {e}", path=str(q.dirs[0])) from None
        if f is not None and f.wrote_position < f.file_size:
            remaining = f.file_size - f.wrote_position
            f.ensure_room(f.wrote_position + BLANK_RECORD_MIN)
            f.write_at(f.wrote_position, _BLANK.pack(remaining, BLANK_MAGIC))
            f.wrote_position = f.file_size
            if self.cfg.sync_flush:
                f.flush()   # (asynchronous: the flusher syncs the rolled file's tail, then this one's)
        nf.wrote_position = nf.flushed_position = 0
        return nf

    # ---- dispatch ----------------------------------------------------------------------------
    def dispatch(self, msg: Message) -> None:
        """ReputMessageService's dispatchers: CQ unit (NOT_TYPE, COMMIT), then the index.
        If that fails (a full disk when a CQ or index file is created), the record is in the
        commitlog without its unit: like RocketMQ (RunningFlags), the writer then refuses every
        put, and close keeps `abort` so the next open re-dispatches (crash recovery)."""
        try:
            if dispatch(self.store, msg):
                self.last_dispatched_ts = msg.storeTimestamp
        except Exception as e:
            # a full disk is what RocketMQ's RunningFlags cover; anything else is a bug or damage
            # and surfaces as itself (the writer is stopped either way)
            self.broken = as_store_error(e, "dispatch failed", self.store.root)
            if isinstance(e, (StoreError, OSError)):
                raise self.broken from None
            raise

    # ---- flushing ----------------------------------------------------------------------------
    def flush(self, index: bool = True) -> None:
        """Commitlog, then CQs and index, then the checkpoint that vouches for them. Like
        RocketMQ's FlushRealTimeService this runs beside the appends: the writer's lock covers
        only the note of what is written (the times and each file's end), the msyncs and the
        checkpoint's fsync run after it, so a put never waits for the disk here."""
        with self._flush_lock:   # one flush at a time (the flusher, close, an explicit flush)
            with self.lock:
                logics, physic = self.last_dispatched_ts, self.last_store_ts
                self._dirty = False   # a put from here on is flushed by the next round
                commitlog = self.store.commitlog.queue.unsynced()
                queues = list(self.store.queues.values())
            for f, end in commitlog:
                f.flush(end)
            for cq in queues:
                cq.flush()
            cp = self.store.checkpoint
            self.store.index.flush(header_only=not index, checkpoint=cp)
            if physic:
                cp.physicMsgTimestamp = max(cp.physicMsgTimestamp, physic)
            if logics:
                cp.logicsMsgTimestamp = max(cp.logicsMsgTimestamp, logics)
            cp.store(self.store.root / "checkpoint")

    def start_flush_service(self) -> None:
        """Background flushing: the commitlog under ASYNC_FLUSH, and in every mode the CQs and
        the checkpoint (sync flush only covers the commitlog, like RocketMQ). Of the index only
        the header of the file being written: like RocketMQ's, an index file is synced whole
        when it is full (its checkpoint time then vouches for it) and at close; crash recovery
        deletes the file being written whatever its other bytes (§12.6), once its header on disk
        says it is newer than the checkpoint. Syncing its randomly written slots twice a second
        (~20 MB each time, every slot page faulted again after it) bought nothing."""
        if self._flusher is not None:
            return
        interval = max(0.05, self.cfg.flushIntervalCommitLog / 1000)

        def loop():
            while not self._stop.wait(interval):
                if self._dirty:
                    try:
                        self.flush(index=False)
                    except Exception as e:  # noqa: BLE001 - stops the writer: the next put and close fail
                        self.broken = self.flush_failed = as_store_error(e, "background flush failed",
                                                                         self.store.root)
                        return
        self._flusher = threading.Thread(target=loop, name="rmqstore-flush", daemon=True)
        self._flusher.start()

    def stop(self) -> None:
        """Stop the flusher and flush once more; a failure of either is raised (close keeps
        `abort`, so the next open recovers)."""
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join()
            self._flusher = None
        if self._appender is not None:
            self._appender.release()  # the maps it held between puts, so closing unmaps them
        try:
            self.flush()
        except Exception as e:  # noqa: BLE001 - typed, naming the file
            raise as_store_error(e, "final flush failed", self.store.root) from None
        if self.flush_failed is not None:
            raise self.flush_failed
