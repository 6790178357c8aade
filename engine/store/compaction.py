"""Compacted topics (RocketMQ 5.x `cleanup.policy=COMPACTION`, store/kv CompactionStore), read
only: each queue's compaction log and its sparse consume queue, and getMessage as
CompactionLog.getMessage answers it (the view DefaultMessageStore.getMessage serves for such
a topic). Nothing here writes: compaction is the broker's."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.format import compaction_layout as C
from engine.format.message import RecordStatus, check_record
from engine.format.tiered_layout import load_fastjson
from engine.store.message_store import GetMessageResult


@dataclass
class LogFile:
    base: int
    path: Path
    size: int


class CompactedQueue:
    """One queue's compactionLog files and compactionCq units (end units and unused space
    left out; `end_units` counts the end units)."""

    def __init__(self, topic: str, queue_id: int, log_dir: Path, cq_dir: Path):
        self.topic, self.queue_id, self.log_dir, self.cq_dir = topic, queue_id, log_dir, cq_dir
        self.logs = [LogFile(int(p.name), p, p.stat().st_size) for p in _numbered(log_dir)]
        self.files: list[tuple[Path, np.ndarray]] = []   # (cq file, its units) in name order
        self.end_units = 0
        for p in _numbered(cq_dir):
            data = p.read_bytes()
            arr = np.frombuffer(data[:len(data) - len(data) % C.CQ_UNIT_SIZE], dtype=C.CQ_UNIT_DTYPE)
            used = 0
            for u in arr:  # units until the first unused one (size 0 and not an end unit)
                if u["size"] <= 0 and u["commitLogOffset"] != C.END_UNIT_OFFSET:
                    break
                used += 1
            units = arr[:used]
            keep = units["commitLogOffset"] >= 0
            self.end_units += int((~keep).sum())
            self.files.append((p, units[keep & (units["size"] > 0)]))

    @property
    def units(self) -> np.ndarray:
        parts = [u for _, u in self.files]
        return np.concatenate(parts) if parts else np.empty(0, dtype=C.CQ_UNIT_DTYPE)

    @property
    def min_offset(self) -> int:
        """getMinOffsetInQueue: the first file's first unit (-1 when there is none)."""
        for _, u in self.files[:1]:
            return int(u["msgBaseOffset"][0]) if len(u) else -1
        return -1

    @property
    def max_offset(self) -> int:
        """getMaxOffsetInQueue: the last unit's msgBaseOffset + batchSize (the last file, else
        the one before it), 0 when there is none."""
        for _, u in reversed(self.files[-2:]):
            if len(u):
                return int(u["msgBaseOffset"][-1]) + int(u["batchSize"][-1])
        return 0

    def read(self, offset: int, size: int) -> bytes | None:
        for f in self.logs:
            if f.base <= offset and offset + size <= f.base + f.size:
                with open(f.path, "rb") as fh:
                    return os.pread(fh.fileno(), size, offset - f.base)
        return None

    def message(self, offset: int, size: int):
        data = self.read(offset, size)
        if data is None:
            return None
        r = check_record(data, 0, len(data), offset)
        return r.message if r.status is RecordStatus.MESSAGE and r.size == size else None

    def _units_from(self, offset: int) -> np.ndarray | None:
        """iterateFromOrNext: the units of the first cq file that has one at or after `offset`,
        from that unit on."""
        for _, u in self.files:
            if len(u) and int(u["msgBaseOffset"][-1]) >= offset:
                return u[np.searchsorted(u["msgBaseOffset"], offset, side="left"):]
        return None

    def get_message(self, offset: int, max_count: int = 32, broker: bool = True, max_transfer_count: int = 32,
                    max_transfer_bytes: int = 256 * 1024) -> GetMessageResult:
        """CompactionLog.getMessage. broker=True: one cq file per page and the in-memory transfer
        limits, as the broker; False: max_count messages across files."""
        mn, mx = self.min_offset, self.max_offset
        if mx == 0:
            return GetMessageResult("NO_MESSAGE_IN_QUEUE", 0, mn, mx)
        if offset == mx:
            return GetMessageResult("OFFSET_OVERFLOW_ONE", offset, mn, mx)
        if offset > mx:
            return GetMessageResult("OFFSET_OVERFLOW_BADLY", mn if mn == 0 else mx, mn, mx)
        units = self._units_from(offset) if broker else self.units[
            np.searchsorted(self.units["msgBaseOffset"], offset, side="left"):]
        if units is None:
            return GetMessageResult("OFFSET_FOUND_NULL", offset, mn, mx)
        limit = min(max_count, max_transfer_count) if broker else max(1, max_count)
        msgs, skipped, total, nxt = [], [], 0, offset
        for u in units:
            phy, size, base, batch = int(u["commitLogOffset"]), int(u["size"]), int(u["msgBaseOffset"]), int(u["batchSize"])
            if len(msgs) >= limit or (broker and msgs and total + size > max_transfer_bytes):
                break
            nxt = base + batch
            m = self.message(phy, size)
            if m is None:
                skipped.append((base, f"no record of {size} bytes at compaction-log offset {phy}"))
                continue
            msgs.append(m)
            total += size
        return GetMessageResult("FOUND" if msgs else "NO_MATCHED_MESSAGE", nxt, mn, mx, msgs, total, skipped)


class CompactionStore:
    """The compaction folder of a store: its queues and the position checkpoint."""

    def __init__(self, root: Path, topic_config: dict | None = None):
        self.root = root
        self.dir = root / C.COMPACTION_DIR
        self.queues: dict[tuple[str, int], CompactedQueue] = {}
        self.warnings: list[str] = []
        self.topic_config = topic_config or {}
        log_root, cq_root = self.dir / C.LOG_DIR, self.dir / C.CQ_DIR
        for tdir in _dirs(log_root):
            for qdir in _dirs(tdir):
                if not qdir.name.isdigit():
                    continue
                if not (cq_root / tdir.name / qdir.name).is_dir():   # CompactionStore.load skips it
                    self.warnings.append(f"{qdir}: compactionLog without its compactionCq folder; the broker "
                                         "does not load it (its getMessage answers NO_MATCHED_LOGIC_QUEUE)")
                    continue
                self.queues[(tdir.name, int(qdir.name))] = CompactedQueue(
                    tdir.name, int(qdir.name), qdir, cq_root / tdir.name / qdir.name)
        self.checkpoint: dict[str, int] = {}
        cp = self.dir / C.CHECKPOINT_FILE
        if cp.is_file():
            try:
                data = load_fastjson(cp.read_text("utf-8", "replace") or "{}")
                m = data.get("queueOffsetMap") if isinstance(data, dict) else None
                self.checkpoint = {k: v for k, v in (m or {}).items() if isinstance(v, int)}
            except ValueError as e:
                self.warnings.append(f"{cp}: not readable as fastjson ({e})")

    def is_compacted(self, topic: str) -> bool:
        """DefaultMessageStore.getMessage answers from the compaction log when the topic's
        cleanup.policy is COMPACTION; with no topics.json entry the compaction folder says so."""
        policy = C.cleanup_policy(self.topic_config.get(topic)) if isinstance(self.topic_config.get(topic), dict) else None
        if policy is not None:
            return policy == C.COMPACTION
        return any(t == topic for t, _ in self.queues)

    def topics(self) -> list[str]:
        return sorted({t for t, _ in self.queues if self.is_compacted(t)})

    def queue(self, topic: str, queue_id: int) -> CompactedQueue | None:
        return self.queues.get((topic, queue_id)) if self.is_compacted(topic) else None

    def compacted_up_to(self, topic: str, queue_id: int) -> int | None:
        """The position checkpoint: the largest queue offset the last compaction read."""
        return self.checkpoint.get(f"{topic}_{queue_id}")

    def info(self) -> dict:
        return {"topics": self.topics(), "checkpoint": self.checkpoint, "queues": [
            {"topic": t, "queueId": q, "minOffset": cq.min_offset, "maxOffset": cq.max_offset,
             "units": int(len(cq.units)), "logFiles": [f.path.name for f in cq.logs],
             "compactedUpTo": self.compacted_up_to(t, q)} for (t, q), cq in sorted(self.queues.items())],
            "warnings": list(self.warnings)}


def open_compaction(root: Path, topic_config: dict | None = None) -> CompactionStore | None:
    """The store's compaction folder, None when it holds no compaction log."""
    root = Path(root)
    if not (root / C.COMPACTION_DIR / C.LOG_DIR).is_dir():
        return None
    cs = CompactionStore(root, topic_config)
    return cs if cs.queues else None


def compaction_of(store) -> CompactionStore | None:
    """A MessageStore's CompactionStore (None without a compaction log; a tier has none),
    opened once per store and kept on it."""
    if store.local_store is None:   # (a tier on its own: no local files, no compaction log)
        return None
    cached = getattr(store, "_rmqstore_compaction", False)
    if cached is False:
        try:
            config = store.topic_config()
        except Exception:  # noqa: BLE001 - an unreadable topics.json: the folders decide
            config = {}
        cached = open_compaction(store.root, config)
        try:
            store._rmqstore_compaction = cached
        except AttributeError:
            pass
    return cached


def compacted_topic(store, topic: str) -> bool:
    """DefaultMessageStore.getMessage's test (enableCompaction defaults to true): the topic's
    cleanup.policy is COMPACTION in topics.json; with no entry there, a compaction log of it."""
    cs = compaction_of(store)
    if cs is not None:
        return cs.is_compacted(topic)
    try:
        entry = store.topic_config().get(topic)
    except Exception:  # noqa: BLE001 - an unreadable topics.json names no policy
        return False
    return isinstance(entry, dict) and C.cleanup_policy(entry) == C.COMPACTION


def no_compaction_log() -> GetMessageResult:
    """CompactionStore.getMessage for a queue with no CompactionLog loaded:
    GetMessageResult.NO_MATCH_LOGIC_QUEUE (next, min and max offsets 0)."""
    return GetMessageResult("NO_MATCHED_LOGIC_QUEUE", 0, 0, 0)


def mark_compacted(store, queues: list[dict]) -> list[dict]:
    """queue_list() rows of compacted topics gain `compacted` (info and the tree mark them)."""
    cs = compaction_of(store)
    topics = set(cs.topics()) if cs is not None else set()
    for q in queues:
        if q["topic"] in topics:
            q["compacted"] = True
    return queues


def _numbered(d: Path) -> list[Path]:
    try:
        return sorted((p for p in d.iterdir() if p.name.isdigit() and p.is_file()), key=lambda p: int(p.name))
    except OSError:
        return []


def _dirs(p: Path) -> list[Path]:
    try:
        return sorted(e for e in p.iterdir() if e.is_dir())
    except OSError:
        return []


# ---- check and the per-key summary ---------------------------------------------------------
def _full_queue(store, topic: str, queue_id: int) -> dict[int, object]:
    """queue offset -> message of the store's own ConsumeQueue (every message put)."""
    out, b = {}, store.queue_bounds(topic, queue_id) if store is not None else None
    off = b[1] if b else 0
    while b and off < b[2]:
        r = store.get_message(topic, queue_id, off, 1024)
        for m in r.messages:
            out[m.queueOffset] = m
        if r.nextBeginOffset <= off:
            break
        off = r.nextBeginOffset
    return out


def check_compaction(cs: CompactionStore, store=None) -> dict:
    """Every compactionCq unit against its compaction-log record (size, topic, queue, queue
    offset, the rewritten PHYSICALOFFSET) and against the message the store's ConsumeQueue holds
    at that queue offset; every log file walked to its end marker or its zeros."""
    problems, notes, count = [], [], 0

    def add(into, kind, detail, path, offset=None):
        into.append({"kind": kind, "detail": detail, "file": str(path), "offset": offset})

    for (topic, qid), q in sorted(cs.queues.items()):
        full = _full_queue(store, topic, qid) if store is not None else {}
        last_base, pointed, keys_below = -1, set(), {}
        compacted_files = [p for p, _ in q.files[:-1]]
        for path, units in q.files:
            for i, u in enumerate(units):
                count += 1
                phy, size, base = int(u["commitLogOffset"]), int(u["size"]), int(u["msgBaseOffset"])
                where = f"{topic}/{qid}@{base}"
                if base <= last_base:
                    add(problems, "compaction-cq-order", f"{where} after queue offset {last_base}", path, i * C.CQ_UNIT_SIZE)
                last_base = base
                m = q.message(phy, size)
                if m is None:
                    add(problems, "compaction-unit-dangling", f"{where}: no record of {size} bytes at compaction-log "
                        f"offset {phy}", q.log_dir, phy)
                    continue
                pointed.add(phy)
                if (m.topic, m.queueId, m.queueOffset) != (topic, qid, base):
                    add(problems, "compaction-record-mismatch", f"{where} points at {m.topic}/{m.queueId}@{m.queueOffset}",
                        q.log_dir, phy)
                if m.physicalOffsetField != phy:
                    add(problems, "compaction-physical-offset", f"{where}: PHYSICALOFFSET {m.physicalOffsetField}, "
                        f"the record is at {phy}", q.log_dir, phy)
                orig = full.get(base)
                if orig is not None and (orig.uniqKey, orig.bodyCRC, orig.keys) != (m.uniqKey, m.bodyCRC, m.keys):
                    add(problems, "compaction-differs", f"{where}: not the message the ConsumeQueue holds there",
                        q.log_dir, phy)
                if path in compacted_files:
                    keys_below.setdefault(m.keys, []).append(base)
        for k, bases in keys_below.items():
            if len(bases) > 1:
                add(notes, "compaction-key-kept-twice", f"{topic}/{qid}: key {k!r} kept at queue offsets {bases} "
                    "in compacted files", q.log_dir)
        for f in q.logs:
            _walk_log(f, pointed, topic, qid, add, problems, notes)
    return {"units": count, "problems": problems, "notes": notes}


def _walk_log(f: LogFile, pointed: set, topic, qid, add, problems, notes) -> None:
    """A log file's records from position 0 to the end marker, or to a zero size (a
    compacted file ends in zeros: its end marker is never written)."""
    data = f.path.read_bytes()
    pos = 0
    while pos + 8 <= len(data):
        total = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        magic = int.from_bytes(data[pos + 4:pos + 8], "big", signed=True)
        if total == 0 or magic == C.BLANK_MAGIC:
            return
        r = check_record(data, pos, len(data), f.base + pos)
        if r.status is not RecordStatus.MESSAGE:
            add(problems, "compaction-log-invalid", f"{topic}/{qid}: {r.reason or r.status.value}", f.path, pos)
            return
        if f.base + pos not in pointed:
            add(notes, "compaction-log-unreferenced", f"{topic}/{qid}: record at {f.base + pos} has no compactionCq "
                "unit", f.path, pos)
        pos += r.size


def key_summary(cs: CompactionStore, store, topic: str, queue_id: int) -> list[dict]:
    """key_summary_task run to its end."""
    from engine.tasks import run
    return run(key_summary_task(cs, store, topic, queue_id))


SUMMARY_STEP = 1024   # messages read between two progress reports (and cancel checks)


def key_summary_task(cs: CompactionStore, store, topic: str, queue_id: int, cancel=None):
    """Per key of a compacted queue: the kept message(s) and how many of its puts compaction
    took away (puts counted in the store's ConsumeQueue). A task: Progress over the compaction
    log's units, then the full queue's messages; `cancel` (a CancelToken) is checked between."""
    from engine.tasks import Progress
    q = cs.queues.get((topic, queue_id))
    if q is None:
        return []
    b = store.queue_bounds(topic, queue_id) if store is not None else None
    total = len(q.units) + (b[2] - b[1] if b else 0)
    kept: dict[str, list] = {}
    for i, u in enumerate(q.units):
        if i % SUMMARY_STEP == 0:
            if cancel is not None:
                cancel.raise_if_cancelled()
            yield Progress(i, total, "compaction log", "messages")
        m = q.message(int(u["commitLogOffset"]), int(u["size"]))
        if m is not None:
            kept.setdefault(m.keys or "", []).append(m)
    puts: dict[str, int] = {}
    off = b[1] if b else 0
    while b and off < b[2]:   # the store's own queue: every message put (as _full_queue reads it)
        if cancel is not None:
            cancel.raise_if_cancelled()
        yield Progress(len(q.units) + off - b[1], total, "full queue", "messages")
        r = store.get_message(topic, queue_id, off, SUMMARY_STEP)
        for m in r.messages:
            puts[m.keys or ""] = puts.get(m.keys or "", 0) + 1
        if r.nextBeginOffset <= off:
            break
        off = r.nextBeginOffset
    rows = []
    for k in sorted(set(kept) | set(puts)):
        ms = kept.get(k, [])
        rows.append({"key": k, "kept": ms, "puts": puts.get(k, 0),
                     "compactedAway": max(0, puts.get(k, 0) - len(ms))})
    yield Progress(total, total, "done", "messages")
    return rows
