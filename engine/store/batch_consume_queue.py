"""BatchConsumeQueue (RocketMQ 5.x): per (topic, queueId) of a topic whose queue.type is
BatchCQ, 46-byte units in `batchconsumequeue/<topic>/<queueId>/`. Queue offsets count inner
messages: a unit covers [msgBaseOffset, msgBaseOffset + batchSize), so offset o is found by
a binary search for the last unit whose base is <= o (getBatchMsgIndexBuffer), not by o * 46.

Bounds as BatchConsumeQueue keeps them: max = base + batchSize of the last unit, min = the
base of the first unit whose record is still in the commitlog. Units are read through numpy
views of the mapped files; nothing is loaded per message."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from engine.files.mapped_file import MappedFile
from engine.files.mapped_file_queue import MappedFileQueue
from engine.format.batch_cq_unit import (BATCH_CQ, BATCH_CQ_UNIT_DTYPE, BATCH_CQ_UNIT_SIZE,
                                         pack_unit)

_EMPTY = np.empty(0, dtype=BATCH_CQ_UNIT_DTYPE)
RESERVE_STEP = 64 << 10


class BatchConsumeQueue:
    cq_type = BATCH_CQ
    unit_size = BATCH_CQ_UNIT_SIZE

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int, writable: bool = False,
                 tolerant: bool = False):
        self.topic = topic
        self.queue_id = queue_id
        self.directory = Path(directory)
        self.file_size = file_size
        self.units_per_file = file_size // BATCH_CQ_UNIT_SIZE
        self.queue = MappedFileQueue(self.directory, file_size, writable, reserve_step=RESERVE_STEP).load(tolerant)
        self.max_physic_offset = -1
        self._min_unit = 0            # global unit index of the first live unit
        self._counts: list[int] = []  # valid units per file (after recover)

    # ---- views -----------------------------------------------------------------------
    def view(self, f: MappedFile) -> np.ndarray:
        return np.frombuffer(f.mm, dtype=BATCH_CQ_UNIT_DTYPE, count=self.units_per_file)

    def file_units(self, i: int) -> np.ndarray:
        """The valid units of file i."""
        return self.view(self.queue.files[i])[:self._counts[i]]

    # ---- recovery ------------------------------------------------------------------
    def recover(self, commitlog_min: int, commitlog_max: int) -> None:
        """The valid units: up to the first unit with size <= 0 or a negative offset (an
        all-zero unit ends the data), then without units whose record starts at or after the
        commitlog's end (truncateDirtyLogicFiles). Write positions are set in memory; a
        writable queue also zeroes what it drops."""
        counts = []
        max_phy = -1
        stopped = False
        for f in self.queue.files:
            if stopped:
                counts.append(0)
                continue
            u = self.view(f)
            bad = np.flatnonzero((u["size"] <= 0) | (u["commitLogOffset"] < 0)
                                 | (u["commitLogOffset"] >= commitlog_max) | (u["batchSize"] <= 0))
            n = int(bad[0]) if bad.size else len(u)
            counts.append(n)
            if n:
                last = u[n - 1]
                max_phy = int(last["commitLogOffset"]) + int(last["size"])
            if n < len(u):
                stopped = True
        self._counts = counts
        self.max_physic_offset = max_phy
        for f, n in zip(self.queue.files, counts):
            f.wrote_position = f.flushed_position = n * BATCH_CQ_UNIT_SIZE
        if self.queue.writable:
            end_global = self._end_byte()
            self.queue.truncate_to(end_global, zero=True)
            self._counts = [f.wrote_position // BATCH_CQ_UNIT_SIZE for f in self.queue.files]
        self.correct_min_offset(commitlog_min)

    def _end_byte(self) -> int:
        for f, n in zip(reversed(self.queue.files), reversed(self._counts)):
            if n:
                return f.file_from_offset + n * BATCH_CQ_UNIT_SIZE
        return self.queue.min_offset

    def correct_min_offset(self, commitlog_min: int) -> None:
        """The first unit whose record is still in the commitlog (correctMinOffset)."""
        k = 0
        for i in range(len(self.queue.files)):
            u = self.file_units(i)
            hit = np.flatnonzero(u["commitLogOffset"] >= commitlog_min)
            if hit.size:
                self._min_unit = k + int(hit[0])
                return
            k += len(u)
        self._min_unit = k

    # ---- bounds --------------------------------------------------------------------
    @property
    def unit_count(self) -> int:
        return sum(self._counts)

    def _unit_at(self, g: int):
        """The unit with global index g (None when out of range)."""
        for i, n in enumerate(self._counts):
            if g < n:
                return self.file_units(i)[g]
            g -= n
        return None

    @property
    def min_offset(self) -> int:
        u = self._unit_at(self._min_unit)
        mx = self.max_offset
        return min(int(u["msgBaseOffset"]), mx) if u is not None else mx  # damaged bases: never past max

    @property
    def max_offset(self) -> int:
        for i in range(len(self._counts) - 1, -1, -1):
            if self._counts[i]:
                last = self.file_units(i)[-1]
                return int(last["msgBaseOffset"]) + int(last["batchSize"])
        return 0

    # ---- lookup --------------------------------------------------------------------
    def locate(self, offset: int) -> tuple[int, int] | None:
        """(file index, unit index in it) of the unit that contains queue offset `offset`:
        the last file whose first base is <= offset, then the last unit there whose base is
        <= offset (binary search on msgBaseOffset). None below the first unit."""
        firsts = [int(self.file_units(i)[0]["msgBaseOffset"]) if n else None for i, n in enumerate(self._counts)]
        fi = None
        for i in range(len(firsts) - 1, -1, -1):
            if firsts[i] is not None and firsts[i] <= offset:
                fi = i
                break
        if fi is None:
            return None
        bases = self.file_units(fi)["msgBaseOffset"]
        j = int(np.searchsorted(bases, offset, side="right")) - 1
        return (fi, j) if j >= 0 else None

    def unit(self, offset: int) -> dict | None:
        """get(offset): the unit containing `offset` (its queueOffset is the base)."""
        at = self.locate(offset)
        if at is None:
            return None
        u = self.file_units(at[0])[at[1]]
        return unit_dict(u)

    def units_from(self, offset: int, to_file_end: bool = False, limit: int | None = None) -> np.ndarray:
        """Units from the one containing `offset` (iterateFrom): to the end of its file
        (to_file_end, as the broker's page) or across files, at most `limit` units."""
        at = self.locate(offset)
        if at is None:
            return _EMPTY
        fi, j = at
        parts, n = [], 0
        while fi < len(self._counts):
            u = self.file_units(fi)[j:]
            if limit is not None:
                u = u[:limit - n]
            parts.append(u)
            n += len(u)
            if to_file_end or (limit is not None and n >= limit):
                break
            fi, j = fi + 1, 0
        if not parts:
            return _EMPTY
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def all_units(self) -> np.ndarray:
        parts = [self.file_units(i) for i in range(len(self._counts)) if self._counts[i]]
        return np.concatenate(parts) if len(parts) > 1 else (parts[0] if parts else _EMPTY)

    # ---- a restart view (engine.store.crash_view): units added in this process only -------
    def view_begin(self) -> tuple:
        """The files into memory before the view adds units; returns what view_keep and
        view_undo take."""
        from engine.store.memory_files import queue_into_memory
        was = (self.queue, self.max_physic_offset, list(self._counts))
        queue_into_memory(self)
        return was

    def view_keep(self, was: tuple) -> None:
        from engine.store.memory_files import let_go_replaced
        let_go_replaced(was[0])

    def view_undo(self, was: tuple) -> None:
        from engine.store.memory_files import close_memory_files
        close_memory_files(self.queue)
        self.queue, self.max_physic_offset, self._counts = was

    def close(self) -> None:
        self.queue.close()

    # ---- writing (dispatch) -----------------------------------------------------------
    def put_unit(self, phy: int, size: int, tags_code: int, store_ts: int, base: int, batch_size: int) -> bool:
        """putBatchMessagePositionInfo: append one unit; a record already covered (re-dispatch)
        is skipped."""
        if phy + size <= self.max_physic_offset:
            return False
        q = self.queue
        f = q.last
        if f is None:
            f = q.create_next(0)
            f.wrote_position = 0
            self._counts.append(0)
        elif f.wrote_position + BATCH_CQ_UNIT_SIZE > self.file_size:
            f = q.create_next(f.end_offset)
            f.wrote_position = 0
            self._counts.append(0)
        f.append(pack_unit(phy, size, tags_code, store_ts, base, batch_size))
        self._counts[-1] = f.wrote_position // BATCH_CQ_UNIT_SIZE
        self.max_physic_offset = phy + size
        return True

    def flush(self) -> None:
        for f in self.queue.files[-2:]:
            f.flush()


def unit_dict(u) -> dict:
    """A unit as JSON (RocketMQ's CqUnit names: queueOffset is the base, batchNum the size)."""
    return {"commitLogOffset": int(u["commitLogOffset"]), "size": int(u["size"]), "tagsCode": int(u["tagsCode"]),
            "storeTimestamp": int(u["storeTimestamp"]), "msgBaseOffset": int(u["msgBaseOffset"]),
            "batchSize": int(u["batchSize"]), "compactedOffset": int(u["compactedOffset"])}


def detect_file_size(root: Path, cfg) -> int:
    """mapperFileSizeBatchConsumeQueue: as set, else the size the files have (the most common
    one), else the default."""
    from engine.format.batch_cq_unit import BATCH_CQ_DIR, round_file_size
    if "mapperFileSizeBatchConsumeQueue" in cfg.explicit:
        return round_file_size(cfg.mapperFileSizeBatchConsumeQueue)
    sizes: dict[int, int] = {}
    for t in _subdirs(root / BATCH_CQ_DIR):
        for q in _subdirs(t):
            for e in os.scandir(q):
                if e.name.isdigit() and e.is_file():
                    s = e.stat().st_size
                    if s and s % BATCH_CQ_UNIT_SIZE == 0:
                        sizes[s] = sizes.get(s, 0) + 1
    if sizes:
        return max(sizes, key=lambda s: (sizes[s], s))
    return round_file_size(cfg.mapperFileSizeBatchConsumeQueue)


def _subdirs(p: Path) -> list[Path]:
    try:
        return sorted(e for e in p.iterdir() if e.is_dir())
    except OSError:
        return []


def refresh_batch_queues(store) -> None:
    """Follow a writer (read-only opens): new files and units of known queues, new queues."""
    cl = store.commitlog
    for b in store.batch_queues.values():
        b.queue.load_new()
        b.recover(cl.min_offset, cl.max_offset)
    found, _ = load_batch_queues(store.root, store.cfg, False, cl.min_offset, cl.max_offset, [],
                                 skip=set(store.batch_queues))
    store.batch_queues.update(found)
    store.batch_topics |= {t for t, _ in found}


def load_batch_queues(root: Path, cfg, writable: bool, commitlog_min: int, commitlog_end: int,
                      warnings: list[str], skip: set | None = None) -> tuple[dict, int]:
    """Every `batchconsumequeue/<topic>/<queueId>/` queue, recovered against the commitlog
    range; ({(topic, queueId): BatchConsumeQueue}, the file size used)."""
    from engine.errors import StoreError
    from engine.format.batch_cq_unit import BATCH_CQ_DIR
    size = detect_file_size(root, cfg)
    out = {}
    for tdir in _subdirs(root / BATCH_CQ_DIR):
        for qdir in _subdirs(tdir):
            try:
                qid = int(qdir.name)
            except ValueError:
                warnings.append(f"skipped {qdir}: queue id is not a number")
                continue
            if skip and (tdir.name, qid) in skip:
                continue
            try:
                bcq = BatchConsumeQueue(tdir.name, qid, qdir, size, writable, tolerant=cfg.tolerant)
            except StoreError as e:
                warnings.append(f"batch consume queue {tdir.name}/{qid} not read: {e}")
                continue
            bcq.recover(commitlog_min, commitlog_end)
            out[(tdir.name, qid)] = bcq
    return out, size


def batch_topics(queues: dict, topic_table: dict) -> set[str]:
    """Topics whose records go to a BatchConsumeQueue: queue.type=BatchCQ in their topic
    config, or a batchconsumequeue/ folder already there."""
    from engine.format.batch_cq_unit import is_batch_cq_topic
    return {t for t, _ in queues} | {t for t, tc in topic_table.items() if is_batch_cq_topic(tc)}


def queue_for_write(store, topic: str, queue_id: int) -> BatchConsumeQueue | None:
    """The BatchCQ of a dispatched record, created on first use (safe names only)."""
    from engine.format.batch_cq_unit import BATCH_CQ_DIR
    bcq = store.batch_queues.get((topic, queue_id))
    if bcq is None:
        if not topic or "/" in topic or "\\" in topic or topic in (".", "..") or "\0" in topic or queue_id < 0:
            store.warnings.append(f"record for topic {topic!r} queue {queue_id} not dispatched: unsafe name")
            return None
        bcq = BatchConsumeQueue(topic, queue_id, store.root / BATCH_CQ_DIR / topic / str(queue_id),
                                store.cfg.mapperFileSizeBatchConsumeQueue, writable=not store.read_only)
        bcq._counts = [f.wrote_position // BATCH_CQ_UNIT_SIZE for f in bcq.queue.files]
        store.batch_queues[(topic, queue_id)] = bcq
    return bcq


def dispatch(store, msg) -> bool:
    """BatchConsumeQueue.putMessagePositionInfoWrapper: one unit per record, at INNER_BASE with
    INNER_NUM messages when the record has both (setBatchSizeIfNeeded), else at its queue
    offset as a batch of one."""
    from engine.format.inner_batch import INNER_BASE, INNER_NUM, batch_position
    p = msg.properties
    base, num = batch_position(p, msg.queueOffset) or (-1, -1)
    if base < 0 or not 0 < num <= 0x7FFF:
        store.warnings.append(f"record at commitlog offset {msg.commitLogOffset}: INNER_BASE/INNER_NUM "
                              f"{p.get(INNER_BASE)!r}/{p.get(INNER_NUM)!r} unusable; no batch unit written")
        return False
    bcq = queue_for_write(store, msg.topic, msg.queueId)
    return bcq is not None and bcq.put_unit(msg.physicalOffsetField, msg.storeSize, msg.tagsCode,
                                            msg.storeTimestamp, base, num)


def offset_by_time(bcq: BatchConsumeQueue, timestamp: int, boundary: str | None) -> int:
    """BatchConsumeQueue.getOffsetInQueueByTime (5.3.3), clamped to [min, max] as
    ConsumeQueueStore does. The file: the last one when its first unit is stored at or before
    the time, else the file whose first unit is the latest stored at or before it (its time
    cache; the first file when there is none). In that file: the base of its last unit when
    the time is at or after that unit's, else the unit binarySearchRight finds (LOWER: the
    first unit stored at or after the time; UPPER: the last unit stored at it when one is, else
    also the first stored after it), else -1.
    The answer is a unit's base, never the queue's max, so a time after every message gives
    the last unit's base."""
    counts = bcq._counts
    if not counts:
        return 0
    firsts = [int(bcq.file_units(i)[0]["storeTimestamp"]) if n else None for i, n in enumerate(counts)]
    target = len(counts) - 1
    if firsts[target] is None or firsts[target] > timestamp:
        floor = None   # the time cache's floor entry (equal times: the later file)
        for i, t in enumerate(firsts):
            if t is not None and t <= timestamp and (floor is None or t >= firsts[floor]):
                floor = i
        target = 0 if floor is None else floor
    u = bcq.file_units(target)
    found = -1
    if len(u):
        times = u["storeTimestamp"]
        if timestamp >= int(times[-1]):
            found = int(u["msgBaseOffset"][-1])
        else:
            j = search_right(times, timestamp, (boundary or "lower").lower() == "upper")
            found = int(u["msgBaseOffset"][j]) if j >= 0 else -1
    return min(max(found, bcq.min_offset), bcq.max_offset)


def search_right(values, target: int, upper: bool) -> int:
    """BatchConsumeQueue.binarySearchRight over unit indices (its byte positions / 46), from the
    first value to the last of `values` (a column of the units it searches)."""
    left, right = 0, len(values) - 1
    while left <= right:
        mid = (left + right) // 2
        v = int(values[mid])
        if mid == right:
            return mid if v >= target else -1
        if mid == left:
            if v >= target:
                return mid
            left = mid + 1
        elif upper:
            if v <= target:
                left = mid
            else:
                right = mid - 1
        elif v < target:
            left = mid + 1
        else:
            right = mid
    return -1


def unit_problems(store, cl_min: int) -> list[dict]:
    """Every BatchCQ unit against the record it points at (topic, queue, size, tagsCode, store
    time, base = INNER_BASE or queueOffset, batch size = INNER_NUM or 1) and the bases'
    continuity: dicts with problem, file (relative to the root), fileOffset, topic, queueId,
    queueOffset (the base), commitLogOffset, expected, actual."""
    from engine.format.batch_cq_unit import BATCH_CQ_DIR
    from engine.format.inner_batch import batch_position
    rows = []
    for (topic, qid), bcq in sorted(store.batch_queues.items()):
        prev_end = None
        for fi, mf in enumerate(bcq.queue.files):
            for j, u in enumerate(bcq.file_units(fi).tolist()):
                phy, size, tags, ts, base, num = u[0], u[1], u[2], u[3], u[4], u[5]
                row = dict(file=os.path.join(BATCH_CQ_DIR, topic, str(qid), mf.path.name),
                           fileOffset=j * BATCH_CQ_UNIT_SIZE, topic=topic, queueId=qid, queueOffset=base,
                           commitLogOffset=phy)
                if prev_end is not None and base != prev_end:
                    rows.append(dict(problem=f"unit base {base} does not follow the previous unit's end {prev_end}",
                                     **row))
                prev_end = base + num
                if phy < cl_min:
                    continue
                m = store.commitlog.get_message(phy, size)
                if m is None:
                    rows.append(dict(problem="unit without record", actual={"size": size}, **row))
                    continue
                want_base, want_num = batch_position(m.properties, m.queueOffset) or (m.queueOffset, 1)
                want = {"topic": m.topic, "queueId": m.queueId, "tagsCode": m.tagsCode,
                        "storeTimestamp": m.storeTimestamp, "msgBaseOffset": want_base, "batchSize": want_num}
                got = {"topic": topic, "queueId": qid, "tagsCode": tags, "storeTimestamp": ts, "msgBaseOffset": base,
                       "batchSize": num}
                if want != got:
                    rows.append(dict(problem="unit differs", expected=want, actual=got, **row))
    return rows
