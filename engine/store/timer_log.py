"""TimerLog: the 5.x timer store's append-only log of 52-byte units (`<root>/timerlog/`, a
file queue of `mappedFileSizeTimerLog`-sized files named by their first position).

Nothing records how much of a file is used. A full file ends with a blank record (remaining
bytes, 0, the commitlog's blank magic) exactly where TimerLog.append put it, after the last
unit that left 52 + 16 bytes; the last file's units end where the sizes stop being 52. Opening
maps the files and finds those ends with a few reads per file (a broker keeps gigabytes of
timerlog); `units` reads every unit with numpy, once, when asked, and then also finds damage
inside a file (a unit whose size is neither 52 nor a blank: the rest of that file is passed
over, as TimerLog's own recovery would). Units are kept as native integers
(TIMERLOG_UNIT_NATIVE), never as Python objects."""
from __future__ import annotations

import os
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import StoreError
from engine.files.mapped_file_queue import MappedFileQueue
from engine.format.timer_layout import (TIMERLOG_BLANK, TIMERLOG_BLANK_MAGIC, TIMERLOG_MIN_BLANK_LEN, TIMERLOG_SIZE,
                                        TIMERLOG_UNIT, TIMERLOG_UNIT_DTYPE, TIMERLOG_UNIT_NATIVE, TIMERLOG_UNIT_SIZE)

STOP_BLANK = "blank"        # a blank record ends the file (it is full)
STOP_END = "end"            # zeros: the end of the written data
STOP_FULL = "full"          # units up to the last byte (no room was left for a blank)
STOP_DAMAGED = "damaged"    # a unit whose size is neither 52 nor a valid blank


@dataclass
class TimerLogFile:
    """What one timerlog file holds."""
    name: str
    file_from_offset: int
    file_size: int
    units: int                     # 52-byte units from the start of the file
    data_end: int                  # file position after the last unit
    stop: str                      # STOP_*
    blank_at: int | None = None    # global position of the blank record, if any
    blank_size: int = 0

    def to_json(self) -> dict:
        return {"name": self.name, "fileFromOffset": self.file_from_offset, "fileSize": self.file_size,
                "units": self.units, "dataEnd": self.data_end, "wrotePosition": self.data_end, "stop": self.stop,
                "blankAt": self.blank_at, "blankSize": self.blank_size}


def detect_file_size(directory: Path) -> tuple[int | None, list[str]]:
    """mappedFileSizeTimerLog as the files say (the most common size of the digit-named files),
    with a note when they disagree."""
    sizes: dict[int, int] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return None, []
    for e in entries:
        if e.name.isdigit() and e.is_file():
            s = e.stat().st_size
            if s:
                sizes[s] = sizes.get(s, 0) + 1
    if not sizes:
        return None, []
    best = max(sizes, key=lambda s: (sizes[s], s))
    notes = [] if len(sizes) == 1 else [f"timerlog files have different sizes {sorted(sizes)}; reading them as "
                                        f"{best}-byte files"]
    return best, notes


def units_per_full_file(file_size: int) -> int:
    """TimerLog.append puts a unit only while 52 + MIN_BLANK_LEN bytes are left."""
    return max(0, (file_size - TIMERLOG_MIN_BLANK_LEN) // TIMERLOG_UNIT_SIZE)


class TimerLog:
    def __init__(self, directory: Path, file_size: int):
        self.directory = Path(directory)
        self.file_size = file_size
        self.queue: MappedFileQueue | None = None
        self.files: list[TimerLogFile] = []
        self.warnings: list[str] = []
        self._units: np.ndarray | None = None
        self._starts: list[int] = []   # each file's first position
        self._rows: list[int] = [0]    # each file's first row in `units`

    @classmethod
    def load(cls, directory: Path, file_size: int) -> "TimerLog":
        log = cls(directory, file_size)
        log.queue = MappedFileQueue(log.directory, file_size).load(tolerant=True)
        log.warnings += [f"timerlog: {r}" for r in log.queue.refused]
        for a, b in log.queue.gaps:
            log.warnings.append(f"timerlog files missing between positions {a} and {b}")
        log.files = [_quick_info(f) for f in log.queue.files]
        log.warnings += [f"timerlog {log.directory / i.name}: unit at position {i.file_from_offset + i.data_end} is "
                         "damaged (size neither 52 nor a blank record); the rest of the file is passed over"
                         for i in log.files if i.stop == STOP_DAMAGED]
        log._index()
        return log

    def _index(self) -> None:
        self._starts = [f.file_from_offset for f in self.files]
        self._rows = np.concatenate(([0], np.cumsum([f.units for f in self.files], dtype=np.int64))).tolist()
        for f, info in zip(self.queue.files, self.files):
            f.wrote_position = info.data_end

    # ---- every unit ----------------------------------------------------------------------------
    @property
    def units(self) -> np.ndarray:
        """Every unit of every file (TIMERLOG_UNIT_NATIVE, by position), read on first use."""
        if self._units is None:
            parts = []
            for k, f in enumerate(self.queue.files if self.queue else []):
                units = _read_units(f, self.files[k].units)
                if len(units) < self.files[k].units:        # damage before the end the quick look found
                    info = self.files[k]
                    info.units, info.data_end, info.stop = len(units), len(units) * TIMERLOG_UNIT_SIZE, STOP_DAMAGED
                    info.blank_at, info.blank_size = None, 0
                    self.warnings.append(f"timerlog {f.path}: unit at position {f.file_from_offset + info.data_end} "
                                         "is damaged (size neither 52 nor a blank record); the rest of the file "
                                         "is passed over")
                parts.append(units)
            self._units = np.concatenate(parts) if parts else np.empty(0, TIMERLOG_UNIT_NATIVE)
            self._index()
        return self._units

    # ---- positions ---------------------------------------------------------------------------
    @property
    def unit_count(self) -> int:
        return sum(f.units for f in self.files)

    @property
    def min_pos(self) -> int:
        return self.queue.min_offset if self.queue else 0

    @property
    def max_pos(self) -> int:
        """After the last unit of the last file holding any."""
        for f in reversed(self.files):
            if f.units:
                return f.file_from_offset + f.data_end
        return self.files[0].file_from_offset if self.files else 0

    def _locate(self, pos: int) -> tuple[int, int]:
        """(file number, unit number in it) of the unit at `pos`, or (-1, -1)."""
        k = bisect_right(self._starts, pos) - 1
        if k < 0:
            return -1, -1
        info = self.files[k]
        off = pos - info.file_from_offset
        if off % TIMERLOG_UNIT_SIZE or off // TIMERLOG_UNIT_SIZE >= info.units:
            return -1, -1
        return k, off // TIMERLOG_UNIT_SIZE

    def index_of(self, pos) -> np.ndarray | int:
        """Row of the unit at position `pos` in `units` (an int or an array); -1 where none starts there."""
        if np.isscalar(pos):
            self.units
            k, n = self._locate(int(pos))
            return -1 if k < 0 else self._rows[k] + n
        p = self.units["pos"]
        q = np.atleast_1d(np.asarray(pos, dtype=np.int64))
        if not len(p):
            return np.full(len(q), -1, dtype=np.int64)
        i = np.minimum(np.searchsorted(p, q), len(p) - 1)
        return np.where(p[i] == q, i, -1)

    def unit_at(self, pos: int) -> np.void | None:
        """The unit at `pos` (a TIMERLOG_UNIT_NATIVE row), read straight from its file."""
        k, n = self._locate(int(pos))
        if k < 0:
            return None
        if self._units is not None:
            return self._units[self._rows[k] + n]
        fields = TIMERLOG_UNIT.unpack_from(self.queue.files[k].buf, n * TIMERLOG_UNIT_SIZE)
        return np.array([(pos, *fields)], dtype=TIMERLOG_UNIT_NATIVE)[0]

    def chain(self, last_pos: int, limit: int = 1 << 20) -> list[int]:
        """Positions from `last_pos` back through prevPos until -1 (a slot's units, newest first),
        as TimerMessageStore.dequeue walks them. Stops at a position holding no unit, at a
        position seen before (a cycle) or after `limit` units."""
        out: list[int] = []
        seen: set[int] = set()
        pos = last_pos
        while pos >= 0 and len(out) < limit and pos not in seen:
            u = self.unit_at(pos)
            if u is None:
                break
            seen.add(pos)
            out.append(pos)
            pos = int(u["prevPos"])
        return out

    def close(self) -> None:
        if self.queue is not None:
            self.queue.close()


def _size_at(buf, pos: int, limit: int) -> int:
    return TIMERLOG_SIZE.unpack_from(buf, pos)[0] if limit - pos >= TIMERLOG_SIZE.size else 0


def _quick_info(f) -> TimerLogFile:
    """Where a file's units end, from a few reads: a full file has its blank where TimerLog.append
    wrote it; otherwise the sizes are 52 up to the end of the data (binary search)."""
    size = f.file_size
    full = units_per_full_file(size)
    n = size // TIMERLOG_UNIT_SIZE
    pos = full * TIMERLOG_UNIT_SIZE
    if _blank_at(f.buf, pos, size) and all(_size_at(f.buf, p, size) == TIMERLOG_UNIT_SIZE
                                           for p in (0, pos - TIMERLOG_UNIT_SIZE) if p >= 0 and full):
        end = full
    else:
        lo, hi = 0, n          # units [0, lo) have size 52; the first non-52 is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if _size_at(f.buf, mid * TIMERLOG_UNIT_SIZE, size) == TIMERLOG_UNIT_SIZE:
                lo = mid + 1
            else:
                hi = mid
        end = lo
    return _info(f, end)


def _info(f, end: int) -> TimerLogFile:
    n = f.file_size // TIMERLOG_UNIT_SIZE
    pos = end * TIMERLOG_UNIT_SIZE
    info = TimerLogFile(f.path.name, f.file_from_offset, f.file_size, end, pos, STOP_FULL if end == n else STOP_END)
    blank = _blank_at(f.buf, pos, f.file_size)
    if blank:
        info.stop, info.blank_at, info.blank_size = STOP_BLANK, f.file_from_offset + pos, blank
    elif end < n and _size_at(f.buf, pos, f.file_size) != 0:
        info.stop = STOP_DAMAGED
    return info


def _blank_at(buf, pos: int, size: int) -> int:
    """The size of the blank record at `pos` (0 when there is none)."""
    remaining = size - pos
    if remaining < max(TIMERLOG_MIN_BLANK_LEN, TIMERLOG_BLANK.size):
        return 0
    n, _, magic = TIMERLOG_BLANK.unpack_from(buf, pos)
    return n if magic == TIMERLOG_BLANK_MAGIC and n == remaining else 0


def _read_units(f, expect: int) -> np.ndarray:
    """The first `expect` units of a file (fewer when one of them is not 52 bytes), vectorised."""
    raw = np.frombuffer(f.mm, dtype=TIMERLOG_UNIT_DTYPE, count=expect)
    try:
        bad = np.flatnonzero(raw["size"] != TIMERLOG_UNIT_SIZE)
        end = int(bad[0]) if bad.size else expect
        units = np.empty(end, dtype=TIMERLOG_UNIT_NATIVE)
        units["pos"] = f.file_from_offset + np.arange(end, dtype=np.int64) * TIMERLOG_UNIT_SIZE
        for name in TIMERLOG_UNIT_DTYPE.names:
            units[name] = raw[name][:end]
    finally:
        del raw
    return units


def open_timerlog(directory: Path, configured: int | None) -> TimerLog | None:
    """The timerlog under `directory` (None without one): file size `configured` when given,
    else what the files say."""
    if not directory.is_dir():
        return None
    size, notes = (configured, []) if configured else detect_file_size(directory)
    if size is None:
        log = TimerLog(directory, 0)
        log.warnings.append("timerlog folder holds no timerlog files")
        return log
    if size < TIMERLOG_UNIT_SIZE:
        raise StoreError(f"timerlog files of {size} bytes cannot hold a 52-byte unit", path=str(directory))
    log = TimerLog.load(directory, size)
    log.warnings[:0] = notes
    return log
