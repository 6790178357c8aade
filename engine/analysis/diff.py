"""Compare two stores (master and slave, before and after a recovery, a store and its copy).

Where the logs are copies, messages match by offset: the commitlog files are compared byte
range by byte range (numpy over the read-only maps, CHUNK at a time), and only the files where
a byte differs, or that one store holds valid data in and the other does not, are walked
record by record. Records at the same offset with the same bytes are the same message. The
rest are matched by UNIQ_KEY and store time (records without a UNIQ_KEY by topic, queue, born
and store time, body CRC and size), as a multiset, so stores written independently (master and
slave, a log truncated and written again) still pair up. What stays unpaired is only in A or
only in B; pairs at one offset whose bytes differ are `changed`. Both stores are read, never
written: open them read-only."""
from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from engine.format.message import RecordStatus
from engine.tasks import CancelToken, Progress, Task

CHUNK = 4 << 20


@dataclass
class StoreDiff:
    identical: bool
    first_divergence: int | None
    only_in_a: list[dict]
    only_in_b: list[dict]
    changed: list[dict]
    queues: list[dict]
    only_in_a_count: int = 0
    only_in_b_count: int = 0
    matched_by_key: int = 0
    matched_by_offset: int = 0          # in the files that had to be walked
    files_walked: int = 0
    bytes_compared: int = 0
    commitlog: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"identical": self.identical, "firstDivergence": self.first_divergence,
                "onlyInA": self.only_in_a, "onlyInB": self.only_in_b, "onlyInACount": self.only_in_a_count,
                "onlyInBCount": self.only_in_b_count, "changed": self.changed, "queues": self.queues,
                "matchedByKey": self.matched_by_key, "matchedByOffset": self.matched_by_offset,
                "filesWalked": self.files_walked, "bytesCompared": self.bytes_compared, "commitlog": self.commitlog}


def _first_difference(fa, fb, start: int, end: int, cancel) -> tuple[int | None, int]:
    """First differing file position in [start, end) of two maps, and the bytes read."""
    pos = start
    while pos < end:
        if cancel is not None:
            cancel.raise_if_cancelled()
        n = min(CHUNK, end - pos)
        x = np.frombuffer(fa.buf, np.uint8, n, pos)
        y = np.frombuffer(fb.buf, np.uint8, n, pos)
        if not np.array_equal(x, y):
            return pos + int(np.flatnonzero(x != y)[0]), pos + n - start
        pos += n
    return None, end - start


def _poll(cancel, i: int) -> None:
    """Cancelled when `cancel` is set, asked at i = 0 and then every 4096th i."""
    if cancel is not None and i % 4096 == 0:
        cancel.raise_if_cancelled()


def _files_by_start(store) -> dict[int, object]:
    return {f.file_from_offset: f for f in store.commitlog.files}


def _compare(a, b, cancel, stats: StoreDiff) -> Task[tuple[int | None, set[int]]]:
    """(first differing byte offset, starts of the files to walk). Byte-compares the range
    either store holds valid data in."""
    cla, clb = a.commitlog, b.commitlog
    lo, hi = min(cla.min_offset, clb.min_offset), max(cla.max_offset, clb.max_offset)
    fa_all, fb_all = _files_by_start(a), _files_by_start(b)
    size_a, size_b = a.cfg.mappedFileSizeCommitLog, b.cfg.mappedFileSizeCommitLog
    walk: set[int] = set()
    first = None
    starts = sorted(s for s in set(fa_all) | set(fb_all)
                    if s < hi and s + max(size_a, size_b) > lo)
    total = max(1, hi - lo)
    done = 0
    for s in starts:
        fa, fb = fa_all.get(s), fb_all.get(s)
        s_lo = max(lo, s)
        if fa is None or fb is None or size_a != size_b:
            walk.add(s)
            first = s_lo if first is None else min(first, s_lo)
            continue
        e = min(hi, s + size_a)
        diff, n = _first_difference(fa, fb, s_lo - s, e - s, cancel)
        stats.bytes_compared += n
        done += n
        yield Progress(min(done, total), total, "compare", "bytes")
        if diff is not None:
            walk.add(s)
            first = s + diff if first is None else min(first, s + diff)
    for x, y in ((cla.min_offset, clb.min_offset), (cla.max_offset, clb.max_offset)):
        if x != y:  # valid in one store only: those files are walked, the first such offset diverges
            first = min(x, y) if first is None else min(first, min(x, y))
            walk.update(s for s in starts if s < max(x, y) and s + max(size_a, size_b) > min(x, y))
    return first, walk


def _key(m) -> int:
    if m.uniqKey:
        return hash((m.uniqKey, m.storeTimestamp))
    return hash(("", m.topic, m.queueId, m.bornTimestamp, m.storeTimestamp, m.bodyCRC, m.storeSize))


def _file_records(store, start: int, cancel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, sizes, keys) of the valid messages of the commitlog file at `start`: numbers
    only, no message is kept."""
    cl = store.commitlog
    offs, sizes, keys = array("q"), array("q"), array("q")
    f = next((g for g in cl.files if g.file_from_offset == start), None)
    if f is not None:
        for i, (off, r) in enumerate(cl.walk(max(start, cl.min_offset), min(f.end_offset, cl.max_offset))):
            if cancel is not None and i % 4096 == 4095:
                cancel.raise_if_cancelled()
            if r.status is RecordStatus.MESSAGE:
                offs.append(off)
                sizes.append(r.size)
                keys.append(_key(r.message))
    return tuple(np.frombuffer(x, np.int64) if len(x) else np.empty(0, np.int64) for x in (offs, sizes, keys))


def _same_bytes(a, b, off: int, size: int) -> bool:
    fa, fb = a.commitlog.queue.find(off), b.commitlog.queue.find(off)
    pa, pb = off - fa.file_from_offset, off - fb.file_from_offset
    return bytes(fa.buf[pa:pa + size]) == bytes(fb.buf[pb:pb + size])


def _occurrence_keys(keys: np.ndarray) -> np.ndarray:
    """Each key mixed with how many equal keys came before it: equal multisets then match 1:1."""
    if not len(keys):
        return keys
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    first = np.r_[0, np.flatnonzero(k[1:] != k[:-1]) + 1]
    group_start = np.repeat(first, np.diff(np.r_[first, len(k)]))
    occ = (np.arange(len(k)) - group_start).astype(np.uint64)
    mixed = np.empty_like(keys)
    mixed[order] = (k.view(np.uint64) ^ (occ * np.uint64(0x9E3779B97F4A7C15))).view(np.int64)
    return mixed


def message_ref(m) -> dict:
    return {"topic": m.topic, "queueId": m.queueId, "queueOffset": m.queueOffset,
            "commitLogOffset": m.commitLogOffset, "msgId": m.msgId, "uniqKey": m.uniqKey,
            "storeTimestamp": m.storeTimestamp, "storeSize": m.storeSize}


def _queues(a, b) -> list[dict]:
    out = []
    for key in sorted(set(a.queues) | set(b.queues)):
        qa, qb = a.queues.get(key), b.queues.get(key)
        ra = (qa.min_offset, qa.max_offset) if qa else (None, None)
        rb = (qb.min_offset, qb.max_offset) if qb else (None, None)
        if ra != rb:
            out.append({"topic": key[0], "queueId": key[1], "minOffsetA": ra[0], "maxOffsetA": ra[1],
                        "minOffsetB": rb[0], "maxOffsetB": rb[1]})
    return out


def diff_task(a, b, limit: int = 0, cancel: CancelToken | None = None) -> Task[StoreDiff]:
    """Compare stores a and b (MessageStore, open read-only). `limit` caps the onlyInA/onlyInB
    lists (0 = all; the counts are always exact). Progress in phases compare, records, match."""
    out = StoreDiff(False, None, [], [], [], [])
    out.commitlog = {"a": {"minOffset": a.commitlog.min_offset, "maxOffset": a.commitlog.max_offset},
                     "b": {"minOffset": b.commitlog.min_offset, "maxOffset": b.commitlog.max_offset}}
    first, walk = yield from _compare(a, b, cancel, out)
    out.first_divergence = first
    cand_a: list[tuple[np.ndarray, np.ndarray]] = []   # (offsets, keys) of records not matched by offset
    cand_b: list[tuple[np.ndarray, np.ndarray]] = []
    same_offset_differs: set[int] = set()
    for i, s in enumerate(sorted(walk)):
        _poll(cancel, 0)   # (a file of fewer than 4096 records is never polled inside)
        oa, sa, ka_ = _file_records(a, s, cancel)
        ob, sb, kb_ = _file_records(b, s, cancel)
        _, ia, ib = np.intersect1d(oa, ob, assume_unique=True, return_indices=True)
        same_a = np.zeros(len(oa), bool)
        same_b = np.zeros(len(ob), bool)
        for x, y in zip(ia.tolist(), ib.tolist()):
            off = int(oa[x])
            if sa[x] == sb[y] and _same_bytes(a, b, off, int(sa[x])):
                same_a[x] = same_b[y] = True
            else:
                same_offset_differs.add(off)
        out.matched_by_offset += int(same_a.sum())
        cand_a.append((oa[~same_a], ka_[~same_a]))
        cand_b.append((ob[~same_b], kb_[~same_b]))
        out.files_walked += 1
        yield Progress(i + 1, len(walk), "records", "files")
    _poll(cancel, 0)
    empty = np.empty(0, np.int64)
    offs_a = np.concatenate([c[0] for c in cand_a]) if cand_a else empty
    keys_a = np.concatenate([c[1] for c in cand_a]) if cand_a else empty
    offs_b = np.concatenate([c[0] for c in cand_b]) if cand_b else empty
    keys_b = np.concatenate([c[1] for c in cand_b]) if cand_b else empty
    ka, kb = _occurrence_keys(keys_a), _occurrence_keys(keys_b)
    in_b, in_a = np.isin(ka, kb), np.isin(kb, ka)
    out.matched_by_key = int(in_b.sum())
    if out.matched_by_key:  # pairs at one offset whose bytes differ: changed, not moved
        pair_b = dict(zip(kb[in_a].tolist(), offs_b[in_a].tolist()))
        for j, (k, off) in enumerate(zip(ka[in_b].tolist(), offs_a[in_b].tolist())):
            _poll(cancel, j)
            if off in same_offset_differs and pair_b.get(k) == off:
                m = a.commitlog.get_message(off)
                out.changed.append(message_ref(m))
    yield Progress(1, 2, "match", "steps")
    _poll(cancel, 0)
    for store, offs, side in ((a, offs_a[~in_b], out.only_in_a), (b, offs_b[~in_a], out.only_in_b)):
        for j, off in enumerate(np.sort(offs)[:limit or None].tolist()):
            _poll(cancel, j)
            side.append(message_ref(store.commitlog.get_message(off)))
    out.only_in_a_count, out.only_in_b_count = int((~in_b).sum()), int((~in_a).sum())
    out.queues = _queues(a, b)
    out.identical = (out.first_divergence is None and not out.only_in_a_count and not out.only_in_b_count
                     and not out.changed and not out.queues)
    yield Progress(2, 2, "match", "steps")
    return out


def compare_task(a, other, config=None, limit: int = 0, cancel: CancelToken | None = None) -> Task[StoreDiff]:
    """Open the store at `other` read-only (progress in its open phases), compare `a` with it
    (diff_task) and close it again: the GUI's compare runs this on its runner."""
    from engine.store.message_store import MessageStore
    b = yield from MessageStore.open_task(other, config, read_only=True, cancel=cancel)
    try:
        return (yield from diff_task(a, b, limit, cancel))
    finally:
        b.close()
