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
from functools import cached_property

import numpy as np

from engine.config import CQ_UNIT_SIZE
from engine.format.message import SCHEDULE_TOPIC, RecordStatus
from engine.store.consume_queue import FILLER_SIZE
from engine.tasks import CancelToken, Progress, Task, run

from .segments import BLANK, DAMAGED, FREE, Segments, record_run_arrays

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

    @cached_property   # (a file's fill never changes: the views ask for these on every draw)
    def message_count(self) -> int:
        return int(np.count_nonzero(self.record_topics >= 0))

    @cached_property
    def message_bytes(self) -> int:
        return int(self.record_sizes[self.record_topics >= 0].sum(dtype=np.int64))

    @property
    def blank_tail(self) -> int:
        return self.file_size - self.blank_at if self.blank_at is not None else 0

    @property
    def fill(self) -> float:
        """Message bytes as a fraction of the file size."""
        return self.message_bytes / self.file_size if self.file_size else 0.0

    @cached_property
    def _topic_bytes(self) -> dict[str, int]:
        return {self.topics[i]: n for i, n in self.segments.bytes_by_id().items() if i >= 0}

    def topic_bytes(self) -> dict[str, int]:
        return dict(self._topic_bytes)

    def record_at(self, pos: int) -> int | None:
        """Position of the message record holding file position `pos`, if any."""
        i = int(np.searchsorted(self.record_starts, pos + self.record_head, side="right")) - 1
        if i < 0 or pos >= self.record_starts[i] + self.record_sizes[i] or self.record_topics[i] < 0:
            return None
        return int(self.record_starts[i])


class QueueUnits:
    """Every ConsumeQueue unit of a store, read once per CQ file into native arrays
    (commitLogOffset, size): `files` for the ConsumeQueue fill, and, for the topics whose
    units vouch for their records (all but SCHEDULE_TOPIC_XXXX, whose DELAY check_record
    validates), `between(lo, hi)`: the units of the records starting in one commitlog file,
    cut from each queue file by binary search (a queue's units ascend in the log)."""

    def __init__(self, store):
        self.topics: list[str] = []
        self.files: list[tuple] = []   # (topic, queueId, cq, MappedFile, phy, size, all units real) per CQ file
        self.parts: list[tuple] = []   # (lo, hi, phy, size, topic id, ascending) of the vouching units
        for (topic, qid), cq in sorted(store.queues.items()):
            for f in cq.queue.files:
                u = cq.view(f)
                u = u[:min(f.wrote_position // CQ_UNIT_SIZE, len(u))]
                phy, size = u["commitLogOffset"].astype(np.int64), u["size"].astype(np.int32)
                keep = (phy >= 0) & (size > 0) & (size != FILLER_SIZE)
                real = bool(keep.all())
                self.files.append((topic, qid, cq, f, phy, size, real))
                if topic == SCHEDULE_TOPIC or not len(phy):
                    continue
                if topic not in self.topics:
                    self.topics.append(topic)
                if not real:
                    phy, size = phy[keep], size[keep]
                    if not len(phy):
                        continue
                asc = bool((phy[1:] >= phy[:-1]).all())
                lo, hi = (int(phy[0]), int(phy[-1])) if asc else (int(phy.min()), int(phy.max()))
                self.parts.append((lo, hi, phy, size, self.topics.index(topic), asc))

    def between(self, lo: int, hi: int) -> "FileUnits":
        """The units of the records starting in [lo, hi), sorted by commitLogOffset."""
        phys, sizes, ids = [], [], []
        for plo, phi, phy, size, tid, asc in self.parts:
            if phi < lo or plo >= hi:
                continue
            if asc:
                a, b = int(np.searchsorted(phy, lo)), int(np.searchsorted(phy, hi))
                p, z = phy[a:b], size[a:b]
            else:      # a damaged queue file: its units in this range, put in order
                idx = np.flatnonzero((phy >= lo) & (phy < hi))
                idx = idx[np.argsort(phy[idx], kind="stable")]
                p, z = phy[idx], size[idx]
            if len(p):
                phys.append(p)
                sizes.append(z)
                ids.append(tid)
        return FileUnits(self.topics, lo, phys, sizes, ids)


class FileUnits:
    """The queued records of one commitlog file as one table sorted by position in the file.
    Runs of units whose records lie back to back are marked, so a walk takes a whole run in
    one step."""

    def __init__(self, topics: list[str], base: int, phys: list, sizes: list, ids: list[int]):
        """phys/sizes: one ascending part per queue file (in queue order); ids: each part's topic id."""
        self.topics = topics
        if not phys:
            pos, size, tid = np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.int32)
        else:
            pos = np.concatenate(phys) - base
            size = np.concatenate(sizes)
            counts = np.array([len(p) for p in phys], dtype=np.int64)
            firsts = np.array([int(p[0]) for p in phys], dtype=np.int64)
            lasts = np.array([int(p[-1]) for p in phys], dtype=np.int64)
            if len(phys) > 1 and not (firsts[1:] > lasts[:-1]).all():   # queues interleave: merge them
                # one stable sort of (position in the file, unit number) packed in an int64 (it
                # merges the parts' ascending runs); positions in a file are below 2^31
                key = np.sort((pos << 32) | np.arange(len(pos), dtype=np.int64), kind="stable")
                order = key & 0xFFFFFFFF
                pos, size = key >> 32, size[order]
                tid = np.repeat(np.asarray(ids, dtype=np.int32), counts)[order]
            else:
                tid = np.repeat(np.asarray(ids, dtype=np.int32), counts)
        brk = np.flatnonzero(pos[1:] != pos[:-1] + size[:-1])
        dup = brk[pos[brk + 1] == pos[brk]]   # a record in two queues (LMQ dispatch, damage): no queue names its topic
        if len(dup):
            shared = np.zeros(len(pos), dtype=bool)
            shared[dup] = True
            shared[dup + 1] = True
            pos, size, tid = pos[~shared], size[~shared], tid[~shared]
            brk = np.flatnonzero(pos[1:] != pos[:-1] + size[:-1])
        self.pos, self.size, self.tid = pos, size, tid
        self.breaks = brk   # run i ends after breaks

    def run_at(self, at: int, end: int) -> tuple[int, int]:
        """Units [i, j) of the back-to-back run that starts at position `at` and ends by `end`."""
        i = int(np.searchsorted(self.pos, at))
        if i >= len(self.pos) or self.pos[i] != at:
            return i, i
        b = int(np.searchsorted(self.breaks, i))
        j = int(self.breaks[b]) + 1 if b < len(self.breaks) else len(self.pos)
        if int(self.pos[j - 1]) + int(self.size[j - 1]) > end:    # the run overruns the written data
            j = i + int(np.searchsorted(self.pos[i:j] + self.size[i:j], end, side="right"))
        return i, j

    def next_start(self, at: int) -> int:
        """The first queued record starting after position `at` (a huge number if none)."""
        i = int(np.searchsorted(self.pos, at, side="right"))
        return int(self.pos[i]) if i < len(self.pos) else 1 << 62


def walk_commitlog_file_task(commitlog, f, units: FileUnits,
                             cancel: CancelToken | None = None) -> Task[CommitLogFileFill]:
    """One MappedFile's records up to its write position: queued runs from `units`, the
    records between them from CommitLog.walk (check_record's verdicts)."""
    limit, base = f.wrote_position, f.file_from_offset
    topics = list(units.topics)
    topic_ids = {t: i for i, t in enumerate(topics)}
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []   # in file order
    pos, blank_at, stop, slow, ended = 0, None, "end of written data", 0, False
    while pos < limit and not ended:
        i, j = units.run_at(pos, limit)
        if j > i:
            parts.append((units.pos[i:j], units.size[i:j], units.tid[i:j]))
            pos = int(units.pos[j - 1] + units.size[j - 1])
            continue
        gap_end = min(units.next_start(pos), limit)
        ended = True
        one: list[tuple[int, int, int]] = []          # records classified one by one
        for off, r in commitlog.walk(base + pos, base + gap_end):
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
            ended = pos < gap_end     # the walk stopped short of the gap's end
        if one:
            a = np.array(one, dtype=np.int64)
            parts.append((a[:, 0], a[:, 1].astype(np.int32), a[:, 2].astype(np.int32)))
    if len(parts) == 1:    # one run of queued records (the usual file)
        rs, rz, rc = parts[0]
    elif parts:
        rs, rz, rc = (np.concatenate([p[k] for p in parts]) for k in range(3))
    else:
        rs, rz, rc = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int32)
    starts, ends, cats = record_run_arrays(rs, rz, rc)
    used = np.unique(cats[cats >= 0])        # only the topics this file holds (from the runs: few)
    if len(used) < len(topics) or not (used == np.arange(len(used))).all():
        remap = np.full(len(topics), -1, dtype=np.int32)
        remap[used] = np.arange(len(used), dtype=np.int32)
        rc = np.where(rc >= 0, remap[np.maximum(rc, 0)], rc).astype(np.int32)
        cats = np.where(cats >= 0, remap[np.maximum(cats, 0)], cats).astype(np.int32)
    runs = [(starts, ends, cats)]
    if blank_at is not None:
        runs.append(_run(blank_at, f.file_size, BLANK))
    else:
        runs.append(_run(pos, limit, DAMAGED))
        runs.append(_run(max(pos, limit), f.file_size, FREE))
    return CommitLogFileFill(f.path.name, base, f.file_size, f.wrote_position, [topics[i] for i in used.tolist()],
                             rs, rz, rc, Segments.from_arrays(*runs), pos, blank_at, stop)


def _run(start: int, end: int, cat: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array([start], np.int64), np.array([end], np.int64), np.array([cat], np.int32)


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


def commitlog_fill_task(store, cache: CommitLogFillCache | None = None, cancel: CancelToken | None = None,
                        done_files: list | None = None,
                        units: QueueUnits | None = None) -> Task[list[CommitLogFileFill]]:
    """Every commitlog file's fill, a Progress per file (in bytes of the log). Each file's fill
    is appended to `done_files` (when given) as soon as it is complete, before its Progress."""
    cache = CommitLogFillCache() if cache is None else cache
    files = store.commitlog.files
    total = sum(f.wrote_position for f in files)
    done = 0
    out = [] if done_files is None else done_files
    for f in files:
        if cancel is not None:
            cancel.raise_if_cancelled()
        fill = cache.peek(f)
        if fill is None:
            if f.file_from_offset >= getattr(store.commitlog, "divided", 1 << 62):  # DLedger entries
                from .dledger_fill import walk_dledger_file_task
                inner = walk_dledger_file_task(store.commitlog, f, cancel)
            else:
                units = QueueUnits(store) if units is None else units
                inner = walk_commitlog_file_task(store.commitlog, f,
                                                 units.between(f.file_from_offset, f.file_from_offset + f.wrote_position),
                                                 cancel)
            while True:   # the walk's own reports, in bytes of the whole log
                try:
                    p = next(inner)
                except StopIteration as stop:
                    fill = stop.value
                    break
                yield Progress(done + min(p.done, f.wrote_position), total, p.phase, p.unit, p.message)
            if isinstance(fill, dict):
                fill = CommitLogFileFill(**fill)
            cache.put(f, fill)
        out.append(fill)
        done += f.wrote_position
        yield Progress(done, total, "commitlog fill", "bytes", f.path.name)
    return out


def commitlog_fill(store, cache: CommitLogFillCache | None = None) -> list[CommitLogFileFill]:
    return run(commitlog_fill_task(store, cache))

