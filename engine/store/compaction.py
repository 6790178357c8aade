"""Compacted topics (RocketMQ 5.x `cleanup.policy=COMPACTION`, store/kv CompactionStore), read
only: each queue's compaction log and its sparse consume queue, and getMessage as
CompactionLog.getMessage answers it (the view DefaultMessageStore.getMessage serves for such
a topic). Nothing here writes: compaction is the broker's."""
from __future__ import annotations

import os
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.format import compaction_layout as C
from engine.format.message import RecordStatus, check_record
from engine.format.tiered_layout import load_fastjson
from engine.store.batch_consume_queue import search_right
from engine.store.message_store import GetMessageResult


@dataclass
class LogFile:
    base: int
    path: Path
    size: int


class CompactedQueue:
    """One queue's compactionLog files and compactionCq units, as SparseConsumeQueue holds them
    after a broker's load and recover: `files` the valid units of each cq file (end units and
    unused space left out; `end_units` counts the end units), `_read` each file's units up to
    the written position recover gives it (the rules below read those, as the broker does)."""

    def __init__(self, topic: str, queue_id: int, log_dir: Path, cq_dir: Path):
        self.topic, self.queue_id, self.log_dir, self.cq_dir = topic, queue_id, log_dir, cq_dir
        self.logs = [LogFile(int(p.name), p, p.stat().st_size) for p in _numbered(log_dir)]
        self._bases = [f.base for f in self.logs]
        self.files: list[tuple[Path, np.ndarray]] = []   # (cq file, its valid units) in name order
        self._read: list[np.ndarray] = []                # each file's units up to its written position
        self.end_units = 0
        paths = _numbered(cq_dir)
        for i, p in enumerate(paths):
            data = p.read_bytes()
            arr = np.frombuffer(data[:len(data) - len(data) % C.CQ_UNIT_SIZE], dtype=C.CQ_UNIT_DTYPE)
            bad = np.flatnonzero(~_valid(arr))
            # recover() scans the last three files to their first invalid unit (an end unit, unused
            # space); the older ones keep load()'s written position, the whole file
            self._read.append(arr[:int(bad[0])] if i >= len(paths) - 3 and bad.size else arr)
            self.end_units += int((arr["commitLogOffset"] == C.END_UNIT_OFFSET).sum())
            self.files.append((p, arr[_valid(arr)]))
        self._bounds = [(self._file_min(u), self._file_max(u)) for u in self._read]   # per file, read once

    @property
    def units(self) -> np.ndarray:
        parts = [u for _, u in self.files]
        return np.concatenate(parts) if parts else np.empty(0, dtype=C.CQ_UNIT_DTYPE)

    @staticmethod
    def _file_min(units: np.ndarray) -> int | None:
        """BatchConsumeQueue.getMinMsgOffset: the first unit's msgBaseOffset, read as it is."""
        return int(units["msgBaseOffset"][0]) if len(units) else None

    @staticmethod
    def _file_max(units: np.ndarray) -> tuple[int, int, int] | None:
        """SparseConsumeQueue.getMaxMsgOffset: the last valid unit below the written position
        (index, msgBaseOffset, batchSize)."""
        ok = np.flatnonzero(_valid(units))
        if not ok.size:
            return None
        i = int(ok[-1])
        return i, int(units["msgBaseOffset"][i]), int(units["batchSize"][i])

    @property
    def min_offset(self) -> int:
        """getMinOffsetInQueue: the first file's first unit (-1 when there is none)."""
        m = self._bounds[0][0] if self._bounds else None
        return -1 if m is None else m

    @property
    def max_offset(self) -> int:
        """getMaxOffsetInQueue: the last valid unit's msgBaseOffset + batchSize (the last file,
        else the one before it), 0 when there is none."""
        for _, m in reversed(self._bounds[-2:]):
            if m is not None:
                return m[1] + m[2]
        return 0

    def read(self, offset: int, size: int) -> bytes | None:
        f = self._log_of(offset)
        if f is None or offset + size > f.base + f.size:
            return None
        with open(f.path, "rb") as fh:
            return os.pread(fh.fileno(), size, offset - f.base)

    def _log_of(self, offset: int) -> LogFile | None:
        i = bisect_right(self._bases, offset) - 1   # (the logs sorted by base)
        f = self.logs[i] if i >= 0 else None
        return f if f is not None and offset < f.base + f.size else None

    def message(self, offset: int, size: int):
        data = self.read(offset, size)
        if data is None:
            return None
        r = check_record(data, 0, len(data), offset)
        return r.message if r.status is RecordStatus.MESSAGE and r.size == size else None

    def _target_file(self, offset: int) -> int | None:
        """SparseConsumeQueue.getBatchMsgIndexOrNextBuffer's file for `offset` on a broker just
        started (its offset cache empty): the first file at or below the queue's min, else
        searchOffsetFromFilesOrRight -- newest first, the file right of one whose max is below
        the offset (an empty file too), or the file whose [min, max] holds it."""
        n = len(self._bounds)
        if not n:
            return None
        if offset <= self.min_offset:
            return 0
        first = self._bounds[0][0]
        if first is None or not first <= offset < self.max_offset:
            return None
        for i in range(n - 1, -1, -1):
            lo, hi = self._bounds[i]
            if hi is not None and hi[1] < offset and i != n - 1:
                return i + 1
            if lo is not None and hi is not None and lo <= offset <= hi[1]:
                return i
        return None

    def _units_from(self, offset: int) -> np.ndarray | None:
        """iterateFromOrNext: the target file's units from the first whose msgBaseOffset is at or
        above `offset` (binarySearchRight, LOWER, between its min and max units), None when
        there is no such file or unit."""
        i = self._target_file(offset)
        if i is None:
            return None
        units, (lo, hi) = self._read[i], self._bounds[i]
        if lo is None or hi is None:
            return None
        j = search_right(units["msgBaseOffset"][:hi[0] + 1], offset, upper=False)   # (between its min and max)
        return None if j < 0 else units[j:]

    def get_message(self, offset: int, max_count: int = 32, broker: bool = True, max_transfer_count: int = 32,
                    max_transfer_bytes: int = 256 * 1024) -> GetMessageResult:
        """CompactionLog.getMessage. broker=True: one cq file a page (travelCqFileNumWhenGetMessage)
        and the in-memory transfer limits, as the broker; False: max_count messages across files."""
        mn, mx = self.min_offset, self.max_offset
        if mx == 0:
            return GetMessageResult("NO_MESSAGE_IN_QUEUE", 0, mn, mx)
        if offset == mx:
            return GetMessageResult("OFFSET_OVERFLOW_ONE", offset, mn, mx)
        if offset > mx:
            return GetMessageResult("OFFSET_OVERFLOW_BADLY", mn if mn == 0 else mx, mn, mx)
        if broker:
            units = self._units_from(offset)
            if units is None:   # next: rollNextFile, which BatchConsumeQueue answers 0
                return GetMessageResult("OFFSET_FOUND_NULL", 0, mn, mx)
        else:   # every valid unit from the offset on, across files
            every = self.units
            units = every[np.searchsorted(every["msgBaseOffset"], offset, side="left"):]
            if not len(units):
                return GetMessageResult("OFFSET_FOUND_NULL", offset, mn, mx)
        limit = max(1, min(max_count, max_transfer_count) if broker else max_count)   # (the first is always taken)
        msgs, skipped, total, nxt, status, gone_until = [], [], 0, offset, "NO_MATCHED_MESSAGE", None
        log_size = self.logs[0].size if self.logs else 0
        for u in units:
            phy, size, base, batch = int(u["commitLogOffset"]), int(u["size"]), int(u["msgBaseOffset"]), int(u["batchSize"])
            if not (phy >= 0 and size > 0 and base >= 0 and batch > 0) or nxt >= mx:   # validateCqUnit
                break
            if len(msgs) >= limit or (broker and msgs and total + size > max_transfer_bytes):
                break
            nxt = base + batch
            if gone_until is not None and phy < gone_until:
                continue   # the rest of a log file that is not there (rollNextFile)
            if self._log_of(phy) is None:
                gone_until = phy + log_size - phy % log_size if log_size else phy + 1
                if not msgs:
                    status = "MESSAGE_WAS_REMOVING"
                skipped.append((base, f"no compaction-log file holds offset {phy}"))
                continue
            m = self.message(phy, size)
            if m is None:
                skipped.append((base, f"no record of {size} bytes at compaction-log offset {phy}"))
                continue
            msgs.append(m)
            total += size
            status = "FOUND"
        return GetMessageResult(status, nxt, mn, mx, msgs, total, skipped)


def _valid(units: np.ndarray) -> np.ndarray:
    """SparseConsumeQueue's test of a unit (recover, getMaxMsgOffset): offset, size,
    msgBaseOffset and batchSize all positive (offset and base may be 0)."""
    return ((units["commitLogOffset"] >= 0) & (units["size"] > 0) & (units["msgBaseOffset"] >= 0)
            & (units["batchSize"] > 0))


class CompactionStore:
    """The compaction folder of a store: its queues and the position checkpoint."""

    def __init__(self, root: Path, topic_config: dict | None = None):
        self.root = root
        self.dir = root / C.COMPACTION_DIR
        self.queues: dict[tuple[str, int], CompactedQueue] = {}
        self.unloaded: dict[tuple[str, int], tuple[str, Path]] = {}   # queues the broker's load refuses: why, where
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
                misfit = _misfit(qdir) or _misfit(cq_root / tdir.name / qdir.name)
                if misfit is not None:   # MappedFileQueue.load refuses the queue: the broker never serves it
                    self.unloaded[(tdir.name, int(qdir.name))] = misfit
                    self.warnings.append(f"{misfit[1]}: {misfit[0]}")
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


def broker_starts_log(store, topic: str, queue_id: int) -> bool:
    """Whether a running broker holds a CompactionLog for a queue that has none on disk: its
    topic scan (every 30 s, CompactionStore.scanAllTopicConfig) starts one for each of the
    topic's write queues (topics.json's writeQueueNums), and any message dispatched to the queue
    starts one (a keyless one too, before asyncPutMessage refuses it): without topics.json, the
    queues the store's ConsumeQueues hold. (The scan stops at the first queue whose files fail
    to load -- this does not follow it past one.)"""
    try:
        entry = store.topic_config().get(topic)
    except Exception:  # noqa: BLE001 - an unreadable topics.json: the queues decide
        entry = None
    n = entry.get("writeQueueNums") if isinstance(entry, dict) else None
    if isinstance(n, int):
        return 0 <= queue_id < n
    return store.queue_bounds(topic, queue_id) is not None


def not_dispatched(store, topic: str, queue_id: int, log_max: int, look: int = 4096) -> str | None:
    """Whether the queue holds keyed messages past the compaction log's end (at most `look`
    read): dispatch copies each keyed message into the log (CompactionStore.doDispatch), so a
    gap means a broker stopped before it did, or a writer that is not a broker put them."""
    b = store.queue_bounds(topic, queue_id)
    if b is None or b[2] <= log_max:
        return None
    off, n = max(log_max, b[1]), 0
    while off < min(b[2], log_max + look):
        r = store.get_message(topic, queue_id, off, 256)
        n += sum(1 for m in r.messages if (m.keys or "").strip())
        if r.nextBeginOffset <= off:
            break
        off = r.nextBeginOffset
    return None if not n else (f"{n} keyed message(s) of the queue from queue offset {log_max} on are not in the "
                               "compaction log (not shown here): after a crash the broker's abnormal recovery copies "
                               "in those past its checkpoint; after a clean shutdown they stay out")


def compacted_view(store, topic: str, queue_id: int, offset: int, count: int, broker: bool = True
                   ) -> tuple[GetMessageResult, str]:
    """What DefaultMessageStore.getMessage serves for a COMPACTION topic's queue, and where it
    comes from: its compaction log; for a queue with none on disk, the empty CompactionLog a
    running broker starts for it (NO_MESSAGE_IN_QUEUE, min -1: BatchConsumeQueue's), else
    NO_MATCHED_LOGIC_QUEUE (no such queue, or log files without their compactionCq files or the
    other way round, which the new CompactionLog's sanityCheck refuses)."""
    cs = compaction_of(store)
    cq = cs.queue(topic, queue_id) if cs is not None else None
    if cq is not None:
        lag = not_dispatched(store, topic, queue_id, cq.max_offset)
        return (cq.get_message(offset, count, broker=broker, max_transfer_count=store.cfg.maxTransferCountOnMessageInMemory,
                               max_transfer_bytes=store.cfg.maxTransferBytesOnMessageInMemory),
                f"from the compaction log; compacted up to queue offset {cs.compacted_up_to(topic, queue_id)}"
                + (f"; {lag}" if lag else ""))
    base = Path(store.root) / C.COMPACTION_DIR
    files = _numbered(base / C.LOG_DIR / topic / str(queue_id)) + _numbered(base / C.CQ_DIR / topic / str(queue_id))
    if broker_starts_log(store, topic, queue_id) and not files:   # (files of one kind only: its sanityCheck fails)
        return (GetMessageResult("NO_MESSAGE_IN_QUEUE", 0, -1, 0),
                "no compaction log of this queue on disk: a running broker starts an empty one (its 30 s topic "
                "scan, or the first message dispatched here); one started less than 30 s ago answers "
                "NO_MATCHED_LOGIC_QUEUE")
    return no_compaction_log(), ("no compaction log of this queue: CompactionStore.getMessage answers "
                                 "NO_MATCHED_LOGIC_QUEUE until the broker starts one")


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


def _strays(d: Path) -> list[Path]:
    """What a queue's compactionLog or compactionCq folder holds besides its numbered files."""
    try:
        return sorted(p for p in d.iterdir() if not (p.name.isdigit() and p.is_file()))
    except OSError:
        return []


def _mapped_size(d: Path) -> int | None:
    """The size of a compaction queue folder's mapped files: the one most of its numbered files
    have (the larger on a tie); None when it has none."""
    sizes = Counter(f.stat().st_size for f in _numbered(d))
    return max(sizes, key=lambda k: (sizes[k], k)) if sizes else None


def _misfit(d: Path) -> tuple[str, Path] | None:
    """Why MappedFileQueue.load refuses a compaction queue's folder, if it does: a file of
    another size than the folder's mapped files (it returns false; the queue is not loaded,
    and its getMessage answers NO_MATCHED_LOGIC_QUEUE). Folders are skipped; a stray file of the
    mapped size is worse (_stray)."""
    size = _mapped_size(d)
    for f in _numbered(d) + [e for e in _strays(d) if e.is_file()]:
        n = f.stat().st_size
        if size is not None and n != size and not (n == 0 and f.name.isdigit()):
            return (f"{f.name} is {n:,} bytes, not the folder's {size:,}: the broker's load refuses this queue "
                    "(MappedFileQueue.load), so its getMessage answers NO_MATCHED_LOGIC_QUEUE", f)
    return None


def _dirs(p: Path) -> list[Path]:
    try:
        return sorted(e for e in p.iterdir() if e.is_dir())
    except OSError:
        return []


# ---- the per-key summary ------------------------------------------------------------------
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
