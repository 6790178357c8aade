"""The 5.x timer store (TimerMessageStore's files), read-only: timerlog, timerwheel,
config/timercheck and config/timermetrics, and what they say about each timer message.

A timer message is the set of its records in `rmq_sys_wheel_timer` (the first put and one per
roll), joined by UNIQ_KEY. From the files alone (STORE_FORMAT_5X 1.5):

* delivered: a record with its UNIQ_KEY exists outside the timer topic (TimerMessageStore puts
  the delivered copy into REAL_TOPIC / REAL_QID, after its wheel records);
* pending otherwise; `stage` says why: `inWheel` (the newest timerlog unit pointing at its newest
  wheel record is due after timercheck's lastReadTimeMs), `notEnqueued` (no unit points at that
  record yet) or `dequeued` (the read clock has passed it but no delivered copy is in the store).

Nothing is written: RocketMQ's store API has no write path into these files but the broker's
own timer threads. Sizes and the precision come from the files (settings win when given)."""
from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import CorruptDataError, StoreError
from engine.format.config_json import load_config_json
from engine.format.cq_unit import FILLER_SIZE
from engine.format.timer_layout import (DEFAULT_TIMER_PRECISION_MS, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC,
                                        PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_DEQUEUE_MS,
                                        PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_OUT_MS, PROPERTY_TIMER_ROLL_TIMES,
                                        TIMER_TOPIC, TIMERCHECK, TIMERCHECK_FIELDS, slot_index, unit_kind)
from engine.store.timer_log import TimerLog, open_timerlog
from engine.store.timer_wheel import TimerWheel, detect_precision
from engine.tasks import CancelToken, Progress, Task, run

PENDING, DELIVERED = "pending", "delivered"
IN_WHEEL, NOT_ENQUEUED, DEQUEUED = "inWheel", "notEnqueued", "dequeued"
STEP = 512   # records decoded between two progress reports


@dataclass
class TimerCheckpoint:
    """config/timercheck (TimerCheckpoint): the dequeue clock fully processed, the timerlog flush
    position, the timer topic's next queue offset and the data version."""
    lastReadTimeMs: int = 0
    lastTimerLogFlushPos: int = 0
    lastTimerQueueOffset: int = 0
    masterTimerQueueOffset: int = 0
    dataVersionStateVersion: int = 0
    dataVersionTimestamp: int = 0
    dataVersionCounter: int = 0
    file_size: int = 0

    @classmethod
    def read(cls, path: Path) -> "TimerCheckpoint | None":
        """None when absent; a FIFO or device is refused (never blocked on), a short file is damage."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StoreError(f"cannot read timercheck: {e.strerror}", path=str(path)) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise CorruptDataError("timercheck is not a regular file", path=str(path))
            data = os.pread(fd, TIMERCHECK.size, 0)
        finally:
            os.close(fd)
        if len(data) < TIMERCHECK.size:
            raise CorruptDataError(f"timercheck holds {len(data)} bytes, fewer than its {TIMERCHECK.size}",
                                   path=str(path))
        return cls(*TIMERCHECK.unpack(data), file_size=st.st_size)

    def to_json(self) -> dict:
        d = {n: getattr(self, n) for n in TIMERCHECK_FIELDS[:4]}
        d["dataVersion"] = {"stateVersion": self.dataVersionStateVersion, "timestamp": self.dataVersionTimestamp,
                            "counter": self.dataVersionCounter}
        d["fileSize"] = self.file_size
        return d


@dataclass
class TimerMessage:
    """One timer message: its wheel-topic records, timerlog units and delivered copies."""
    uniqKey: str | None
    realTopic: str | None
    realQueueId: int | None
    fireTime: int | None                 # TIMER_OUT_MS (ms)
    rollTimes: int
    wheel_records: list[dict]            # oldest first
    delivered: list[dict] = field(default_factory=list)
    units: np.ndarray | None = None      # TIMERLOG_UNIT_NATIVE rows pointing at its records, by position
    status: str = PENDING
    stage: str = NOT_ENQUEUED
    wheelSlot: int | None = None         # slot of the newest unit
    slotTimeMs: int | None = None        # that unit's slot time (currWriteTimeMs + delayTime)
    deleteKey: str | None = None         # TIMER_DEL_UNIQKEY: a cancel request, not a message

    @property
    def commit_log_offsets(self) -> list[int]:
        return [r["commitLogOffset"] for r in self.wheel_records]

    @property
    def delivered_offset(self) -> int | None:
        """The delivered copy: the first record after its newest wheel record (else the first)."""
        if not self.delivered:
            return None
        newest = self.wheel_records[-1]["commitLogOffset"]
        after = [d["commitLogOffset"] for d in self.delivered if d["commitLogOffset"] > newest]
        return after[0] if after else self.delivered[0]["commitLogOffset"]

    def to_json(self, precision_ms: int, slots: int) -> dict:
        units = [] if self.units is None else [unit_json(u, precision_ms, slots) for u in self.units]
        return {"uniqKey": self.uniqKey, "realTopic": self.realTopic, "realQueueId": self.realQueueId,
                "fireTime": self.fireTime, "status": self.status, "stage": self.stage, "rollTimes": self.rollTimes,
                "wheelCommitLogOffsets": self.commit_log_offsets, "wheelRecords": self.wheel_records,
                "deliveredCommitLogOffset": self.delivered_offset, "deliveredRecords": self.delivered,
                "timerlogUnits": units, "timerlogPositions": [u["timerlogPos"] for u in units],
                "wheelSlot": self.wheelSlot, "slotTimeMs": self.slotTimeMs,
                "deleteKey": self.deleteKey}


def unit_json(u, precision_ms: int, slots: int) -> dict:
    delayed = int(u["currWriteTimeMs"]) + int(u["delayTime"])
    return {"timerlogPos": int(u["pos"]), "size": int(u["size"]), "prevPos": int(u["prevPos"]),
            "magic": int(u["magic"]), "kind": unit_kind(int(u["magic"])),
            "currWriteTimeMs": int(u["currWriteTimeMs"]), "delayTime": int(u["delayTime"]),
            "delayedTimeMs": delayed, "offsetPy": int(u["offsetPy"]), "commitLogOffset": int(u["offsetPy"]),
            "sizePy": int(u["sizePy"]), "realTopicHash": int(u["realTopicHash"]), "reserved": int(u["reserved"]),
            "slot": int(slot_index(delayed, precision_ms, slots)) if slots else None}


def _int(text) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


class TimerStore:
    def __init__(self, root: Path, timerlog: TimerLog | None, wheel: TimerWheel | None,
                 checkpoint: TimerCheckpoint | None, precision_ms: int | None = None):
        """`precision_ms`: timerPrecisionMs when set; None reads it from the files on first use."""
        self.root = root
        self.timerlog = timerlog
        self.wheel = wheel
        self.checkpoint = checkpoint
        self._precision: tuple[int, str] | None = (precision_ms, "set") if precision_ms else None
        if self._precision and wheel is not None:
            wheel.precision_ms = precision_ms
        self.notes: list[str] = []                 # the store's own; the files' are in `warnings`
        self._messages: tuple | None = None        # (commitlog end, list[TimerMessage])

    # ---- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(cls, root, cfg=None) -> "TimerStore | None":
        """The timer store of the store at `root`, or None when it has neither a timerlog folder nor
        a timerwheel. `cfg` (a StoreConfig): timerPrecisionMs and mappedFileSizeTimerLog are used
        when set explicitly, else read from the files. Opening maps the files and reads only the
        ends of the timerlog files; units and wheel slots are read when first asked for."""
        root = Path(root)
        log_dir, wheel_path = root / "timerlog", root / "timerwheel"
        if not log_dir.is_dir() and not wheel_path.is_file():
            return None
        explicit = getattr(cfg, "explicit", set()) if cfg is not None else set()
        size = getattr(cfg, "mappedFileSizeTimerLog", None) if "mappedFileSizeTimerLog" in explicit else None
        precision = int(cfg.timerPrecisionMs) if "timerPrecisionMs" in explicit else None
        timerlog = wheel = None
        notes: list[str] = []
        try:
            timerlog = open_timerlog(log_dir, size)
            wheel = TimerWheel(wheel_path, precision or DEFAULT_TIMER_PRECISION_MS) if wheel_path.is_file() else None
            try:
                checkpoint = TimerCheckpoint.read(root / "config" / "timercheck")
            except StoreError as e:      # the log and the wheel still say a lot without it
                checkpoint, notes = None, [f"timer store: {e}"]
        except BaseException:
            for part in (timerlog, wheel):
                if part is not None:
                    part.close()
            raise
        ts = cls(root, timerlog, wheel, checkpoint, precision)
        ts.notes = notes + ([] if timerlog else ["timer store: no timerlog folder"]) \
            + ([] if wheel else ["timer store: no timerwheel file"])
        if checkpoint is None and not (root / "config" / "timercheck").exists():
            ts.notes.append("timer store: no config/timercheck; pending and delivered cannot be told from "
                               "the read clock")
        return ts

    @property
    def warnings(self) -> list[str]:
        """What the timer files made us pass over or assume (grows as units are first read)."""
        return (self.notes + (self.timerlog.warnings if self.timerlog else [])
                + (self.wheel.warnings if self.wheel else []))

    @property
    def precision_ms(self) -> int:
        """timerPrecisionMs: as set, else as the wheel and the timerlog say (detect_precision)."""
        if self._precision is None:
            found, _ = (detect_precision(self.wheel.occupied, self.timerlog.unit_at)
                        if self.wheel is not None and self.timerlog is not None else (None, 0))
            self._precision = (found, "files") if found else (DEFAULT_TIMER_PRECISION_MS, "default")
            if found is None and self.wheel is not None and len(self.wheel.occupied):
                self.notes.append(f"timerPrecisionMs could not be read from the wheel; using "
                                     f"{DEFAULT_TIMER_PRECISION_MS} ms")
            if self.wheel is not None:
                self.wheel.precision_ms = self._precision[0]
        return self._precision[0]

    @property
    def precision_source(self) -> str:
        """"set", "files" or "default"."""
        self.precision_ms
        return self._precision[1]

    def close(self) -> None:
        if self.timerlog is not None:
            self.timerlog.close()
        if self.wheel is not None:
            self.wheel.close()

    # ---- plain reads -------------------------------------------------------------------------------
    @property
    def slots(self) -> int:
        return self.wheel.slots if self.wheel is not None else 0

    @property
    def last_read_time_ms(self) -> int:
        return self.checkpoint.lastReadTimeMs if self.checkpoint is not None else -1

    def metrics(self) -> dict | None:
        """config/timermetrics (TimerMetrics, fastjson), None when absent or empty."""
        try:
            return load_config_json(self.root / "config", "timermetrics")
        except StoreError as e:
            if str(e) not in self.notes:
                self.notes.append(str(e))
            return None

    def get_slot(self, time_ms: int):
        if self.wheel is None:
            return None
        self.precision_ms       # the wheel reads with the store's precision
        return self.wheel.get_slot(time_ms)

    def slot_of(self, time_ms: int) -> int | None:
        return int(slot_index(time_ms, self.precision_ms, self.slots)) if self.slots else None

    def wheel_slots(self, chain_limit: int = 1 << 16) -> list[dict]:
        """Every non-zero wheel slot, with what getSlot makes of it, whether the read clock has
        passed it, and its unit chain (lastPos back through prevPos)."""
        if self.wheel is None:
            return []
        out = []
        p, last_read = self.precision_ms, self.last_read_time_ms
        for row in self.wheel.occupied:
            t_ms = int(row["time"]) * p
            chain = self.timerlog.chain(int(row["lastPos"]), chain_limit) if self.timerlog else []
            out.append({"slot": int(row["index"]), "time": int(row["time"]), "timeMs": t_ms,
                        "firstPos": int(row["firstPos"]), "lastPos": int(row["lastPos"]), "num": int(row["num"]),
                        "magic": int(row["magic"]),
                        "current": self.wheel.slot_index(t_ms) == int(row["index"]),
                        "processed": t_ms <= last_read if self.checkpoint is not None else None,
                        "chain": chain})
        return out

    def summary(self) -> dict:
        log, wheel = self.timerlog, self.wheel
        precision = self.precision_ms
        return {"precisionMs": precision, "precisionSource": self.precision_source,
                "timerlogFileSize": log.file_size if log else None,
                "timerlogFiles": [f.to_json() for f in log.files] if log else [],
                "timerlogUnits": log.unit_count if log else 0,
                "timerlogMinPos": log.min_pos if log else None, "timerlogMaxPos": log.max_pos if log else None,
                "wheelFileSize": wheel.file_size if wheel else None, "wheelSlots": self.slots,
                "wheelOccupiedSlots": int(len(wheel.occupied)) if wheel else 0,
                "timercheck": self.checkpoint.to_json() if self.checkpoint else None,
                "timerMetrics": self.metrics(),
                "warnings": list(self.warnings)}

    # ---- timer messages ---------------------------------------------------------------------------
    def messages(self, store) -> list[TimerMessage]:
        return run(self.messages_task(store))

    def messages_task(self, store, cancel: CancelToken | None = None) -> Task[list[TimerMessage]]:
        """Every timer message of `store` (a MessageStore), sorted by fire time: a task yielding
        Progress in the phases "wheel records" and "delivered copies"."""
        end = store.commitlog.max_offset
        if self._messages is not None and self._messages[0] == end:
            return self._messages[1]
        msgs = yield from _build(self, store, cancel or CancelToken())
        self._messages = (end, msgs)
        return msgs


def _wheel_offsets(ts: TimerStore, store) -> np.ndarray:
    """Commitlog offsets of the timer topic's records: its CQ units, and what timerlog units point at."""
    parts = []
    for (topic, _), cq in sorted(store.queues.items()):
        if topic == TIMER_TOPIC:
            u = cq.units(cq.min_offset, cq.max_offset)
            parts.append(u["commitLogOffset"][u["size"] != FILLER_SIZE].astype(np.int64))
    if ts.timerlog is not None and len(ts.timerlog.units):
        parts.append(ts.timerlog.units["offsetPy"].astype(np.int64))
    if not parts:
        return np.empty(0, np.int64)
    offs = np.unique(np.concatenate(parts))
    return offs[(offs >= store.commitlog.min_offset) & (offs < store.commitlog.max_offset)]


def _build(ts: TimerStore, store, cancel: CancelToken):
    offsets = _wheel_offsets(ts, store)
    groups: dict[object, TimerMessage] = {}
    total = len(offsets)
    yield Progress(0, total, "wheel records", "records")
    for i, off in enumerate(offsets.tolist()):
        if i % STEP == 0 and i:
            cancel.raise_if_cancelled()
            yield Progress(i, total, "wheel records", "records")
        m = store.commitlog.get_message(off)
        if m is None or m.topic != TIMER_TOPIC:
            continue
        props = m.properties
        rec = {"commitLogOffset": off, "size": m.storeSize, "queueId": m.queueId, "queueOffset": m.queueOffset,
               "storeTimestamp": m.storeTimestamp, "rollTimes": _int(props.get(PROPERTY_TIMER_ROLL_TIMES)) or 0,
               "timerOutMs": _int(props.get(PROPERTY_TIMER_OUT_MS))}
        key = m.uniqKey if m.uniqKey else ("offset", off)
        t = groups.get(key)
        if t is None:
            t = groups[key] = TimerMessage(m.uniqKey, None, None, None, 0, [])
        t.wheel_records.append(rec)
        # the newest record decides (offsets ascend)
        t.realTopic = props.get(PROPERTY_REAL_TOPIC, t.realTopic)
        t.realQueueId = _int(props.get(PROPERTY_REAL_QUEUE_ID, t.realQueueId))
        t.fireTime = rec["timerOutMs"] if rec["timerOutMs"] is not None else t.fireTime
        t.rollTimes = max(t.rollTimes, rec["rollTimes"])
        t.deleteKey = props.get(PROPERTY_TIMER_DEL_UNIQKEY, t.deleteKey)
    yield Progress(total, total, "wheel records", "records")
    msgs = list(groups.values())
    yield from _find_delivered(store, msgs, cancel)
    _attach_units(ts, msgs)
    last_read = ts.last_read_time_ms
    for t in msgs:
        _decide(t, last_read, ts)
    big = 1 << 62
    msgs.sort(key=lambda t: (t.fireTime if t.fireTime is not None else big, t.wheel_records[0]["commitLogOffset"]))
    return msgs


def _find_delivered(store, msgs: list[TimerMessage], cancel: CancelToken):
    """Records outside the timer topic with a timer message's UNIQ_KEY, written after its first
    wheel record: read from the consume queues of its real topic (where TimerMessageStore puts
    the copy), from the first wheel record on."""
    by_topic: dict[str, dict[str, TimerMessage]] = {}
    for t in msgs:
        if t.uniqKey and t.realTopic and t.realTopic != TIMER_TOPIC:
            by_topic.setdefault(t.realTopic, {})[t.uniqKey] = t
    work = []   # (consume queue, its units to read, the messages of its topic): arrays, not lists
    for topic, wanted in by_topic.items():
        start = min(t.wheel_records[0]["commitLogOffset"] for t in wanted.values())
        for (tp, _), cq in sorted(store.queues.items()):
            if tp == topic:
                u = cq.units(cq.min_offset, cq.max_offset)
                offs = u["commitLogOffset"][(u["commitLogOffset"] > start) & (u["size"] != FILLER_SIZE)]
                if len(offs):
                    work.append((offs.astype(np.int64), wanted))
    total = sum(len(offs) for offs, _ in work)
    done = 0
    yield Progress(0, total, "delivered copies", "records")
    for offs, wanted in work:
        for off in offs.tolist():
            done += 1
            if done % STEP == 0:
                cancel.raise_if_cancelled()
                yield Progress(done, total, "delivered copies", "records")
            m = store.commitlog.get_message(off)
            if m is None or m.topic == TIMER_TOPIC:
                continue
            t = wanted.get(m.uniqKey)
            if t is None or off <= t.wheel_records[0]["commitLogOffset"]:
                continue
            p = m.properties
            t.delivered.append({"commitLogOffset": off, "topic": m.topic, "queueId": m.queueId,
                                "queueOffset": m.queueOffset, "storeTimestamp": m.storeTimestamp,
                                "timerEnqueueMs": _int(p.get(PROPERTY_TIMER_ENQUEUE_MS)),
                                "timerDequeueMs": _int(p.get(PROPERTY_TIMER_DEQUEUE_MS))})
    for t in msgs:
        t.delivered.sort(key=lambda d: d["commitLogOffset"])
    yield Progress(total, total, "delivered copies", "records")


def _attach_units(ts: TimerStore, msgs: list[TimerMessage]) -> None:
    """Each message gets the timerlog units whose offsetPy is one of its wheel records (vectorised)."""
    if ts.timerlog is None or not len(ts.timerlog.units) or not msgs:
        return
    offs = np.array([r["commitLogOffset"] for t in msgs for r in t.wheel_records], dtype=np.int64)
    owner = np.repeat(np.arange(len(msgs)), [len(t.wheel_records) for t in msgs])
    order = np.argsort(offs, kind="stable")
    offs, owner = offs[order], owner[order]
    units = ts.timerlog.units
    j = np.minimum(np.searchsorted(offs, units["offsetPy"]), len(offs) - 1)
    hit = offs[j] == units["offsetPy"]
    rows = np.flatnonzero(hit)
    who = owner[j[rows]]
    by = np.argsort(who, kind="stable")            # units stay in position order within a message
    rows, who = rows[by], who[by]
    bounds = np.flatnonzero(np.diff(who)) + 1
    for part_rows, part_who in zip(np.split(rows, bounds), np.split(who, bounds)):
        if len(part_rows):
            msgs[int(part_who[0])].units = units[part_rows]


def _decide(t: TimerMessage, last_read: int, ts: TimerStore) -> None:
    newest = t.wheel_records[-1]["commitLogOffset"]
    mine = t.units[t.units["offsetPy"] == newest] if t.units is not None else None
    if mine is not None and len(mine):
        u = mine[-1]
        t.slotTimeMs = int(u["currWriteTimeMs"]) + int(u["delayTime"])
        t.wheelSlot = ts.slot_of(t.slotTimeMs)
    if t.delivered:
        t.status, t.stage = DELIVERED, DELIVERED
    elif t.slotTimeMs is None:
        t.status, t.stage = PENDING, NOT_ENQUEUED
    else:
        t.status = PENDING
        t.stage = IN_WHEEL if (ts.checkpoint is None or t.slotTimeMs > last_read) else DEQUEUED


def open_timer_store(root, cfg=None) -> tuple[TimerStore | None, list[str]]:
    """TimerStore.open for the facade: a timer store that cannot be read is a warning, never a
    reason to refuse the message store."""
    try:
        ts = TimerStore.open(root, cfg)
    except (StoreError, OSError, ValueError, struct.error) as e:
        return None, [f"timer store not read: {e}"]
    return ts, (ts.warnings if ts is not None else [])
