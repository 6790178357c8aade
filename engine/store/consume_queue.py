"""ConsumeQueue: per (topic, queueId), a dense array of 20-byte units pointing into the
CommitLog. Queue offset q is unit q; file k holds units [k*U, (k+1)*U).

    unit: +0 commitLogOffset i64 | +8 size i32 | +12 tagsCode i64      (big-endian)

Neither the write position nor the min offset is stored: the end is the first invalid unit
(commitLogOffset < 0 or size <= 0) and the min is recomputed from the commitlog's min offset."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.config import CQ_UNIT_SIZE
from engine.format.cq_unit import CQ_UNIT as _UNIT, CQ_UNIT_DTYPE, FILLER_SIZE, FILLER_UNIT, is_filler  # noqa: F401
from engine.format.lmq import LMQ_PREFIX
from engine.format.record import MIN_RECORD_SIZE  # noqa: F401 - the layouts are engine/format's
from engine.files.mapped_file import MappedFile
from engine.files.mapped_file_queue import MappedFileQueue
from engine.accel import load as _load_accel, state_property


class PyQueueState:
    """QueueState's pure twin (engine/accel/_state.pyx): where a ConsumeQueue's last unit's
    record ends."""
    __slots__ = ("max_physic_offset",)

    def __init__(self):
        self.max_physic_offset = -1


_STATE = _load_accel("_state")
QueueState = PyQueueState if _STATE is None else _STATE.QueueState   # max_physic_offset as a C field for the compiled put

_CQ = _load_accel("_cq")  # the compiled first-invalid-unit scan (None: numpy's)

_NO_FILLER = 0  # first_live's filler size that no written unit has (sizes are > 0): fillers count

CQ_RESERVE_STEP = 64 << 10  # 3,276 units reserved at a time: a queue of a few messages stays small


def units_of(f: MappedFile) -> np.ndarray:
    """Zero-copy structured view of a whole CQ file."""
    return np.frombuffer(f.mm, dtype=CQ_UNIT_DTYPE, count=f.file_size // CQ_UNIT_SIZE)


class ConsumeQueue:
    """One queue's files. `max_physic_offset` lives in `state` (a QueueState), which the
    compiled put takes."""
    __slots__ = ("lmq", "queue", "min_logic_offset", "state", "__dict__", "__weakref__")  # (read by the page loop)
    kind = "file"  # engine.store.consume_queue_interface.ConsumeQueueInterface
    max_physic_offset = state_property("max_physic_offset", "the end of the last unit's record (-1: none)")

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int, writable: bool = False,
                 tolerant: bool = False):
        self.topic = topic
        self.queue_id = queue_id
        self.lmq = topic.startswith(LMQ_PREFIX)  # getMessage answers its own messageQueueOffset
        self.directory = Path(directory)
        self.file_size = file_size
        self.units_per_file = file_size // CQ_UNIT_SIZE
        self.queue = MappedFileQueue(self.directory, file_size, writable, reserve_step=CQ_RESERVE_STEP).load(tolerant)
        self.min_logic_offset = 0            # byte position, like Java
        self.state = QueueState()            # max_physic_offset: end of the last unit's record, -1
        self._views: dict[int, np.ndarray] = {}

    # ---- views ---------------------------------------------------------------------
    def view(self, f: MappedFile) -> np.ndarray:
        v = self._views.get(f.file_from_offset)
        if v is None:
            v = self._views[f.file_from_offset] = units_of(f)
        return v

    # ---- bounds --------------------------------------------------------------------
    @property
    def min_offset(self) -> int:
        return self.min_logic_offset // CQ_UNIT_SIZE

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset // CQ_UNIT_SIZE


    # ---- recovery ------------------------------------------------------------------
    def recover(self, exact: bool = True) -> None:
        """§8.9: the end `find_end` finds, set (files after it dropped and zeroed when writable)."""
        found = self.find_end(exact)
        if found is not None:
            self.set_end(*found)

    def find_end(self, exact: bool = True) -> tuple[int, int] | None:
        """§8.9 without writing: (byte end, maxPhysicOffset) from the first invalid unit of the
        last three files; None with no file. exact=False (read-only opens and refreshes, with
        the compiled scan): the end by binary search plus an exact scan of the last 1,024 units
        before it -- where a crash or a live writer leaves torn units -- so an open costs
        O(files), not O(messages)."""
        files = self.queue.files
        if not files:
            return None
        max_physic = self.max_physic_offset
        end_file, end_pos = files[-1], self.file_size
        for f in files[max(0, len(files) - 3):]:
            u = self.view(f)
            if _CQ is not None:
                n = (_CQ.first_invalid(f.mm, 0, self.units_per_file) if exact
                     else _CQ.end_of_units(f.mm, self.units_per_file))
            else:
                valid = (u["commitLogOffset"] >= 0) & (u["size"] > 0)
                bad = np.flatnonzero(~valid)
                n = int(bad[0]) if bad.size else self.units_per_file
            if n:
                end = self._record_end(u, n)
                if end is not None:
                    max_physic = end
            end_file, end_pos = f, n * CQ_UNIT_SIZE
            if n < self.units_per_file:
                break
        return end_file.file_from_offset + end_pos, max_physic

    def set_end(self, end: int, max_physic_offset: int) -> None:
        self.max_physic_offset = max_physic_offset
        self._set_end(end)

    def truncate_dirty(self, phy_end: int) -> None:
        """§8.10: drop units whose record starts at or after the commitlog end `phy_end`."""
        self.set_end(*self.dirty_end(phy_end))

    def dirty_end(self, phy_end: int, limit: int | None = None) -> tuple[int, int]:
        """§8.10 without writing: (byte end, maxPhysicOffset) once the units whose record starts
        at or after `phy_end` are dropped. Walks back from the last file; a file whose first
        unit is dirty goes entirely. `limit`: a byte end `set_end` will have set first on a
        writable queue (files after it deleted, units after it zeroed)."""
        max_physic = phy_end
        end = self.queue.min_offset
        for f in reversed(self.queue.files):
            if limit is not None and f.file_from_offset >= limit:
                continue  # deleted, or zeroed from its first unit
            u = self.view(f)
            first_phy, first_size = int(u[0]["commitLogOffset"]), int(u[0]["size"])
            # a file created but not yet written (a writer's roll-over, seen live or after a
            # crash) goes too: Java would keep its zero first unit and stop here, leaving the
            # dirty units of the file before it in place
            if first_phy >= phy_end or first_phy < 0 or first_size <= 0:
                continue
            if _CQ is not None:  # Java compares unit 0 with the end only: the scan starts at 1
                n = _CQ.first_invalid(f.mm, 1, len(u), phy_end)
            else:
                ok = (u["commitLogOffset"] >= 0) & (u["size"] > 0) & (u["commitLogOffset"] < phy_end)
                ok[0] = True
                bad = np.flatnonzero(~ok)
                n = int(bad[0]) if bad.size else len(u)
            if limit is not None:
                n = min(n, (limit - f.file_from_offset) // CQ_UNIT_SIZE)
            rec_end = self._record_end(u, n)
            if rec_end is not None:
                max_physic = rec_end
            end = f.file_from_offset + n * CQ_UNIT_SIZE
            break
        return end, max_physic

    @staticmethod
    def _record_end(u: np.ndarray, n: int) -> int | None:
        """End of the record of the last unit among u[:n] that is not a filler (Java takes the
        last unit whatever it is: a queue ending in fillers, which only a crash in the middle
        of filling a gap leaves, would then skip every record below 2 GiB)."""
        last = u[n - 1]
        if not (int(last["commitLogOffset"]) == 0 and int(last["size"]) == FILLER_SIZE):
            return int(last["commitLogOffset"]) + int(last["size"])
        real = np.flatnonzero(~is_filler(u["commitLogOffset"][:n], u["size"][:n]))
        if not real.size:
            return None
        last = u[int(real[-1])]
        return int(last["commitLogOffset"]) + int(last["size"])

    def _set_end(self, end: int) -> None:
        q = self.queue
        if q.writable:
            for f in q.files:
                if f.file_from_offset > end:
                    self._views.pop(f.file_from_offset, None)
            q.truncate_to(end, zero=True)
        for f in q.files:
            f.wrote_position = f.flushed_position = min(self.file_size, max(0, end - f.file_from_offset))

    def correct_min_offset(self, commitlog_min: int) -> None:
        """correctMinOffset as a broker computes it when it loads the store: the first unit whose
        commitLogOffset is at or past the commitlog's min offset; an empty queue gets min == max.
        A filler unit counts by its commitLogOffset 0, as RocketMQ reads it: while the first
        commitlog file is there (min offset 0) a queue that starts with fillers (a late first
        unit, an LMQ whose first dispatch RocketMQ skipped) has its min at the first filler,
        and getMessage there answers MESSAGE_WAS_REMOVING (engine.store.page); once that file
        is gone the fillers fall below the min. (The files before the first one holding a live
        unit are those CleanConsumeQueueService deletes: passed over here.)"""
        files = self.queue.files
        self.min_logic_offset = files[0].file_from_offset if files else 0
        for f in files:
            n = f.wrote_position // CQ_UNIT_SIZE
            if n == 0:
                continue
            if _CQ is not None:  # reads units only up to the first live one
                i = _CQ.first_live(f.mm, n, commitlog_min, _NO_FILLER)
                if i < n:
                    self.min_logic_offset = f.file_from_offset + i * CQ_UNIT_SIZE
                    return
                continue
            u = self.view(f)[:n]
            live = u["commitLogOffset"] >= commitlog_min
            hit = np.flatnonzero(live)
            if hit.size:
                self.min_logic_offset = f.file_from_offset + int(hit[0]) * CQ_UNIT_SIZE
                return
        self.min_logic_offset = self.queue.max_offset

    # ---- reading -------------------------------------------------------------------
    def file_for(self, queue_offset: int) -> MappedFile | None:
        return self.queue.find(queue_offset * CQ_UNIT_SIZE)

    def units(self, start: int, end: int) -> np.ndarray:
        """Units [start, end) clamped to what exists; a view when inside one file, else a copy."""
        start = max(start, self.queue.min_offset // CQ_UNIT_SIZE)
        end = min(end, self.max_offset)
        parts = []
        q = start
        while q < end:
            f = self.file_for(q)
            if f is None:
                break
            first = f.file_from_offset // CQ_UNIT_SIZE
            stop = min(end, first + f.wrote_position // CQ_UNIT_SIZE)
            if stop <= q:
                break
            parts.append(self.view(f)[q - first: stop - first])
            q = stop
        if not parts:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        u = self.units(queue_offset, queue_offset + 1)
        if len(u) == 0:
            return None
        return int(u[0]["commitLogOffset"]), int(u[0]["size"]), int(u[0]["tagsCode"])

    def units_to_file_end(self, queue_offset: int) -> np.ndarray:
        """Like getIndexBuffer: from `queue_offset` to the end of its file's written part."""
        f = self.file_for(queue_offset)
        if f is None:
            return np.empty(0, dtype=CQ_UNIT_DTYPE)
        first = f.file_from_offset // CQ_UNIT_SIZE
        return self.view(f)[queue_offset - first: f.wrote_position // CQ_UNIT_SIZE]

    def broker_units(self, queue_offset: int, max_count: int) -> np.ndarray:
        """What one broker getMessage reads (the RocksDB queue reads `max_count` units)."""
        return self.units_to_file_end(queue_offset)

    # ---- a restart view (engine.store.crash_view): units added in this process only -------
    def view_begin(self) -> tuple:
        """The files into memory before the view adds units (the last one a private copy);
        returns what view_keep and view_undo take."""
        from engine.store.memory_files import queue_into_memory
        was = (self.queue, self.max_physic_offset, self.min_logic_offset)
        queue_into_memory(self)
        return was

    def view_keep(self, was: tuple) -> None:
        """The view stays: the replaced last file is let go (its private copy serves)."""
        from engine.store.memory_files import let_go_replaced
        let_go_replaced(was[0])

    def view_undo(self, was: tuple) -> None:
        """The queue as its files are (a view given up half-way); the view's copies let go."""
        from engine.store.memory_files import close_memory_files
        self._views.clear()
        close_memory_files(self.queue)
        self.queue, self.max_physic_offset, self.min_logic_offset = was

    def close(self) -> None:
        self._views.clear()
        self.queue.close()

    # ---- writing (dispatch) -----------------------------------------------------------
    def put_unit(self, phy_offset: int, size: int, tags_code: int, queue_offset: int,
                 append_when_ahead: bool = False, store_timestamp: int = -1) -> bool:
        """§8.7 putMessagePositionInfo: skips what is already there (re-dispatch), fills a
        late-starting first file with filler units, appends at the file end.

        One policy of our own: a record whose queue offset is past the queue's end (the
        records before it were lost in a commitlog hole, seen by a rebuild or a re-dispatch)
        is put at its own queue offset and the gap is filled with filler units, the way
        RocketMQ starts a late queue, so every later message keeps its queue offset (and
        consumer offsets keep pointing at the same messages). RocketMQ appends it at the end
        instead, shifting the rest of the queue. A gap larger than the lost commitlog bytes
        could hold (a damaged QUEUEOFFSET) is not filled: RocketMQ's append then.
        append_when_ahead (LMQ units, engine.store.lmq): RocketMQ's append at the end, always."""
        if phy_offset + size <= self.max_physic_offset:
            return False
        expect = queue_offset * CQ_UNIT_SIZE
        q = self.queue
        f = q.last
        first_created = f is None
        if first_created:
            f = q.create_next(expect - expect % self.file_size)
            f.wrote_position = 0
            if queue_offset != 0:
                self.min_logic_offset = expect
        elif f.wrote_position >= self.file_size:
            f = q.create_next(f.end_offset)
            f.wrote_position = 0
        current = f.file_from_offset + f.wrote_position
        if queue_offset != 0:
            if expect < current:
                return False  # "build consume queue repeatedly"
            if expect > current and (first_created or (not append_when_ahead
                                                       and self._gap_plausible(expect - current, phy_offset))):
                f = self._fill_to(f, expect)
        self.max_physic_offset = phy_offset + size
        f.append(_UNIT.pack(phy_offset, size, tags_code))
        return True

    def _gap_plausible(self, gap_bytes: int, phy_offset: int) -> bool:
        """Could the lost records of this queue (gap_bytes of units) fit between its last
        record and this one? (A new queue's first file is filled from its start, as RocketMQ
        does, whatever the gap.)"""
        lost = phy_offset - min(max(self.max_physic_offset, 0), phy_offset)
        return (gap_bytes // CQ_UNIT_SIZE) * MIN_RECORD_SIZE <= lost

    def _fill_to(self, f: MappedFile, expect: int) -> MappedFile:
        """Filler units from the queue's end up to byte position `expect`, file after file, in
        order: a crash leaves a queue ending in fillers, which recovery passes over (their
        record end is not taken as maxPhysicOffset) and the next re-dispatch continues."""
        while True:
            stop = min(expect, f.end_offset) - f.file_from_offset
            if stop > f.wrote_position:
                f.write_at(f.wrote_position, FILLER_UNIT * ((stop - f.wrote_position) // CQ_UNIT_SIZE))
                f.wrote_position = stop
            if f.file_from_offset + f.wrote_position >= expect and f.wrote_position < self.file_size:
                return f
            f = self.queue.create_next(f.end_offset)  # also when the gap ends with a file
            f.wrote_position = 0
            if f.file_from_offset >= expect:
                return f

    def flush(self) -> None:
        for f in self.queue.files[-2:]:
            f.flush()
