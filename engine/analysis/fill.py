"""Store fill: the commitlog files (commitlog_fill), every ConsumeQueue file and every index
file, as run-length segments the fill view draws and numbers the `fill` command prints."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from engine.config import CQ_UNIT_SIZE
from engine.store.consume_queue import FILLER_SIZE
from engine.tasks import CancelToken, Progress, Task, run

from .commitlog_fill import CommitLogFileFill, CommitLogFillCache, QueueUnits, commitlog_fill_task
from .segments import DAMAGED, FILLER, FREE, RESERVED, SLOTS, USED, Segments, run_length


@dataclass
class QueueFileFill:
    topic: str
    queue_id: int
    name: str
    file_from_offset: int        # byte position in the queue (= first queue offset * 20)
    units_per_file: int
    written_units: int           # write position / 20
    valid_units: int             # pointing at a record
    filler_units: int
    segments: Segments           # over unit positions [0, units_per_file)

    @property
    def first_queue_offset(self) -> int:
        return self.file_from_offset // CQ_UNIT_SIZE

    @property
    def fill(self) -> float:
        return self.written_units / self.units_per_file if self.units_per_file else 0.0


def queue_file_fill(store, units: QueueUnits | None = None) -> list[QueueFileFill]:
    """Every ConsumeQueue file of every queue, queues in (topic, queueId) order (from `units`
    when the commitlog fill has read them already)."""
    out = []
    for topic, qid, cq, f, phy, size, real in (units or QueueUnits(store)).files:
        n = len(phy)
        if real:     # every unit points at a record (the usual file): one run
            runs, valid, filler = [(0, n, 0)], n, 0
        else:
            is_filler = (phy == 0) & (size == FILLER_SIZE)
            is_valid = (phy >= 0) & (size > 0) & ~is_filler
            runs = run_length(np.where(is_filler, FILLER, np.where(is_valid, 0, DAMAGED)).astype(np.int32))
            valid, filler = int(np.count_nonzero(is_valid)), int(np.count_nonzero(is_filler))
        runs.append((n, cq.units_per_file, FREE))
        out.append(QueueFileFill(topic, qid, f.path.name, f.file_from_offset, cq.units_per_file, n, valid, filler,
                                 Segments.from_runs(runs)))
    return out


@dataclass
class IndexFill:
    name: str
    slot_num: int           # maxHashSlotNum
    index_num: int          # maxIndexNum
    entries_used: int       # indexCount - 1
    slots_used: int         # non-zero slots
    hash_slot_count: int    # the header's counter (slots that were empty when first used)
    begin_timestamp: int
    end_timestamp: int
    begin_phy_offset: int
    end_phy_offset: int
    header_index_count: int = 0   # the header's indexCount as stored (entries_used is clamped)

    @property
    def beyond_capacity(self) -> bool:
        """The header claims more entries than the file can hold (indexCount > maxIndexNum):
        a forged or damaged header; every figure here is clamped to the capacity."""
        return self.header_index_count > self.index_num

    @property
    def entry_fill(self) -> float:
        return self.entries_used / self.index_num if self.index_num else 0.0

    @property
    def slot_fill(self) -> float:
        return self.slots_used / self.slot_num if self.slot_num else 0.0

    @property
    def load_factor(self) -> float:
        return self.entries_used / self.slot_num if self.slot_num else 0.0

    def entry_segments(self) -> Segments:
        return Segments.from_runs([(0, 1, RESERVED), (1, 1 + self.entries_used, USED),
                                   (1 + self.entries_used, self.index_num, FREE)])

    def slot_segments(self) -> Segments:
        """A gauge: used slots are spread over the table, the heat map shows where."""
        return Segments.from_runs([(0, self.slots_used, SLOTS), (self.slots_used, self.slot_num, FREE)])


def index_fill(f) -> IndexFill:
    """The file's fill from its header, bounded by what the file can hold: IndexFile.putKey
    writes entries 1 .. maxIndexNum-1 and stops at indexCount == maxIndexNum, so a larger
    indexCount is a forged header, not a fuller file (it once printed 536870911.5%)."""
    h = f.header
    entries = min(max(0, h.indexCount - 1), max(0, f.index_num - 1))
    return IndexFill(f.name, f.slot_num, f.index_num, entries, int(np.count_nonzero(f.slots)),
                     h.hashSlotCount, h.beginTimestamp, h.endTimestamp, h.beginPhyOffset, h.endPhyOffset,
                     h.indexCount)


@dataclass
class StoreFill:
    commitlog: list[CommitLogFileFill]
    queues: list[QueueFileFill]
    index: list[IndexFill]
    topics: list[str] = field(default_factory=list)   # every topic seen, sorted (colour order)


@dataclass
class FillProgress(Progress):
    """A Progress carrying the fill so far (`fill`: every ConsumeQueue and index file, and the
    commitlog files completed), so a view draws each file as it completes."""
    fill: StoreFill | None = None


def store_fill_task(store, cache: CommitLogFillCache | None = None,
                    cancel: CancelToken | None = None) -> Task[StoreFill]:
    """The whole store's fill. The ConsumeQueue and index files first (their units and
    headers: quick), then the commitlog file by file; a FillProgress with the fill so far
    after each file, plain Progress while a file's records are read one by one."""
    units = QueueUnits(store)          # every CQ unit, read once: the queue fill and the commitlog's
    qf = queue_file_fill(store, units)
    ix = [index_fill(f) for f in store.index.files]
    if cancel is not None:
        cancel.raise_if_cancelled()
    known = {q.topic for q in qf}
    total = sum(f.wrote_position for f in store.commitlog.files)
    cl: list[CommitLogFileFill] = []

    def so_far() -> StoreFill:
        return StoreFill(list(cl), qf, ix, sorted(known | {t for c in cl for t in c.topics}))
    yield FillProgress(0, total, "commitlog fill", "bytes", "ConsumeQueue and index files", fill=so_far())
    walk = commitlog_fill_task(store, cache, cancel, done_files=cl, units=units)
    seen = 0
    while True:
        try:
            p = next(walk)
        except StopIteration:
            break
        if len(cl) > seen:     # a file completed: hand out the fill so far
            seen = len(cl)
            yield FillProgress(p.done, p.total, p.phase, p.unit, p.message, fill=so_far())
        else:
            yield p
    return so_far()


def store_fill(store, cache: CommitLogFillCache | None = None, cancel: CancelToken | None = None) -> StoreFill:
    return run(store_fill_task(store, cache, cancel))
