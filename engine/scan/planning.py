"""Partitions of a bulk scan: small picklable descriptions, computed once from an open store.

- `CommitLogSlice`: records whose start lies in [start, end) of one commitlog file whose
  readable data ends at `limit` (never past the store's recovered max offset). A file is one
  slice, or several when it is large: split points are real record starts, found cheaply
  from the ConsumeQueues (every dispatched record is a CQ unit; a candidate is accepted only
  if a V1/V2 header stands there whose stored PHYSICALOFFSET is that very offset) and, where
  the CQs give nothing, by a size-hop pre-pass that reads 8 bytes per record.
- `CQSlice`: units [unit_start, unit_end) of one ConsumeQueue file (positions as units).
- `IndexSlice`: entries [first, last) of one index file.

A whole plan serialises to JSON (`plan_to_json`) so a driver that has the store open can hand
it to Spark as an option instead of every planner re-running recovery."""
from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import asdict, dataclass, field
from functools import singledispatch

import numpy as np

from engine.config import CQ_UNIT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from engine.store.consume_queue import FILLER_SIZE
from engine.store.crash_view import disk_index
from engine.store.rocksdb_cq import RocksDBConsumeQueue
from engine.format.message import MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, peek_physical_offset
from engine.format.record import OFF_PHYSICALOFFSET
from engine.scan.columns import hop
from engine.scan.tier_source import sources_of, tier_pieces

DEFAULT_SPLIT_BYTES = 64 << 20     # a commitlog slice is at most this big ...
MIN_SPLIT_BYTES = 1 << 20          # ... and a file is not split into pieces smaller than this
MAX_HINTS_PER_SLICE = 4096         # more CQ ranges than this: the slice is hopped without them
MAX_PARTITION_BYTES = 512 << 20    # packed commitlog slices per Spark task, at most
CQ_UNITS_PER_PARTITION = 1 << 20
INDEX_ENTRIES_PER_PARTITION = 1 << 20
_HDR = struct.Struct(">ii")


@dataclass(frozen=True)
class CommitLogSlice:
    path: str
    file_from_offset: int
    file_size: int
    start: int        # position in the file of the first record
    end: int          # records starting at or after this position belong to the next slice
    limit: int        # readable end of the file (recovered write position / store max offset)
    # known record starts to speed the hop up: (CQ file path, first unit, end unit) ranges
    # whose units point into [start, end) of this file
    hints: tuple = ()
    # DLedger data file: every record is the body of an entry with a header of this many
    # bytes; start/end are entry positions (engine.format.dledger_layout.hop_entries)
    entry_header: int = 0
    # cut at a byte position without reading (a file on a remote filesystem): the slice's first
    # record is the first one found at or after `start` (engine.scan.ranges.sync_start)
    sync: bool = False

    @property
    def nbytes(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class CQSlice:
    topic: str
    queue_id: int
    path: str
    rel_path: str     # consumequeue/<topic>/<queueId>/<name>
    file_from: int    # byte position of the file's first unit (= queue offset * 20)
    file_size: int
    unit_start: int   # unit numbers inside the file
    unit_end: int
    kind: str = "file"  # "rocksdb": queue offsets [file_from / 20 + unit_start, + unit_end) of a queue in RocksDB at `path`
    probe_end: bool = False  # a file whose written end the reader finds (a store read through a filesystem)


@dataclass(frozen=True)
class IndexSlice:
    path: str
    name: str
    file_size: int
    slot_num: int
    index_num: int
    begin_timestamp: int
    first: int        # entry numbers [first, last); entry 0 is never used
    last: int


@dataclass
class Plan:
    root: str
    commitlog: list[CommitLogSlice] = field(default_factory=list)
    min_offset: int = 0
    max_offset: int = 0
    delay_level_millis: list[int] = field(default_factory=list)
    split_bytes: int = DEFAULT_SPLIT_BYTES
    broker: str = ""      # the store's broker name (engine.scan.stores), for the `broker` column


# ---- commitlog ----------------------------------------------------------------------------
def plan_commitlog(store, split_bytes: int | None = None, min_partitions: int = 1,
                   use_cq: bool = True, hop_hints: bool = True) -> Plan:
    """Slices covering every record of [store.min_offset, store.max_offset).

    use_cq: find split points from the ConsumeQueues (else by hopping); hop_hints: give
    each slice the CQ ranges that name its records, so readers hop fast. Files are split when larger than `split_bytes` or when fewer than `min_partitions`
    slices would otherwise exist (never below MIN_SPLIT_BYTES a piece)."""
    tier = sources_of(store)
    if tier is not None:   # tiered storage: a commit log per queue (engine.scan.tier_source)
        return _plan_with_tier(store, *tier, split_bytes, min_partitions)
    cl = store.commitlog
    max_off = store.max_offset
    regions = []
    for f in cl.files:
        limit = min(f.wrote_position, max_off - f.file_from_offset, f.file_size)
        if limit <= 0:
            continue
        regions.append((f, limit))
    total = sum(limit for _, limit in regions)
    split = split_bytes or DEFAULT_SPLIT_BYTES
    if min_partitions > 1 and total:
        split = min(split, max(MIN_SPLIT_BYTES if split_bytes is None else 1, math.ceil(total / min_partitions)))
    plan = Plan(str(store.root), [], cl.min_offset, max_off, list(store.cfg.delay_level_millis), split)
    cut_regions(store, plan, regions, split, use_cq, hop_hints)
    return plan


@singledispatch
def cut_regions(store, plan: Plan, regions: list, split: int, use_cq: bool, hop_hints: bool) -> None:
    """plan.commitlog gains the slices of `regions` ((file, written limit) each) for a mapped
    store: a file is cut at record starts near every `split` bytes, found through the consume
    queues (use_cq) or by hopping; a file whose records sit in entries (DLedger: each entry
    holds its own position) is one slice. A store read through a filesystem registers its own
    (engine.scan.remote)."""
    cl = store.commitlog
    plain = any(not cl.entry_header(f) for f, _ in regions)   # (records in entries take no cuts, no hints)
    cq = _CQHints(store) if (use_cq or hop_hints) and store.queues and plain else None
    for f, limit in regions:
        entry = cl.entry_header(f)
        cuts = [0]
        if limit > split and not entry:
            n = math.ceil(limit / split)
            targets = [limit * k // n for k in range(1, n)]
            cuts += split_points(f.buf, f.file_from_offset, limit, targets, cq if use_cq else None)
        cuts = sorted(set(cuts))
        for a, b in zip(cuts, cuts[1:] + [limit]):
            if b > a:
                hints = cq.ranges(f.file_from_offset + a, f.file_from_offset + b) if cq and hop_hints and not entry else ()
                plan.commitlog.append(CommitLogSlice(str(f.path), f.file_from_offset, f.file_size, a, b, limit,
                                                     hints, entry_header=entry))


def _plan_with_tier(store, local, ranges, split_bytes, min_partitions) -> Plan:
    """The local store's plan (if any) and slices of the tier's segments for `ranges`."""
    plan = (plan_commitlog(local, split_bytes, min_partitions) if local is not None else
            Plan(str(store.root), [], 0, store.max_offset, list(store.cfg.delay_level_millis),
                 split_bytes or DEFAULT_SPLIT_BYTES))
    split = split_bytes or DEFAULT_SPLIT_BYTES
    total = sum(r.end - r.start for r in ranges)
    if min_partitions > 1 and total:
        split = min(split, max(MIN_SPLIT_BYTES if split_bytes is None else 1, math.ceil(total / min_partitions)))
    plan.commitlog += [CommitLogSlice(*p) for p in tier_pieces(ranges, split)]
    return plan


class _CQHints:
    """Physical offsets of dispatched records, read from every CQ file (vectorised). Each
    queue's units ascend in physical offset, so a commitlog range maps to a unit range."""

    def __init__(self, store):
        self.files: list[tuple[str, np.ndarray]] = []    # (CQ path, commitLogOffset of every written unit)
        self.valid: list[np.ndarray] = []                 # the same, real units only, sorted
        for cq in store.queues.values():
            for f in cq.queue.files:
                n = f.wrote_position // CQ_UNIT_SIZE
                if not n:
                    continue
                u = cq.view(f)[:n]
                phy = u["commitLogOffset"].astype(np.int64)
                if n > 1 and np.any(np.diff(phy) < 0):
                    continue   # not ascending (damaged): no hints from this file
                real = phy[(u["size"] > 0) & (u["size"] != FILLER_SIZE) & (phy >= 0)]
                self.files.append((str(f.path), phy))
                if real.size:
                    self.valid.append(real)

    def candidates(self, lo: int, hi: int, targets: list[int]) -> list[int | None]:
        """For each absolute target, the smallest known record offset >= target and < hi."""
        best = [None] * len(targets)
        t = np.asarray(targets, dtype=np.int64)
        for phy in self.valid:
            if phy[0] >= hi or phy[-1] < lo:
                continue
            i = np.searchsorted(phy, t, side="left")
            for k, j in enumerate(i.tolist()):
                if j < len(phy):
                    c = int(phy[j])
                    if c < hi and (best[k] is None or c < best[k]):
                        best[k] = c
        return best

    def ranges(self, lo: int, hi: int) -> tuple:
        """(CQ path, first unit, end unit) for the units pointing into [lo, hi)."""
        out = []
        for path, phy in self.files:
            if phy[-1] < lo or phy[0] >= hi:
                continue
            a, b = np.searchsorted(phy, [lo, hi], side="left").tolist()
            if b > a:
                out.append((path, a, b))
        return tuple(out) if len(out) <= MAX_HINTS_PER_SLICE else ()


def _is_record_start(buf, pos: int, file_from: int, limit: int) -> bool:
    if pos < 0 or limit - pos < OFF_PHYSICALOFFSET + 8:
        return False
    total, magic = _HDR.unpack_from(buf, pos)
    if magic not in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) or total <= 0 or total > limit - pos:
        return False
    return peek_physical_offset(buf, pos) == file_from + pos


def split_points(buf, file_from: int, limit: int, targets: list[int], hints: _CQHints | None) -> list[int]:
    """Record starts near `targets` (positions in the file): a CQ-known record start at or
    after each target when one verifies, otherwise the first start the size hop finds there."""
    found: list[int | None] = [None] * len(targets)
    if hints is not None:
        cands = hints.candidates(file_from, file_from + limit, [file_from + t for t in targets])
        for k, c in enumerate(cands):
            if c is not None and _is_record_start(buf, c - file_from, file_from, limit):
                found[k] = c - file_from
    if any(p is None for p in found):
        pos, k = 0, 0
        while k < len(targets):
            if found[k] is not None:
                pos = max(pos, found[k])
                k += 1
                continue
            h = hop(buf, pos, targets[k], limit, max_records=1 << 62, max_bytes=1 << 62)
            if h.stop != "end":
                break  # blank or damage before the target: nothing more to split here
            found[k] = h.next_pos
            pos = h.next_pos
            k += 1
    return [p for p in found if p is not None and 0 < p < limit]


# ---- consume queues and index --------------------------------------------------------------
ROCKSDB_SLICE_UNITS = 1 << 18  # units of a RocksDB queue per slice (one range read)
CQ_PROBED_FILES = 3            # ConsumeQueue.recover starts at the third file from a queue's end


@singledispatch
def plan_consume_queues(store, topics: set[str] | None = None, queue_ids: set[int] | None = None) -> list[CQSlice]:
    """Every written unit of every consume queue (up to the recovered write position). A store
    read through a filesystem registers its own (engine.scan.remote)."""
    out = []
    for (topic, qid), cq in sorted(store.queues.items()):
        if topics and topic not in topics or queue_ids and qid not in queue_ids:
            continue
        out += unit_slices(cq, topic, qid)
    return out


@singledispatch
def unit_slices(cq, topic: str, qid: int) -> list[CQSlice]:
    """A ConsumeQueue's written units, a slice per file."""
    out = []
    for f in cq.queue.files:
        n = f.wrote_position // CQ_UNIT_SIZE
        if n:
            rel = os.path.join("consumequeue", topic, str(qid), f.path.name)
            out.append(CQSlice(topic, qid, str(f.path), rel, f.file_from_offset, f.file_size, 0, n))
    return out


@unit_slices.register
def _(cq: RocksDBConsumeQueue, topic: str, qid: int) -> list[CQSlice]:
    """A queue in RocksDB has no files: key ranges of the database."""
    out = []
    for a in range(cq.min_offset, cq.max_offset, ROCKSDB_SLICE_UNITS):
        n = min(cq.max_offset - a, ROCKSDB_SLICE_UNITS)
        out.append(CQSlice(topic, qid, str(cq.directory), "consumequeue", a * CQ_UNIT_SIZE, 0, 0, n, "rocksdb"))
    return out


def plan_index(store) -> list[IndexSlice]:
    """Entries [1, indexCount) of every index file, in pieces of `index_step(store)` entries."""
    out = []
    step = index_step(store)
    for f in disk_index(store).files:
        count = f.header.indexCount
        last = min(max(count, 1), f.index_num)
        for a in range(1, last, step):
            out.append(IndexSlice(str(f.path), f.name, f.file.file_size, f.slot_num, f.index_num,
                                  f.header.beginTimestamp, a, min(last, a + step)))
    return out


@singledispatch
def index_step(store) -> int:
    """Entries of an index file a slice holds: a mapped file's all (a store read through a
    filesystem reads them by ranges: engine.scan.remote)."""
    return 1 << 62


def pack(slices: list, weight, per_partition: int, min_partitions: int = 1) -> list[list]:
    """Group small slices into partitions of about `per_partition` weight; split nothing."""
    if not slices:
        return []
    total = sum(weight(s) for s in slices)
    cap = max(1, min(per_partition, math.ceil(total / max(1, min_partitions))))
    out, cur, w = [], [], 0
    for s in slices:
        if cur and w + weight(s) > cap:
            out.append(cur)
            cur, w = [], 0
        cur.append(s)
        w += weight(s)
    if cur:
        out.append(cur)
    return out


def slice_weight(s: CommitLogSlice) -> int:
    return s.nbytes


def cq_weight(s: CQSlice) -> int:
    return s.unit_end - s.unit_start


def index_weight(s: IndexSlice) -> int:
    return s.last - s.first



def index_entry_position(s: IndexSlice, n: int) -> int:
    return INDEX_HEADER_SIZE + s.slot_num * INDEX_SLOT_SIZE + n * INDEX_ENTRY_SIZE


# ---- serialisation --------------------------------------------------------------------------
def _plan_dict(plan: Plan, cq: list[CQSlice] | None = None, index: list[IndexSlice] | None = None) -> dict:
    d = {"root": plan.root, "broker": plan.broker, "min_offset": plan.min_offset, "max_offset": plan.max_offset,
         "delay_level_millis": plan.delay_level_millis, "split_bytes": plan.split_bytes,
         "commitlog": [asdict(s) for s in plan.commitlog]}
    if cq is not None:
        d["cq"] = [asdict(s) for s in cq]
    if index is not None:
        d["index"] = [asdict(s) for s in index]
    return d


def plan_to_json(plan: Plan, cq: list[CQSlice] | None = None, index: list[IndexSlice] | None = None) -> str:
    return json.dumps(_plan_dict(plan, cq, index))


def plans_to_json(plans: list[tuple]) -> str:
    """Several stores' plans: a JSON array of (Plan, cq, index) as plan_to_json writes them."""
    return json.dumps([_plan_dict(*p) for p in plans])


def _plan_of(d: dict) -> tuple[Plan, list[CQSlice] | None, list[IndexSlice] | None]:
    cl = [CommitLogSlice(**{**s, "hints": tuple(tuple(h) for h in s.get("hints", ()))}) for s in d["commitlog"]]
    plan = Plan(d["root"], cl, d["min_offset"], d["max_offset"],
                d["delay_level_millis"], d.get("split_bytes", DEFAULT_SPLIT_BYTES), d.get("broker", ""))
    cq = [CQSlice(**s) for s in d["cq"]] if "cq" in d else None
    index = [IndexSlice(**s) for s in d["index"]] if "index" in d else None
    return plan, cq, index


def plan_from_json(text: str) -> tuple[Plan, list[CQSlice] | None, list[IndexSlice] | None]:
    return plans_from_json(text)[0]


def plans_from_json(text: str) -> list[tuple[Plan, list[CQSlice] | None, list[IndexSlice] | None]]:
    """plan_to_json's or plans_to_json's text as a list of (Plan, cq, index)."""
    d = json.loads(text)
    return [_plan_of(x) for x in (d if isinstance(d, list) else [d])]
