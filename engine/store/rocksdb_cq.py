"""RocksDB ConsumeQueues (5.x `storeType=defaultRocksDB`: RocksDBConsumeQueueStore), read-only.

The whole `consumequeue/` folder is one RocksDB database (engine/format/rocksdb_cq.py gives its
keys and values). Queues are found from the `offset` column family's `max` keys: the max
offset is the last unit's cqOffset + 1, the min offset a `min` key's cqOffset (written only
once something was cleaned) or 0. Units are read a key range at a time from the `default`
family and handed out as numpy arrays in the file-based unit's dtype, so the MessageStore,
its pages, queries and checks treat both kinds alike (ConsumeQueue's reading side:
min_offset, max_offset, max_physic_offset, units, unit, broker_units). This kind also keeps
each unit's store time, which answers time lookups without reading the commitlog.

Writes are not implemented: MessageStore refuses a read-write open of such a store."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.format.lmq import LMQ_PREFIX
from engine.errors import CorruptDataError
from engine.files.rocksdb import ReadOnlyRocksDB
from engine.format import rocksdb_cq as fmt
from engine.format.cq_unit import CQ_UNIT_DTYPE
from engine.format.message import RecordStatus

CHUNK = 4096  # units per range read where a caller walks a whole queue


def is_rocksdb_cq(root: Path) -> bool:
    """The store keeps its consume queues in RocksDB: `consumequeue/` is a database."""
    return (Path(root) / "consumequeue" / "CURRENT").is_file()


def read_units(path, topic: str, queue_id: int, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """(queue offsets, units with store times) of the units present in [start, end) of one
    queue, straight from the database folder `path` (a scan worker has no MessageStore)."""
    db = ReadOnlyRocksDB(Path(path), fmt.COLUMN_FAMILIES)
    try:
        keys, values = db.scan("default", fmt.cq_key(topic, queue_id, max(start, 0)), fmt.cq_key(topic, queue_id, end))
    finally:
        db.close()
    ok = [i for i, v in enumerate(values) if len(v) == fmt.CQ_VALUE_SIZE]
    return fmt.key_offsets([keys[i] for i in ok]), fmt.cq_values([values[i] for i in ok])


class _NoFiles:
    """What a RocksDB queue shows the code that walks CQ files: none."""
    files: tuple = ()
    refused: tuple = ()
    min_offset = 0


NO_FILES = _NoFiles()


class RocksDBConsumeQueue:
    """One (topic, queueId) of a RocksDBConsumeQueueStore (a ConsumeQueueInterface)."""
    kind = "rocksdb"
    file_size = 0
    queue = NO_FILES

    def __init__(self, store: "RocksDBConsumeQueueStore", topic: str, queue_id: int, min_offset: int,
                 max_offset: int, max_physic_offset: int):
        self._store = store
        self.topic = topic
        self.queue_id = queue_id
        self.lmq = topic.startswith(LMQ_PREFIX)  # an LMQ kept in RocksDB (engine/store/lmq.py)
        self.directory = store.path
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.max_physic_offset = max_physic_offset  # end of the last unit's record, -1 if none
        self._prefix = fmt.queue_prefix(topic, queue_id)
        self._added: list[tuple[int, int, int, int]] = []   # the crash view's units (put_unit), in memory
        self.min_key: tuple[int, int] | None = None   # the offset table's (phyOffset, cqOffset) entries
        self.max_key: tuple[int, int] | None = None
        self._added_from = max_offset
        self._added_arr: np.ndarray | None = None

    @property
    def min_logic_offset(self) -> int:
        return self.min_offset

    # ---- reading ------------------------------------------------------------------------
    def units_with_times(self, start: int, end: int) -> np.ndarray:
        """Units [start, end) clamped to [min, max), as stored (fmt.CQ_VALUE_DTYPE: with
        storeTimestamp); a missing unit ends them (one range read). Past the database's units
        come those the crash view added in memory."""
        start, end = max(start, self.min_offset, 0), min(end, self.max_offset)
        if start >= end:
            return np.empty(0, fmt.CQ_VALUE_DTYPE)
        split = self._added_from if self._added else end
        disk = self._stored_units(start, min(end, split)) if start < split else np.empty(0, fmt.CQ_VALUE_DTYPE)
        if end <= split or len(disk) < max(0, split - start):
            return disk
        added = self._added_units()[max(start, split) - split:end - split]
        return np.concatenate([disk, added]) if len(disk) else added

    def _added_units(self) -> np.ndarray:
        if self._added_arr is None or len(self._added_arr) != len(self._added):
            self._added_arr = np.array(self._added, dtype=fmt.CQ_VALUE_DTYPE)
        return self._added_arr

    def _stored_units(self, start: int, end: int) -> np.ndarray:
        keys, values = self._store.db.scan("default", fmt.cq_key(self.topic, self.queue_id, start),
                                           fmt.cq_key(self.topic, self.queue_id, end))
        offs = fmt.key_offsets(keys)
        n = len(offs)
        gap = np.flatnonzero(offs != np.arange(start, start + n))
        if gap.size:
            n = int(gap[0])
        try:
            return fmt.cq_values(values[:n])
        except ValueError as e:
            raise CorruptDataError(f"{self.topic}/{self.queue_id}: {e}", path=str(self.directory),
                                   offset=start) from None

    def units(self, start: int, end: int) -> np.ndarray:
        """Units [start, end) in the file-based unit's dtype (commitLogOffset, size, tagsCode)."""
        u = self.units_with_times(start, end)
        out = np.empty(len(u), CQ_UNIT_DTYPE)
        for name in CQ_UNIT_DTYPE.names:
            out[name] = u[name]
        return out

    def unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        u = self.units(queue_offset, queue_offset + 1)
        if len(u) == 0:
            return None
        return int(u[0]["commitLogOffset"]), int(u[0]["size"]), int(u[0]["tagsCode"])

    def broker_units(self, queue_offset: int, max_count: int) -> np.ndarray:
        """What one broker getMessage reads: `max_count` units from `queue_offset` (a RocksDB
        queue has no file end to stop at)."""
        return self.units(queue_offset, queue_offset + max(0, max_count))

    def store_time(self, queue_offset: int) -> int:
        """The unit's own store time (getCqUnitAndStoreTime: whatever the queue's bounds; -1
        when there is no unit)."""
        u = self._at(queue_offset)
        return u[1] if u is not None else -1

    def _at(self, queue_offset: int) -> tuple[int, int] | None:
        """(commitLogOffset, storeTimestamp) of the unit at `queue_offset` (getCQInKV: the key
        read whatever the queue's bounds; the crash view's units past the database's), None
        when absent."""
        if self._added and self._added_from <= queue_offset < self._added_from + len(self._added):
            u = self._added[queue_offset - self._added_from]
            return u[0], u[3]
        v = self._store.db.get("default", fmt.cq_key(self.topic, self.queue_id, queue_offset))
        if v is None or len(v) != fmt.CQ_VALUE_SIZE:
            return None
        phy, _size, _tags, ts = fmt.decode_cq_value(v)
        return phy, ts

    def offset_by_time(self, timestamp: int, boundary: str | None) -> int:
        """RocksDBConsumeQueueStore.getOffsetInQueueByTime (binarySearchInCQByTime), which the
        store does not clamp: after the last unit LOWER gives max, UPPER the last unit; before
        the first, LOWER the min and UPPER 0; else a binary search over the units whose record
        is still in the commitlog, LOWER the first unit stored at or after the time, UPPER the
        last at or before it (-1 when there is none)."""
        lower = (boundary or "lower").lower() != "upper"
        low, high = self.min_offset, self.max_offset - 1
        if self.max_offset <= 0:
            return 0
        ceiling, floor = high, low
        u = self._at(ceiling)
        if u is not None and u[1] < timestamp:
            return ceiling + 1 if lower else ceiling
        u = self._at(floor)
        if u is not None and u[1] > timestamp:
            return floor if lower else 0
        min_phy = self._store.commitlog_min()
        target = left = right = -1
        while high >= low:
            mid = low + ((high - low) >> 1)
            u = self._at(mid)
            if u is None:
                low = mid + 1
                continue
            if u[0] < min_phy:
                low, left = mid + 1, mid
                continue
            if u[1] < 0:
                return 0
            if u[1] == timestamp:
                target = mid
                break
            if u[1] > timestamp:
                high, right = mid - 1, mid
            else:
                low, left = mid + 1, mid
        if target < 0:
            return right if lower else left
        step, stop = (-1, floor) if lower else (1, ceiling)
        while (target + step >= stop) if lower else (target + step <= stop):
            u = self._at(target + step)
            if u is None or u[1] != timestamp:
                break
            target += step
        return target

    def truncate_dirty(self, phy_end: int) -> None:
        """Read-only recovery: units whose record starts at or past the commitlog end are not
        shown (RocketMQ drops them on restart)."""
        while self.max_offset > self.min_offset and self.max_physic_offset > phy_end:
            a = max(self.min_offset, self.max_offset - 64)
            u = self.units(a, self.max_offset)
            if len(u) < self.max_offset - a:  # a hole: keep what is readable below it
                self.max_offset = a + len(u)
                continue
            keep = np.flatnonzero(u["commitLogOffset"] < phy_end)
            if keep.size:
                last = u[int(keep[-1])]
                self.max_offset = a + int(keep[-1]) + 1
                self.max_physic_offset = int(last["commitLogOffset"]) + int(last["size"])
                return
            self.max_offset = a
        if self.max_offset <= self.min_offset:
            self.max_physic_offset = -1

    def correct_min_offset(self, commitlog_min: int) -> None:
        """RocksDBConsumeQueueOffsetTable.getMinCqOffset, without its writes: the `min` entry
        stands while its record is still in the commitlog; else (commitlog files deleted since,
        or no `min` entry) the first unit whose record is not below the commitlog's min
        (binarySearchInCQ from the entry's cqOffset, or 0), the max + 1 when even the last unit's
        record is gone, and the entry's offset when the search finds none."""
        if self.min_key is not None and self.min_key[0] >= commitlog_min or self.max_key is None:
            return
        max_phy, max_cq = self.max_key
        if max_phy < commitlog_min:
            self.min_offset = max_cq + 1
            return
        low, high, found = (self.min_key[1] if self.min_key is not None else 0), max_cq, -1
        while high >= low:
            mid = low + ((high - low) >> 1)
            u = self._at(mid)
            if u is None:
                low = mid + 1
                continue
            phy = u[0]
            if phy >= commitlog_min:
                found, high = mid, mid - 1
                if phy == commitlog_min:
                    break
            else:
                low = mid + 1
        if found >= 0:
            if found > self.min_offset and self._at(found - 1) is None:
                self._store.warnings.append(
                    f"RocksDB queue {self.topic}/{self.queue_id} has no unit at {found - 1}: RocketMQ's min offset "
                    f"search (getMinCqOffset) steps over it, so the queue starts at {found} and the units before it "
                    "are not served")
            self.min_offset = found

    # ---- the crash view (engine.store.crash_view): what the restarted broker's dispatch adds
    def put_unit(self, phy_offset: int, size: int, tags_code: int, queue_offset: int,
                 append_when_ahead: bool = False, store_timestamp: int = -1) -> bool:
        """RocketMQ writes the unit under its key, with the dispatched record's store time;
        here it is kept in memory (the database is never written). A unit the queue has is
        left; a queue's first unit starts it. One past the end of a queue that has units would
        leave a hole, which this in-memory tail cannot hold: it is not kept, and said."""
        if queue_offset < self.max_offset:
            return False
        if queue_offset > self.max_offset:
            if self.max_offset > self.min_offset:
                w = (f"RocksDB queue {self.topic}/{self.queue_id}: the crash recovery's units from {queue_offset} on "
                     f"are past the queue's end {self.max_offset} (a hole RocketMQ would leave); they are not shown")
                if not any(x.startswith(w[:w.index(" units from")]) for x in self._store.warnings):   # once a queue
                    self._store.warnings.append(w)
                return False
            self.min_offset = self.max_offset = queue_offset
        if not self._added:
            self._added_from = queue_offset
        self._added.append((phy_offset, size, tags_code, store_timestamp))
        self.max_offset, self.max_physic_offset = queue_offset + 1, phy_offset + size
        return True

    @property
    def units_in_memory(self) -> int:
        """Units the crash view added (in this process only)."""
        return len(self._added)

    def view_begin(self) -> tuple[int, int, int]:
        """(What put_unit adds is in memory already.) The bounds view_undo puts back."""
        return self.min_offset, self.max_offset, self.max_physic_offset

    def view_keep(self, was: tuple[int, int, int]) -> None:
        pass

    def view_undo(self, was: tuple[int, int, int]) -> None:
        """The queue as the database has it (a crash view given up)."""
        self._added, self._added_arr = [], None
        self.min_offset, self.max_offset, self.max_physic_offset = was
        self._added_from = self.max_offset

    def close(self) -> None:
        pass


class RocksDBConsumeQueueStore:
    """The database, its queues and the dispatch checkpoint (CHECKPOINT_TOPIC)."""

    def __init__(self, root: Path):
        self.path = Path(root) / "consumequeue"
        self.db = ReadOnlyRocksDB(self.path, fmt.COLUMN_FAMILIES)
        self.committed_phy_offset: int | None = None
        self.warnings: list[str] = []
        self.queues: dict[tuple[str, int], RocksDBConsumeQueue] = {}
        try:
            self._load()
        except BaseException:
            self.db.close()
            raise

    def _load(self) -> None:
        keys, values = self.db.scan("offset", b"")
        bounds: dict[tuple[str, int], dict[str, tuple[int, int]]] = {}
        for k, v in zip(keys, values):
            try:
                topic, bound, qid = fmt.decode_offset_key(k)
                if topic == fmt.CHECKPOINT_TOPIC and bound == fmt.MAX and qid == 0 and len(v) == 8:
                    self.committed_phy_offset = fmt.decode_checkpoint_value(v)
                    continue
                bounds.setdefault((topic, qid), {})[bound] = fmt.decode_offset_value(v)
            except ValueError as e:
                self.warnings.append(f"offset table entry {k.hex()} skipped: {e}")
        for topic, qid, last in self._unit_ranges():
            b = bounds.setdefault((topic, qid), {})
            if fmt.MAX not in b:  # units without a max entry: the last unit stands for it
                self.warnings.append(f"RocksDB queue {topic}/{qid} has units but no max offset entry: "
                                     f"its last unit ({last}) is taken as the max")
                v = self.db.get("default", fmt.cq_key(topic, qid, last))
                b[fmt.MAX] = (fmt.decode_cq_value(v)[0] if v is not None and len(v) == fmt.CQ_VALUE_SIZE else 0, last)
        for (topic, qid), b in sorted(bounds.items()):
            if fmt.MAX not in b:
                continue
            max_phy, max_cq = b[fmt.MAX]
            mn = b[fmt.MIN][1] if fmt.MIN in b else 0
            v = self.db.get("default", fmt.cq_key(topic, qid, max_cq))
            size = fmt.decode_cq_value(v)[1] if v is not None and len(v) == fmt.CQ_VALUE_SIZE else 0
            cq = self.queues[(topic, qid)] = RocksDBConsumeQueue(self, topic, qid, min(mn, max_cq + 1), max_cq + 1,
                                                                 max_phy + size)
            cq.min_key, cq.max_key = b.get(fmt.MIN), (max_phy, max_cq)

    def _unit_ranges(self):
        """(topic, queueId, last cqOffset) of every queue with units in the default family: one
        seek to each queue's first key and one to its last, hopping from queue to queue."""
        at = b""
        while True:
            keys, _ = self.db.scan("default", at, None, limit=1)
            if not keys:
                return
            try:
                topic, qid, _off = fmt.decode_cq_key(keys[0])
            except ValueError as e:
                self.warnings.append(f"unit key {keys[0].hex()} not understood ({e}); the queues after it were "
                                     "found from the offset table only")
                return
            prefix = fmt.queue_prefix(topic, qid)
            nxt = prefix[:-1] + bytes([fmt.CTRL_1 + 1])  # just past every key of this queue
            last, _ = self.db.scan("default", prefix, nxt, limit=1, reverse=True)
            if last:
                yield topic, qid, fmt.decode_cq_key(last[0])[2]
            at = nxt

    def commitlog_min(self) -> int:
        """The commitlog's min offset (getMinPhyOffset) where this database belongs to a store,
        else 0 (a scan worker reading the database alone)."""
        store = getattr(self, "store", None)
        return store.commitlog.min_offset if store is not None and store.commitlog is not None else 0

    def vouched_end(self, commitlog) -> int | None:
        """End of the last record any queue references, if that record checks out (a read-only
        open's recovery scans for the commitlog end from there)."""
        q = max(self.queues.values(), key=lambda c: c.max_physic_offset, default=None)
        u = q.unit(q.max_offset - 1) if q is not None and q.max_offset > q.min_offset else None
        if u is None:
            return None
        r = commitlog.read_record(u[0], commitlog.recover_opts)
        if r.status is not RecordStatus.MESSAGE or r.size != u[1]:
            return None
        return u[0] + u[1]

    def info(self) -> dict:
        return {"storeType": "defaultRocksDB", "path": str(self.path),
                "columnFamilies": list(fmt.COLUMN_FAMILIES), "queues": len(self.queues),
                "committedMaxPhyOffset": self.committed_phy_offset}

    def close(self) -> None:
        self.db.close()
