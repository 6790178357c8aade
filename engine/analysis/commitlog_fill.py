"""Commitlog segment fill: per file, which byte ranges hold which topic's records, the blank
tail, damage and unwritten space.

No record walker of its own. The records a ConsumeQueue points at are taken from the queues'
units (commitLogOffset, size, topic): runs of them that tile the file back to back are accepted in
bulk with numpy, without reading the records. Only what exactly one queue does not vouch for
(records of undispatched transactions, records whose queue files are gone, records several
queues point at such as LMQ dispatch, damage, the blank record) is read, by the store's own
CommitLog.walk (check_record), so every verdict about bytes is the engine's.
A record a queue points at is taken at the queue's word; damage inside it is `check`'s job."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from engine.config import CQ_UNIT_SIZE
from engine.format.message import SCHEDULE_TOPIC, RecordStatus
from engine.store.consume_queue import FILLER_SIZE
from engine.tasks import CancelToken, Progress, Task, run

from .segments import BLANK, DAMAGED, FREE, Segments, record_runs

SLOW_POLL = 4096   # records classified one by one between two looks at the cancel token


@dataclass
class CommitLogFileFill:
    """One commitlog file's records (walked once; see CommitLogFillCache)."""
    name: str
    file_from_offset: int
    file_size: int
    wrote_position: int
    topics: list[str]                 # category id -> topic
    record_starts: np.ndarray         # int64, positions in the file of every readable record
    record_sizes: np.ndarray          # int32
    record_topics: np.ndarray         # int32, category (topic id, or DAMAGED for size mismatches)
    segments: Segments
    data_end: int                     # position after the last record
    blank_at: int | None              # position of the END_OF_FILE blank record, if any
    stop: str                         # why the walk ended
    record_head: int = 0              # bytes before each record that belong to it (a DLedger entry header)

    @property
    def message_count(self) -> int:
        return int(np.count_nonzero(self.record_topics >= 0))

    @property
    def message_bytes(self) -> int:
        return int(self.record_sizes[self.record_topics >= 0].sum(dtype=np.int64))

    @property
    def blank_tail(self) -> int:
        return self.file_size - self.blank_at if self.blank_at is not None else 0

    @property
    def fill(self) -> float:
        """Message bytes as a fraction of the file size."""
        return self.message_bytes / self.file_size if self.file_size else 0.0

    def topic_bytes(self) -> dict[str, int]:
        return {self.topics[i]: n for i, n in self.segments.bytes_by_id().items() if i >= 0}

    def record_at(self, pos: int) -> int | None:
        """Position of the message record holding file position `pos`, if any."""
        i = int(np.searchsorted(self.record_starts, pos + self.record_head, side="right")) - 1
        if i < 0 or pos >= self.record_starts[i] + self.record_sizes[i] or self.record_topics[i] < 0:
            return None
        return int(self.record_starts[i])


class QueueUnits:
    """Every ConsumeQueue unit of a store as one table sorted by commitLogOffset: where each queued
    record starts, its size and its topic. Runs of units whose records lie back to back are
    marked, so a walk takes a whole run in one step."""

    def __init__(self, store):
        topics: list[str] = []
        phys, sizes, ids = [], [], []
        for (topic, _qid), cq in sorted(store.queues.items()):
            if topic == SCHEDULE_TOPIC:   # check_record validates their DELAY: leave them to it
                continue
            if topic not in topics:
                topics.append(topic)
            for f in cq.queue.files:
                u = cq.view(f)[:f.wrote_position // CQ_UNIT_SIZE]
                phy, size = u["commitLogOffset"].astype(np.int64), u["size"].astype(np.int32)
                keep = (phy >= 0) & (size > 0) & (size != FILLER_SIZE)
                if not keep.all():
                    phy, size = phy[keep], size[keep]
                phys.append(phy), sizes.append(size)
                ids.append(np.full(len(phy), topics.index(topic), dtype=np.int32))
        self.topics = topics
        phy = np.concatenate(phys) if phys else np.empty(0, dtype=np.int64)
        size = np.concatenate(sizes) if sizes else np.empty(0, dtype=np.int32)
        tid = np.concatenate(ids) if ids else np.empty(0, dtype=np.int32)
        if not (phy[1:] >= phy[:-1]).all():       # queues interleave in the log: merge them
            order = np.argsort(phy, kind="stable")
            phy, size, tid = phy[order], size[order], tid[order]
        dup = phy[1:] == phy[:-1]   # a record in two queues (LMQ dispatch, damage): no queue names its topic
        if dup.any():
            shared = np.zeros(len(phy), dtype=bool)
            shared[1:] |= dup
            shared[:-1] |= dup
            phy, size, tid = phy[~shared], size[~shared], tid[~shared]
        self.phy, self.size, self.tid = phy, size, tid
        self.breaks = np.flatnonzero(self.phy[1:] != self.phy[:-1] + self.size[:-1])  # run i ends after breaks

    def run_at(self, offset: int, end: int) -> tuple[int, int]:
        """Units [i, j) of the back-to-back run that starts at commitlog `offset` and ends by `end`."""
        i = int(np.searchsorted(self.phy, offset))
        if i >= len(self.phy) or self.phy[i] != offset:
            return i, i
        b = int(np.searchsorted(self.breaks, i))
        j = int(self.breaks[b]) + 1 if b < len(self.breaks) else len(self.phy)
        j = i + int(np.searchsorted(self.phy[i:j] + self.size[i:j], end, side="right"))
        return i, j

    def next_start(self, offset: int) -> int:
        """The first queued record starting after commitlog `offset` (a huge number if none)."""
        i = int(np.searchsorted(self.phy, offset, side="right"))
        return int(self.phy[i]) if i < len(self.phy) else 1 << 62


def walk_commitlog_file_task(commitlog, f, units: QueueUnits,
                             cancel: CancelToken | None = None) -> Task[CommitLogFileFill]:
    """One MappedFile's records up to its write position: queued runs from `units`, the
    records between them from CommitLog.walk (check_record's verdicts)."""
    limit, base = f.wrote_position, f.file_from_offset
    topics = list(units.topics)
    topic_ids = {t: i for i, t in enumerate(topics)}
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    one: list[tuple[int, int, int]] = []          # records classified one by one
    pos, blank_at, stop, slow, ended = 0, None, "end of written data", 0, False
    while pos < limit and not ended:
        i, j = units.run_at(base + pos, base + limit)
        if j > i:
            parts.append((units.phy[i:j] - base, units.size[i:j], units.tid[i:j]))
            pos = int(units.phy[j - 1] + units.size[j - 1]) - base
            continue
        gap_end = min(units.next_start(base + pos), base + limit)
        ended = True
        for off, r in commitlog.walk(base + pos, gap_end):
            if off - base != pos:          # the walk skipped ahead (it left this file)
                stop = f"no record at {base + pos}"
                break
            slow += 1
            if slow % SLOW_POLL == 0:
                if cancel is not None:
                    cancel.raise_if_cancelled()
                yield Progress(pos, limit, "commitlog fill", "bytes", f.path.name)
            if r.status is RecordStatus.MESSAGE:
                tid = topic_ids.get(r.message.topic)
                if tid is None:
                    tid = topic_ids[r.message.topic] = len(topics)
                    topics.append(r.message.topic)
                one.append((pos, r.size, tid))
            elif r.status is RecordStatus.SIZE_MISMATCH and r.size > 0:
                one.append((pos, r.size, DAMAGED))
            elif r.status is RecordStatus.END_OF_FILE:
                blank_at, stop = pos, "end-of-file blank record"
                break
            else:
                stop = f"{r.status.value}: {r.reason}"
                break
            pos += r.size
        else:
            ended = pos < gap_end - base     # the walk stopped short of the gap's end
    if one:
        a = np.array(one, dtype=np.int64)
        parts.append((a[:, 0], a[:, 1], a[:, 2]))
    rs = np.concatenate([p[0] for p in parts]).astype(np.int64) if parts else np.empty(0, dtype=np.int64)
    order = np.argsort(rs, kind="stable")
    rs = rs[order]
    rz = np.concatenate([p[1] for p in parts]).astype(np.int32)[order] if parts else np.empty(0, dtype=np.int32)
    rc = np.concatenate([p[2] for p in parts]).astype(np.int32)[order] if parts else np.empty(0, dtype=np.int32)
    used = sorted(set(np.unique(rc[rc >= 0]).tolist()))        # only the topics this file holds
    remap = np.full(len(topics), -1, dtype=np.int32)
    remap[used] = np.arange(len(used), dtype=np.int32)
    rc = np.where(rc >= 0, remap[np.maximum(rc, 0)], rc).astype(np.int32)
    runs = record_runs(rs, rz, rc)
    if blank_at is not None:
        runs.append((blank_at, f.file_size, BLANK))
    else:
        runs.append((pos, limit, DAMAGED))
        runs.append((max(pos, limit), f.file_size, FREE))
    return CommitLogFileFill(f.path.name, base, f.file_size, f.wrote_position, [topics[i] for i in used],
                             rs, rz, rc, Segments.from_runs(runs), pos, blank_at, stop)


class CommitLogFillCache:
    """Walk each commitlog file once: results keyed by path, size, write position and mtime."""

    def __init__(self):
        self._lock = threading.Lock()
        self._data: dict[tuple, CommitLogFileFill] = {}

    @staticmethod
    def key(f) -> tuple:
        try:
            mtime = os.stat(f.path).st_mtime_ns
        except OSError:
            mtime = 0
        return (str(f.path), f.file_size, f.wrote_position, mtime)

    def peek(self, f) -> CommitLogFileFill | None:
        with self._lock:
            return self._data.get(self.key(f))

    def put(self, f, fill: CommitLogFileFill) -> None:
        with self._lock:
            self._data[self.key(f)] = fill

    def __len__(self) -> int:
        return len(self._data)


def commitlog_fill_task(store, cache: CommitLogFillCache | None = None,
                        cancel: CancelToken | None = None) -> Task[list[CommitLogFileFill]]:
    """Every commitlog file's fill, a Progress per file (in bytes of the log)."""
    cache = CommitLogFillCache() if cache is None else cache
    files = store.commitlog.files
    total = sum(f.wrote_position for f in files)
    done, units, out = 0, None, []
    for f in files:
        if cancel is not None:
            cancel.raise_if_cancelled()
        fill = cache.peek(f)
        if fill is None:
            if f.file_from_offset >= getattr(store.commitlog, "divided", 1 << 62):  # DLedger entries
                from .dledger_fill import walk_dledger_file_task
                fill = CommitLogFileFill(**(yield from walk_dledger_file_task(store.commitlog, f, cancel)))
            else:
                units = QueueUnits(store) if units is None else units
                fill = yield from walk_commitlog_file_task(store.commitlog, f, units, cancel)
            cache.put(f, fill)
        out.append(fill)
        done += f.wrote_position
        yield Progress(done, total, "commitlog fill", "bytes", f.path.name)
    return out


def commitlog_fill(store, cache: CommitLogFillCache | None = None) -> list[CommitLogFileFill]:
    return run(commitlog_fill_task(store, cache))

