"""What the store-internals views show, computed with numpy and no Qt (testable alone).

Four pictures, one section each:

* segment fill  - per file: which byte ranges (commitlog), units (ConsumeQueue) or entries and
                  slots (index) are used, as run-length segments ``[start, end) -> category``;
* queue series  - one ConsumeQueue as columns (phyOffset, size, tagsCode, store time) over
                  queue offsets, store times gathered from the commitlog maps in one numpy pass;
* slot occupancy - chain length per slot, binned to a pixel budget, and its histogram next to
                  the Poisson law a uniform hash gives at the same load (entries / slots);
* collision chains - one slot's chain resolved to messages and real "topic#key" strings.

Categories of a segment: ``>= 0`` index into the file's ``topics`` list, or one of the
negative constants below. Everything here is read-only and safe to run on a worker thread."""
from __future__ import annotations

import math
import os
import struct
import threading
from dataclasses import dataclass, field

import numpy as np

from engine.config import CQ_UNIT_SIZE
from engine.store.consume_queue import FILLER_SIZE
from engine.store.index_file import ChainStep, IndexFile
from engine.format.javahash import index_key_hash
from engine.format.message import (BLANK_MAGIC, BORNHOST_V6_FLAG, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, SCHEDULE_TOPIC,
                            STOREHOST_V6_FLAG, DecodeOptions, RecordStatus, check_record)

# ---- segment categories -------------------------------------------------------------------
BLANK = -1      # commitlog: END_OF_FILE blank record and the zeros after it
FREE = -2       # not written yet (past the write position)
DAMAGED = -3    # bytes that are not a readable record (torn, bad magic, size mismatch)
FILLER = -4     # ConsumeQueue pre-blank filler unit (0, 0x7FFFFFFF, 0)
USED = -5       # used, without a topic (index entries / slots)
RESERVED = -6   # index entry #0, never used
SLOTS = -7      # index slots in use
CATEGORY_NAMES = {BLANK: "blank tail", FREE: "unwritten", DAMAGED: "damaged", FILLER: "filler units",
                  USED: "index entries used", RESERVED: "reserved entry #0", SLOTS: "index slots used"}

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
_MAGICS = (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2)


@dataclass
class Segments:
    """Run-length ranges over one file: ``[starts[i], ends[i]) -> ids[i]`` covering [0, size)."""
    starts: np.ndarray   # int64
    ends: np.ndarray     # int64
    ids: np.ndarray      # int32 category

    @classmethod
    def from_runs(cls, runs: list[tuple[int, int, int]]) -> "Segments":
        runs = [r for r in runs if r[1] > r[0]]
        a = np.array(runs, dtype=np.int64).reshape(-1, 3)
        return cls(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].astype(np.int32))

    def __len__(self) -> int:
        return len(self.starts)

    def at(self, pos: int) -> int:
        """Index of the segment holding `pos`, or -1."""
        i = int(np.searchsorted(self.starts, pos, side="right")) - 1
        return i if 0 <= i < len(self.starts) and pos < self.ends[i] else -1

    def bytes_by_id(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for i, n in zip(self.ids.tolist(), (self.ends - self.starts).tolist()):
            out[i] = out.get(i, 0) + n
        return out

    def sample(self, x0: float, x1: float, n: int) -> np.ndarray:
        """Category of each of `n` equal bins over [x0, x1): the one at the bin's centre,
        except that a bin holding any data bytes (a topic or DAMAGED) shows data, so a
        record smaller than a pixel still shows (like peak downsampling). FREE outside."""
        if n <= 0:
            return np.empty(0, dtype=np.int32)
        w = (x1 - x0) / n
        centres = x0 + (np.arange(n, dtype=np.float64) + 0.5) * w
        out = self._at(centres)
        data = (self.ids >= 0) | (self.ids == DAMAGED)
        if data.any():
            ds, de, dc = self.starts[data], self.ends[data], self.ids[data]
            cum = np.concatenate(([0], np.cumsum(de - ds)))
            edges = x0 + np.arange(n + 1, dtype=np.float64) * w

            def before(x):  # data bytes below x
                k = np.searchsorted(ds, x, side="left")
                over = np.where(k > 0, np.maximum(0.0, de[np.maximum(k - 1, 0)] - x), 0.0)
                return cum[k] - over
            F = before(edges)
            has = (F[1:] - F[:-1]) > 0
            fix = has & ~((out >= 0) | (out == DAMAGED))
            if fix.any():
                k = np.searchsorted(ds, edges[1:][fix], side="left") - 1
                out[fix] = dc[np.maximum(k, 0)]
        return out

    def _at(self, x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.starts, x, side="right") - 1
        out = np.full(len(x), FREE, dtype=np.int32)
        ok = i >= 0
        ok[ok] = x[ok] < self.ends[i[ok]]
        out[ok] = self.ids[i[ok]]
        return out

    def used_extent(self) -> int:
        """End of the last segment that is not FREE (0 if none)."""
        used = np.flatnonzero(self.ids != FREE)
        return int(self.ends[used[-1]]) if used.size else 0


def run_length(values: np.ndarray, offset: int = 0) -> list[tuple[int, int, int]]:
    """Runs of equal values as (start, end, value), positions shifted by `offset`."""
    if len(values) == 0:
        return []
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [len(values)]))
    return [(int(s) + offset, int(e) + offset, int(values[s])) for s, e in zip(starts, ends)]


# ---- commitlog segment fill -------------------------------------------------------------
@dataclass
class CommitLogFileFill:
    """One commitlog file walked record by record (once; see CommitLogFillCache)."""
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
        i = int(np.searchsorted(self.record_starts, pos, side="right")) - 1
        if i < 0 or pos >= self.record_starts[i] + self.record_sizes[i] or self.record_topics[i] < 0:
            return None
        return int(self.record_starts[i])


def walk_commitlog_file(f, opts: DecodeOptions | None = None) -> CommitLogFileFill:
    """Walk one MappedFile's records up to its write position, reading only the header
    fields needed (size, magic, hosts, body length, topic); anything unusual is handed to
    the engine's `check_record` so classification matches CommitLog.walk."""
    opts = opts or DecodeOptions()
    buf, limit, base = f.buf, f.wrote_position, f.file_from_offset
    topic_ids: dict[bytes, int] = {}
    topics: list[str] = []
    starts: list[int] = []
    sizes: list[int] = []
    cats: list[int] = []
    pos, blank_at, stop = 0, None, "end of written data"
    unpack32, unpack64 = _I32.unpack_from, _I64.unpack_from
    while pos < limit:
        remaining = limit - pos
        if remaining >= 8:
            total, magic = unpack32(buf, pos)[0], unpack32(buf, pos + 4)[0]
            if magic == BLANK_MAGIC:
                blank_at, stop = pos, "end-of-file blank record"
                break
            if magic in _MAGICS and 0 < total <= remaining:
                topic = _fast_topic(buf, pos, total, magic)
                if topic is not None and topic != SCHEDULE_TOPIC_B:
                    tid = topic_ids.get(topic)
                    if tid is None:
                        tid = topic_ids[topic] = len(topics)
                        topics.append(topic.decode("utf-8", "replace"))
                    starts.append(pos), sizes.append(total), cats.append(tid)
                    pos += total
                    continue
        r = check_record(buf, pos, limit, base + pos, opts)
        if r.status is RecordStatus.MESSAGE:
            key = r.message.topic.encode("utf-8")
            tid = topic_ids.get(key)
            if tid is None:
                tid = topic_ids[key] = len(topics)
                topics.append(r.message.topic)
            starts.append(pos), sizes.append(r.size), cats.append(tid)
            pos += r.size
        elif r.status is RecordStatus.SIZE_MISMATCH and r.size > 0:
            starts.append(pos), sizes.append(r.size), cats.append(DAMAGED)
            pos += r.size
        elif r.status is RecordStatus.END_OF_FILE:
            blank_at, stop = pos, "end-of-file blank record"
            break
        else:
            stop = f"{r.status.value}: {r.reason}"
            break
    data_end = pos
    rs = np.array(starts, dtype=np.int64)
    rz = np.array(sizes, dtype=np.int32)
    rc = np.array(cats, dtype=np.int32)
    runs = _record_runs(rs, rz, rc)
    if blank_at is not None:
        runs.append((blank_at, f.file_size, BLANK))
    else:
        runs.append((data_end, limit, DAMAGED))
        runs.append((max(data_end, limit), f.file_size, FREE))
    return CommitLogFileFill(f.path.name, base, f.file_size, f.wrote_position, topics, rs, rz, rc,
                             Segments.from_runs(runs), data_end, blank_at, stop)


SCHEDULE_TOPIC_B = SCHEDULE_TOPIC.encode()  # DELAY is validated by check_record: take the slow path


def _fast_topic(buf, pos: int, total: int, magic: int) -> bytes | None:
    """Topic bytes of the record at `pos` when its fields add up to TOTALSIZE, else None."""
    try:
        sysflag = _I32.unpack_from(buf, pos + 36)[0]
        bh = 20 if sysflag & BORNHOST_V6_FLAG else 8
        sh = 20 if sysflag & STOREHOST_V6_FLAG else 8
        p = pos + 48 + bh + 8 + sh + 12
        body = _I32.unpack_from(buf, p)[0]
        p += 4 + max(body, 0)
        if magic == MESSAGE_MAGIC_V1:
            tls, tlen = 1, _I8.unpack_from(buf, p)[0]
        else:
            tls, tlen = 2, _I16.unpack_from(buf, p)[0]
        p += tls
        end = pos + total
        if tlen < 0 or p + tlen + 2 > end:
            return None
        plen = _I16.unpack_from(buf, p + tlen)[0]
        if 74 + bh + sh + max(body, 0) + tls + tlen + max(plen, 0) != total:
            return None
        return bytes(buf[p:p + tlen])
    except struct.error:
        return None


def _record_runs(starts: np.ndarray, sizes: np.ndarray, cats: np.ndarray) -> list[tuple[int, int, int]]:
    """Merge consecutive records of one category into (start, end, category) runs."""
    if len(starts) == 0:
        return []
    ends = starts + sizes
    brk = np.flatnonzero((cats[1:] != cats[:-1]) | (starts[1:] != ends[:-1])) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk, [len(starts)])) - 1
    return [(int(starts[a]), int(ends[b]), int(cats[a])) for a, b in zip(first, last)]


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

    def get(self, f, opts: DecodeOptions | None = None) -> CommitLogFileFill:
        k = self.key(f)
        with self._lock:
            hit = self._data.get(k)
        if hit is not None:
            return hit
        fill = walk_commitlog_file(f, opts)
        with self._lock:
            self._data[k] = fill
        return fill

    def __len__(self) -> int:
        return len(self._data)


def commitlog_fill(store, cache: CommitLogFillCache | None = None, cancel=None) -> list[CommitLogFileFill]:
    cache = CommitLogFillCache() if cache is None else cache
    out = []
    for f in store.commitlog.files:
        if cancel is not None and cancel():
            break
        out.append(cache.get(f, store.commitlog.read_opts))
    return out


# ---- ConsumeQueue and index fill ----------------------------------------------------------
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


def queue_file_fill(store) -> list[QueueFileFill]:
    """Every ConsumeQueue file of every queue, queues in (topic, queueId) order."""
    out = []
    for (topic, qid), cq in sorted(store.queues.items()):
        for f in cq.queue.files:
            u = cq.view(f)
            n = min(f.wrote_position // CQ_UNIT_SIZE, len(u))
            phy, size = u["phyOffset"][:n], u["size"][:n]
            filler = (phy == 0) & (size == FILLER_SIZE)
            valid = (phy >= 0) & (size > 0) & ~filler
            cat = np.where(filler, FILLER, np.where(valid, 0, DAMAGED)).astype(np.int32)
            runs = run_length(cat)
            runs.append((n, cq.units_per_file, FREE))
            out.append(QueueFileFill(topic, qid, f.path.name, f.file_from_offset, cq.units_per_file, n,
                                     int(np.count_nonzero(valid)), int(np.count_nonzero(filler)),
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


def index_fill(f: IndexFile) -> IndexFill:
    h = f.header
    return IndexFill(f.name, f.slot_num, f.index_num, max(0, h.indexCount - 1), int(np.count_nonzero(f.slots)),
                     h.hashSlotCount, h.beginTimestamp, h.endTimestamp, h.beginPhyOffset, h.endPhyOffset)


@dataclass
class StoreFill:
    commitlog: list[CommitLogFileFill]
    queues: list[QueueFileFill]
    index: list[IndexFill]
    topics: list[str] = field(default_factory=list)   # every topic seen, sorted (colour order)


def store_fill(store, cache: CommitLogFillCache | None = None, cancel=None) -> StoreFill:
    cl = commitlog_fill(store, cache, cancel)
    qf = queue_file_fill(store)
    ix = [index_fill(f) for f in store.index.files]
    topics = sorted({t for c in cl for t in c.topics} | {q.topic for q in qf})
    return StoreFill(cl, qf, ix, topics)


# ---- ConsumeQueue series --------------------------------------------------------------------
@dataclass
class QueueSeries:
    topic: str
    queue_id: int
    queue_offsets: np.ndarray   # int64
    phy_offsets: np.ndarray     # int64
    sizes: np.ndarray           # int32 (as stored; fillers are 0x7FFFFFFF)
    tags_codes: np.ndarray      # int64
    store_times: np.ndarray     # int64 ms, -1 where the record cannot be read (filler, expired)
    fillers: np.ndarray         # bool

    def __len__(self) -> int:
        return len(self.queue_offsets)


def queue_series(store, topic: str, queue_id: int) -> QueueSeries:
    cq = store.find_queue(topic, queue_id)
    if cq is None:
        z = np.empty(0, dtype=np.int64)
        return QueueSeries(topic, queue_id, z, z, z.astype(np.int32), z, z, z.astype(bool))
    lo, hi = cq.min_offset, cq.max_offset
    u = cq.units(lo, hi)
    phy = u["phyOffset"].astype(np.int64)
    size = u["size"].astype(np.int32)
    tags = u["tagsCode"].astype(np.int64)
    fillers = (phy == 0) & (size == FILLER_SIZE)
    times = store_times(store.commitlog, phy, size, ~fillers)
    qoff = np.arange(lo, lo + len(u), dtype=np.int64)
    return QueueSeries(topic, queue_id, qoff, phy, size, tags, times, fillers)


def store_times(commitlog, phy: np.ndarray, size: np.ndarray, mask: np.ndarray | None = None,
                chunk: int = 1 << 20) -> np.ndarray:
    """STORETIMESTAMP of the records at `phy` (vectorised gather from the file maps), -1
    where no record of that size fits inside the written part of a live file."""
    out = np.full(len(phy), -1, dtype=np.int64)
    files = commitlog.files
    if not files or len(phy) == 0:
        return out
    starts = np.array([f.file_from_offset for f in files], dtype=np.int64)
    which = np.searchsorted(starts, phy, side="right") - 1
    ok = (which >= 0) & (phy >= commitlog.min_offset) & (size > 0) & (size != FILLER_SIZE)
    if mask is not None:
        ok &= mask
    eight = np.arange(8, dtype=np.int64)
    for fi in np.unique(which[ok]):
        f = files[int(fi)]
        sel = np.flatnonzero(ok & (which == fi))
        pos = phy[sel] - f.file_from_offset
        fits = (pos >= 0) & (pos + size[sel] <= f.wrote_position) & (size[sel] >= 80)
        sel, pos = sel[fits], pos[fits]
        mem = np.frombuffer(f.buf, dtype=np.uint8)
        for a in range(0, len(sel), chunk):
            p = pos[a:a + chunk]
            sysflag = mem[(p + 36)[:, None] + eight[:4]].copy().view(">i4").ravel()
            at = p + np.where(sysflag & BORNHOST_V6_FLAG, 68, 56)
            out[sel[a:a + chunk]] = mem[at[:, None] + eight].copy().view(">i8").ravel()
    return out


# ---- slot occupancy -------------------------------------------------------------------------
def _accel():
    """The compiled kernels (engine/accel/_index.pyx), or None: not built, or
    RMQSTORE_PURE_PYTHON=1. Looked up per call so tests can switch it off."""
    from engine.accel import load
    return load("_index")


def chain_census(f: IndexFile, accel: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(lengths, counts): chain length of every slot (int32, see chain_lengths) and how many
    slots have each length (int64, np.bincount of lengths).

    Compiled: one sequential pass over the used entries' prevIndex straight from the map
    (an intact file only links an entry to an older one, so len[e] = 1 + len[prev[e]] is
    known in entry order), then one pass over the slot table that gathers each slot's head
    and counts the histogram. Damaged files (forward links, cycles) are resolved in C with
    the same semantics as the numpy walk below."""
    k = _accel() if accel else None
    if k is not None and f.file.mm is not None:
        return k.chain_lengths(f.file.mm, f.slot_num, f.index_num, f.header.indexCount)
    lengths = chain_lengths_numpy(f)
    return lengths, np.bincount(lengths, minlength=1).astype(np.int64)


def chain_lengths(f: IndexFile, accel: bool = True) -> np.ndarray:
    """Chain length of every slot: how many entries select() meets walking from the slot
    through prevIndex links. Links that leave 1..indexCount end a chain (like the engine);
    a link back to an entry already met (a cycle in a damaged file) ends it too, so the
    length counts distinct entries, as IndexFile.chain does."""
    return chain_census(f, accel)[0]


def chain_lengths_numpy(f: IndexFile) -> np.ndarray:
    """chain_lengths in numpy (the reference, and the path without the compiled kernel).

    Vectorised over slots on a native copy of the prevIndex column, one gather per chain
    step. Intact files only link to older entries (prev < n), which cannot cycle; the few
    slots that take a forward link (damage) are walked one by one with IndexFile.chain,
    which counts distinct entries up to a cycle (the engine's own chain_lengths would count
    a cycle up to indexCount steps instead)."""
    count = f.header.indexCount
    limit = max(1, min(count + 1, f.index_num))       # valid entry numbers: 1 .. limit-1
    prev = f.entries["prevIndex"][:limit].astype(np.int32)
    heads = f.slots.astype(np.int32)
    lengths = np.zeros(len(heads), dtype=np.int32)
    alive = np.flatnonzero((heads > 0) & (heads < limit))
    cur = heads[alive]
    slow: list[np.ndarray] = []
    step = 0
    while alive.size:
        step += 1
        nxt = prev[cur]
        go_on = (nxt > 0) & (nxt < limit)
        fwd = go_on & (nxt >= cur)
        if fwd.any():
            slow.append(alive[fwd])
            go_on &= ~fwd
        ends = ~go_on
        lengths[alive[ends]] = step
        alive, cur = alive[go_on], nxt[go_on]
    for s in (np.concatenate(slow) if slow else ()):
        lengths[s] = len(f.chain(int(s)))
    return lengths


@dataclass
class ChainHistogram:
    lengths: np.ndarray     # 0 .. kmax
    observed: np.ndarray    # slots with that chain length (int64)
    expected: np.ndarray    # Poisson(load) * slots (float64)
    load: float             # entries / slots
    slots: int
    entries: int

    def rows(self) -> list[tuple[int, int, float]]:
        return [(int(k), int(o), float(e)) for k, o, e in zip(self.lengths, self.observed, self.expected)]


def poisson_expected(slots: int, load: float, kmax: int) -> np.ndarray:
    """slots * P(K = k) for K ~ Poisson(load), k = 0..kmax (recurrence, no factorials)."""
    p = np.empty(kmax + 1, dtype=np.float64)
    p[0] = math.exp(-load)
    for k in range(1, kmax + 1):
        p[k] = p[k - 1] * load / k
    return p * slots


def chain_histogram(lengths: np.ndarray, entries: int, counts: np.ndarray | None = None) -> ChainHistogram:
    """Observed chain lengths against Poisson; `counts` (from chain_census) saves the bincount."""
    slots = len(lengths)
    observed = (np.bincount(lengths, minlength=1) if counts is None else np.asarray(counts)).astype(np.int64)
    load = entries / slots if slots else 0.0
    # show the law's tail too, until it expects less than half a slot
    kmax = len(observed) - 1
    exp = poisson_expected(slots, load, kmax + 64)
    above = np.flatnonzero(exp >= 0.5)
    kmax = max(kmax, int(above[-1]) if above.size else 0)
    observed = np.pad(observed, (0, kmax + 1 - len(observed)))
    return ChainHistogram(np.arange(kmax + 1), observed, exp[:kmax + 1], load, slots, entries)


@dataclass
class SlotHeatmap:
    image: np.ndarray        # (rows, cols) float32, NaN past the last slot; row-major
    slots_per_bin: int
    bins: int
    how: str                 # "max" or "mean" chain length, or "used" slots (occupancy)
    top: float = 1.0         # colour scale maximum (>= 1): the largest value, `slots_per_bin` for "used"
    indices: np.ndarray | None = None   # heat_indices(self), when the binning made it on the way
    nonzero_bins: int = -1   # bins with a value > 0, when known (-1: count them)

    @property
    def shape(self) -> tuple[int, int]:
        return self.image.shape

    def slot_range(self, row: int, col: int) -> tuple[int, int] | None:
        b = row * self.image.shape[1] + col
        if not (0 <= row < self.image.shape[0] and 0 <= col < self.image.shape[1]) or b >= self.bins:
            return None
        return b * self.slots_per_bin, (b + 1) * self.slots_per_bin


def heatmap_layout(n: int, width: int, height: int) -> tuple[int, int, int, int]:
    """(slots per bin, bins, rows, cols) for `n` slots in at most width x height pixels,
    with an aspect near width:height."""
    width, height = max(1, width), max(1, height)
    bins = max(1, min(width * height, n))
    per = max(1, -(-n // bins))
    nb = max(1, -(-n // per))
    cols = max(1, min(width, nb, math.ceil(math.sqrt(nb * width / height))))
    rows = -(-nb // cols)
    return per, nb, rows, cols


def bin_slots(lengths: np.ndarray, bins: int, how: str = "max") -> tuple[np.ndarray, int]:
    """Chain lengths reduced to at most `bins` equal bins of consecutive slots (reshape, with
    the last bin padded): (values float32, slots per bin). numpy; slot_heatmap uses the
    compiled loop when it can."""
    n = len(lengths)
    bins = max(1, min(bins, n))
    per = -(-n // bins)
    nb = -(-n // per)
    pad = nb * per - n
    a = lengths if pad == 0 else np.concatenate((lengths, np.zeros(pad, dtype=lengths.dtype)))
    a = a.reshape(nb, per)
    if how == "max":
        v = a.max(axis=1).astype(np.float32)
    elif how == "mean":
        counts = np.full(nb, per, dtype=np.float64)
        counts[-1] = per - pad
        v = (a.sum(axis=1, dtype=np.int64) / counts).astype(np.float32)
    else:
        raise ValueError(f"unknown reduction {how!r}")
    return v, per


def _new_image(nb: int, rows: int, cols: int) -> np.ndarray:
    img = np.empty(rows * cols, dtype=np.float32)
    img[nb:] = np.nan
    return img


def slot_heatmap(lengths: np.ndarray, width: int, height: int, how: str = "max", accel: bool = True) -> SlotHeatmap:
    """Every slot binned to at most width x height pixels, laid out row-major with an aspect
    near width:height (slot numbers increase left to right, then down)."""
    if how not in ("max", "mean"):
        raise ValueError(f"unknown reduction {how!r}")
    n = len(lengths)
    if n == 0:
        return SlotHeatmap(np.full((1, 1), np.nan, dtype=np.float32), 1, 0, how)
    per, nb, rows, cols = heatmap_layout(n, width, height)
    img = _new_image(nb, rows, cols)
    k = _accel() if accel else None
    if k is not None and lengths.dtype == np.int32 and lengths.flags.c_contiguous:
        k.bin_lengths(lengths, per, nb, img, how == "max")     # straight into the image, no temporaries
    else:
        img[:nb] = bin_slots(lengths, nb, how)[0]
    top = max(1.0, float(img[:nb].max()))
    return SlotHeatmap(img.reshape(rows, cols), per, nb, how, top)


def slot_occupancy(f: IndexFile, width: int, height: int, accel: bool = True) -> SlotHeatmap:
    """How many slots of each pixel's bin are in use (non-zero): the slot table alone, no
    entry is read (chain lengths need every used entry, see chain_census). Same layout as
    slot_heatmap, how = "used", colour scale 0 .. slots per bin."""
    n = f.slot_num
    if n == 0:
        return SlotHeatmap(np.full((1, 1), np.nan, dtype=np.float32), 1, 0, "used")
    per, nb, rows, cols = heatmap_layout(n, width, height)
    img = _new_image(nb, rows, cols)
    k = _accel() if accel else None
    if k is not None and f.file.mm is not None:
        idx = np.empty(rows * cols, dtype=np.uint8)
        _, nonzero = k.slot_occupancy(f.file.mm, n, per, nb, img, idx)
        return SlotHeatmap(img.reshape(rows, cols), per, nb, "used", float(per), idx.reshape(rows, cols), nonzero)
    else:
        used = f.slots != 0
        pad = nb * per - n
        if pad:
            used = np.concatenate((used, np.zeros(pad, dtype=bool)))
        img[:nb] = used.reshape(nb, per).sum(axis=1, dtype=np.int32)
    return SlotHeatmap(img.reshape(rows, cols), per, nb, "used", float(per))


NAN_INDEX = 255   # heat_indices: the colour index of "no slot here" (past the last bin)


def heat_indices(heat: SlotHeatmap, accel: bool = True) -> np.ndarray:
    """The heat map as an 8-bit indexed image (rows, cols): value v -> round(v / top * 254)
    clipped to 0..254, NAN_INDEX past the last bin. A view shows it with a 256-entry colour
    table as is (no per-pixel float scaling or NaN scan at paint time)."""
    if heat.indices is not None:
        return heat.indices
    flat = heat.image.ravel()
    out = np.empty(flat.size, dtype=np.uint8)
    k = _accel() if accel else None
    if k is not None and flat.dtype == np.float32 and flat.flags.c_contiguous:
        k.to_indices(flat, heat.bins, heat.top, out)
    else:
        nb = heat.bins
        v = flat[:nb].astype(np.float32) * np.float32(254.0 / heat.top if heat.top > 0 else 0.0) + np.float32(0.5)
        out[:nb] = np.clip(np.nan_to_num(v, nan=0.0), 0, 254).astype(np.uint8)
        out[nb:] = NAN_INDEX
    return out.reshape(heat.image.shape)


@dataclass
class SlotStats:
    slots: int
    entries: int
    used_slots: int
    load: float
    longest: list[tuple[int, int]]      # (slot, chain length), longest first
    mean_used: float                    # mean chain length over used slots
    reachable: int                      # entries met walking every chain
    expected_used: float                # slots * (1 - e^-load)


def slot_stats(lengths: np.ndarray, entries: int, top: int = 5, counts: np.ndarray | None = None) -> SlotStats:
    """Used slots, entries reached and the `top` longest chains (longest first, lower slot
    first on ties). `counts` (the histogram, from chain_census) spares the passes over every
    slot: the longest chains are looked for only above the length the histogram says holds
    the top ones."""
    slots = len(lengths)
    if counts is None:
        counts = np.bincount(lengths, minlength=1)
    counts = np.asarray(counts, dtype=np.int64)
    used = slots - int(counts[0]) if slots else 0
    reach = int(np.dot(np.arange(len(counts), dtype=np.int64), counts))
    top = min(top, used)
    longest: list[tuple[int, int]] = []
    if top > 0:
        above = np.cumsum(counts[::-1])[::-1]          # above[k]: slots with length >= k
        t = max(1, int(np.flatnonzero(above >= top)[-1]))
        gt = np.flatnonzero(lengths > t)                # fewer than `top` of them
        eq = np.flatnonzero(lengths == t)[:top - len(gt)]
        idx = np.concatenate((gt, eq))
        idx = idx[np.lexsort((idx, -lengths[idx].astype(np.int64)))][:top]
        longest = [(int(i), int(lengths[i])) for i in idx]
    load = entries / slots if slots else 0.0
    return SlotStats(slots, entries, used, load, longest, reach / used if used else 0.0, reach,
                     slots * (1 - math.exp(-load)))


def longest_slot_in(lengths: np.ndarray, lo: int, hi: int) -> int:
    """The slot with the longest chain in [lo, hi) (the first one on ties)."""
    hi = min(hi, len(lengths))
    return lo + int(np.argmax(lengths[lo:hi])) if hi > lo else lo


# ---- collision chains -----------------------------------------------------------------------
MATCH = "match"             # the query's key: a query returns it and it is that key
COLLISION = "collision"     # same keyHash as another key: a hash-only query cannot tell them apart
SAME_KEY = "same-key"       # same keyHash and the same key as another entry (a key used again)
SHARES_SLOT = "shares-slot"  # different keyHash, only the slot is shared
UNRESOLVED = "unresolved"   # no message there, or none of its keys hashes to keyHash


@dataclass
class ResolvedEntry:
    step: ChainStep
    position: int                  # 0 = head of the chain (newest)
    topic: str | None              # of the message at phyOffset
    queue_id: int | None
    queue_offset: int | None
    store_timestamp: int | None
    keys: list[str]                # "topic#key" strings of that message whose hash == keyHash
    kind: str = SHARES_SLOT
    query_hit: bool = False        # select() for the query key returns this entry
    hash_group: int = -1           # entries with equal keyHash share a group number (>= 0 if 2+)

    @property
    def label(self) -> str:
        return " | ".join(self.keys) if self.keys else "(key not found)"


@dataclass
class ChainResolution:
    file_name: str
    slot: int
    head: int                      # the slot's value: newest entry number (0 = empty)
    entries: list[ResolvedEntry]
    stop: str                      # why the walk ended
    broken: bool                   # a link points outside the file's entries
    cycle_to: int | None           # entry number a cycle links back to
    query: str | None = None
    query_hash: int | None = None

    @property
    def matches(self) -> list[ResolvedEntry]:
        return [e for e in self.entries if e.kind == MATCH]

    @property
    def hits(self) -> list[ResolvedEntry]:
        return [e for e in self.entries if e.query_hit]


def resolve_chain(f: IndexFile, slot: int | None = None, key: str | None = None, get_message=None,
                  limit: int = 1000) -> ChainResolution:
    """Walk a slot's chain (or the slot of "topic#key") and resolve each entry.

    `get_message(phyOffset)` returns an engine Message or None. With a key, entries are
    `query_hit` when IndexFile.select(key, ...) over all time would return them; of those,
    MATCH when the message really carries the key, COLLISION otherwise."""
    qhash = index_key_hash(key) if key is not None else None
    if slot is None:
        if key is None:
            raise ValueError("give a slot or a key")
        slot = qhash % f.slot_num
    if not 0 <= slot < f.slot_num:
        raise ValueError(f"slot {slot} is outside 0..{f.slot_num - 1}")
    head = int(f.slots[slot])
    count = f.header.indexCount
    steps = f.chain(slot, limit=limit) if head > 0 else []
    if head <= 0:
        stop = "empty slot"
    elif not steps:
        stop = f"slot points to entry {head} beyond indexCount {count}"
    else:
        stop = steps[-1].stop or "end of chain"
    broken = "beyond" in stop
    cycle_to = int(stop.rsplit(" ", 1)[1]) if stop.startswith("cycle back to entry") else None
    out: list[ResolvedEntry] = []
    for i, s in enumerate(steps):
        m = get_message(s.phyOffset) if get_message is not None else None
        keys: list[str] = []
        if m is not None:
            cands = ([m.uniqKey] if m.uniqKey else []) + list(m.key_list)
            for k in cands:
                ks = f"{m.topic}#{k}"
                if ks not in keys and index_key_hash(ks) == s.keyHash:
                    keys.append(ks)
        out.append(ResolvedEntry(s, i, m.topic if m else None, m.queueId if m else None,
                                 m.queueOffset if m else None, m.storeTimestamp if m else None, keys))
    # groups of equal keyHash; a group whose entries carry different keys is a true collision
    by_hash: dict[int, list[ResolvedEntry]] = {}
    for e in out:
        by_hash.setdefault(e.step.keyHash, []).append(e)
    gid = 0
    for h, group in by_hash.items():
        if len(group) < 2 and h != qhash:
            continue
        if len(group) >= 2:
            for e in group:
                e.hash_group = gid
            gid += 1
        keysets = {tuple(e.keys) for e in group if e.keys}
        for e in group:
            if len(keysets) > 1:
                e.kind = COLLISION
            elif len(group) >= 2:
                e.kind = SAME_KEY
    # what a query for `key` would match: select() over all time walks until timeDiff < 0
    if key is not None:
        alive = True
        for e in out:
            if e.step.timeDiff < 0:
                alive = False
            e.query_hit = alive and e.step.keyHash == qhash
            if e.step.keyHash == qhash:
                e.kind = MATCH if key in e.keys else COLLISION
    for e in out:
        if not e.keys:
            e.kind = UNRESOLVED
    return ChainResolution(f.name, slot, head, out, stop, broken, cycle_to, key, qhash)
