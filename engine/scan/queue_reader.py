"""Reading queues' records through their ConsumeQueues (the `rocketmq` source's
`useConsumeQueue=true` with a pushed topic / queueId filter): the CQ units give the records'
commitlog offsets and sizes, and only those records are read -- by byte ranges for a store on a
filesystem, from the map for a local one -- instead of every record header of the commitlog.

This is a consumer's view: the rows are the records the selected queues hold. Records no queue
holds are not returned: PREPARED and ROLLBACK transaction records (never dispatched),
BatchConsumeQueue topics' records (their units are in batchconsumequeue/) and records past the
queues' end (not yet dispatched). LMQ queues are left out (their units name records of another
topic). A unit is taken only when a V1/V2 header of that TOTALSIZE stands at its offset holding
that offset as PHYSICALOFFSET; every pushed condition is applied to the decoded records again."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from engine.format.lmq import LMQ_PREFIX
from engine.format.record import MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, OFF_PHYSICALOFFSET
from engine.scan.columns import RecordBlock
from engine.scan.jobs import is_uri
from engine.scan.ranges import be_int, read_range
from engine.scan.reader import map_file, read_cq

GAP_BYTES = 64 << 10       # records closer than this are fetched in one read ...
RUN_BYTES = 8 << 20        # ... of at most this many bytes


@dataclass
class QueueRead:
    """One task's work: CQ slices of the selected queues and the store's commitlog files."""
    cq: list                                   # engine.scan.planning.CQSlice
    files: list = field(default_factory=list)  # (path, file_from_offset, file_size), by offset
    min_offset: int = 0
    max_offset: int = 1 << 62
    gap: int = GAP_BYTES


def queue_read(store, plan, topics, queue_ids, gap: int = GAP_BYTES) -> QueueRead:
    """The QueueRead of one store (open, with its commitlog plan) for the selected queues."""
    from engine.scan.planning import plan_consume_queues
    files = sorted({(s.path, s.file_from_offset, s.file_size) for s in plan.commitlog}, key=lambda f: f[1])
    cq = queue_slices(plan_consume_queues(store, set(topics) if topics else None, set(queue_ids) if queue_ids else None))
    return QueueRead(cq, files, plan.min_offset, plan.max_offset, gap)


def queue_selection(conditions) -> tuple[set[str] | None, set[int] | None]:
    """(topics, queue ids) the pushed `=` / `IN` conditions on topic and queueId allow."""
    topics = qids = None
    for c in conditions:
        if c.column in ("topic", "queueId") and c.op in ("=", "in"):
            vals = set(c.value) if c.op == "in" else {c.value}
            if c.column == "topic":
                topics = vals if topics is None else topics & vals
            else:
                qids = vals if qids is None else qids & vals
    return topics, qids


def queue_slices(cq_slices: list) -> list:
    """The CQ slices a queue read uses: LMQ queues left out."""
    return [s for s in cq_slices if not s.topic.startswith(LMQ_PREFIX)]


def _verified(u8: np.ndarray, rel: np.ndarray, size: np.ndarray, base: int) -> np.ndarray:
    """Which of the offsets `rel` (into u8, commitlog offset base + rel) hold a record of `size`."""
    ok = rel + OFF_PHYSICALOFFSET + 8 <= len(u8)
    r, sz = rel[ok], size[ok]
    good = ((be_int(u8, r, 4) == sz) & np.isin(be_int(u8, r + 4, 4), [MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2])
            & (be_int(u8, r + OFF_PHYSICALOFFSET, 8) == base + r) & (r + sz <= len(u8)))
    out = np.zeros(len(rel), dtype=bool)
    out[np.flatnonzero(ok)[good]] = True
    return out


def read_queue_records(q: QueueRead, delay_level_millis: list[int], stats=None) -> Iterator[RecordBlock]:
    """Blocks of the records the CQ slices of `q` name, in commitlog order, each once."""
    phys, sizes = [], []
    for s in q.cq:
        u = read_cq(s)
        phy, size = u["commitLogOffset"], u["size"].astype(np.int64)
        keep = (phy >= q.min_offset) & (phy < q.max_offset) & (size > 0)
        phys.append(phy[keep])
        sizes.append(size[keep])
    if not phys or not q.files:
        return
    phy, first = np.unique(np.concatenate(phys), return_index=True)   # a record named twice: one row
    size = np.concatenate(sizes)[first]
    starts = np.array([f[1] for f in q.files], dtype=np.int64)
    fi = np.searchsorted(starts, phy, side="right") - 1
    for k in np.unique(fi[fi >= 0]).tolist():
        path, file_from, file_size = q.files[k]
        sel = fi == k
        yield from _file_records(path, file_from, file_size, phy[sel] - file_from, size[sel], delay_level_millis,
                                 stats, q.gap)


def _file_records(path: str, file_from: int, file_size: int, pos: np.ndarray, size: np.ndarray,
                  delays: list[int], stats, gap: int) -> Iterator[RecordBlock]:
    inside = pos + size <= file_size
    pos, size = pos[inside], size[inside]
    if not is_uri(path):
        _, u8 = map_file(path)
        yield from _decode(u8, file_from, pos, size, delays, stats)
        return
    for a, e in _runs(pos, size, gap):   # runs of records close together, one ranged read each
        lo, hi = int(pos[a]), int(pos[e - 1] + size[e - 1])
        buf = read_range(path, lo, hi - lo)
        yield from _decode(buf, file_from + lo, pos[a:e] - lo, size[a:e], delays, stats)


def _runs(pos: np.ndarray, size: np.ndarray, gap: int) -> list[tuple[int, int]]:
    """[a, e) index runs of records fetched together: the next record joins a run when the bytes
    between are at most `gap`, the run stays within RUN_BYTES, and what the run fetches that
    no record needs stays at most what its records need (never more than twice the bytes)."""
    out = []
    if not len(pos):
        return out
    p, z = pos.tolist(), size.tolist()
    a, lo, hi, useful = 0, p[0], p[0] + z[0], z[0]
    for i in range(1, len(p)):
        end = p[i] + z[i]
        if p[i] - hi <= gap and end - lo <= RUN_BYTES and (end - lo) - (useful + z[i]) <= useful + z[i]:
            hi, useful = max(hi, end), useful + z[i]
            continue
        out.append((a, i))
        a, lo, hi, useful = i, p[i], end, z[i]
    out.append((a, len(p)))
    return out


def _decode(u8: np.ndarray, base: int, rel: np.ndarray, size: np.ndarray, delays: list[int],
            stats) -> Iterator[RecordBlock]:
    ok = _verified(u8, rel, size, base)
    take = rel[ok]
    while True:
        block, skipped, invalid_at = RecordBlock.decode(u8, base, take, delays)
        if invalid_at is None:
            break
        take = np.delete(take, invalid_at)   # a header that decodes to nonsense: without it
    if stats is not None:
        stats.records += len(block)
        stats.size_mismatch += skipped
        stats.stops += [(base + int(r), "no record at the unit's offset") for r in rel[~ok][:16].tolist()]
    if len(block):
        yield block
