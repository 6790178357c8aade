"""Scans over tiered storage (engine.store.tiered): a tier keeps one commit log per queue, its
records exactly as the local CommitLog holds them with PHYSICALOFFSET rewritten to the offset in
that queue's tiered commit log (segment base + position), no blanks and no end records. So a
segment is read as a commitlog file whose first byte is at its base offset: the plan gives one
slice per segment piece, cut at record starts the queue's CONSUME_QUEUE names.

A store reads through this when it offers `scan_sources()` -> (local store or None, TierRanges):
the tier alone, or a store with its tier (the local records, and what only the tier holds).
The planner (engine.scan.planning) turns the pieces into CommitLogSlices; nothing here imports
it, so the layers stay one way."""
from __future__ import annotations

import numpy as np

Piece = tuple[str, int, int, int, int, int]   # path, file_from_offset, file_size, start, end, limit


def sources_of(store):
    """(local store or None, TierRanges) when `store` reads a tier, else None."""
    sources = getattr(store, "scan_sources", None)   # the tier store says so itself
    return sources() if sources is not None else None


def tier_pieces(ranges, split: int) -> list[Piece]:
    """Each range cut at its segments' bounds, and inside a segment larger than `split` at the
    record starts (CQ units) nearest every `split` bytes."""
    out: list[Piece] = []
    for r in ranges:
        q = r.queue
        starts = _record_starts(q)
        for s in q.commitlog.segments:
            a, b = max(r.start, s.base), min(r.end, s.end)
            if a >= b:
                continue
            cuts = [a]
            if starts is not None and b - a > split:
                targets = np.arange(a + split, b, split, dtype=np.int64)
                near = starts[np.minimum(np.searchsorted(starts, targets), len(starts) - 1)]
                cuts += sorted({int(c) for c in near.tolist() if a < c < b})
            for x, y in zip(cuts, cuts[1:] + [b]):
                out.append((str(s.path), s.base, s.size, x - s.base, y - s.base, s.size))
    return out


def _record_starts(q) -> np.ndarray | None:
    """The record offsets the queue's CONSUME_QUEUE names, ascending (None across a hole)."""
    units = q.units(q.min_offset, q.max_offset)
    if units is None or not len(units):
        return None
    phy = units["commitLogOffset"].astype(np.int64)
    return phy if np.all(np.diff(phy) > 0) else None


def refuse_tier(members, job: str, via_consume_queue: bool) -> None:
    """Jobs a tier does not answer, refused in one line before any reading."""
    for m in members:
        sources = getattr(m.store, "scan_sources", None)
        if sources is None:
            continue
        if job == "consistency":
            raise ValueError("consistency compares one commitlog with its ConsumeQueues and index; a tier has a "
                             "commit log per queue: `rmqstore check TIER` verifies it (scan the store without "
                             "tieredStoreFilePath for the local store's consistency)")
        if via_consume_queue:
            raise ValueError("--via-consume-queue reads one commitlog through its ConsumeQueues; a tier's commit "
                             "logs are per queue and hold only dispatched messages: drop the flag (--topic and "
                             "--queue still select)")
