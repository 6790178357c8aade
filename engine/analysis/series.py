"""One ConsumeQueue as columns over its queue offsets (commitLogOffset, size, tagsCode, store time),
the store times gathered from the commitlog maps in one numpy pass."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.format.message import BORNHOST_V6_FLAG
from engine.store.consume_queue import FILLER_SIZE


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
    phy = u["commitLogOffset"].astype(np.int64)
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
