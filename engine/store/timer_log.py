"""TimerLog: the 5.x timer store's append-only log of 52-byte units (`<root>/timerlog/`, a
file queue of `mappedFileSizeTimerLog`-sized files named by their first position).

Nothing records how much of a file is used: units are read until the first one whose size is
not 52. A full file ends with a blank record (remaining bytes, 0, the commitlog's blank magic);
a zero size is the end of the written data; anything else is damage, and reading goes on in
the next file as TimerLog's own recovery would. Units are read all at once with numpy and kept
as native integers (TIMERLOG_UNIT_NATIVE), never as Python objects."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.errors import StoreError
from engine.files.mapped_file_queue import MappedFileQueue
from engine.format.timer_layout import (TIMERLOG_BLANK, TIMERLOG_BLANK_MAGIC, TIMERLOG_MIN_BLANK_LEN, TIMERLOG_SIZE,
                                        TIMERLOG_UNIT_DTYPE, TIMERLOG_UNIT_NATIVE, TIMERLOG_UNIT_SIZE)

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


@dataclass
class TimerLog:
    directory: Path
    file_size: int
    queue: MappedFileQueue | None = None
    files: list[TimerLogFile] = field(default_factory=list)
    units: np.ndarray = field(default_factory=lambda: np.empty(0, TIMERLOG_UNIT_NATIVE))
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, directory: Path, file_size: int) -> "TimerLog":
        log = cls(Path(directory), file_size)
        log.queue = MappedFileQueue(log.directory, file_size).load(tolerant=True)
        log.warnings += [f"timerlog: {r}" for r in log.queue.refused]
        for a, b in log.queue.gaps:
            log.warnings.append(f"timerlog files missing between positions {a} and {b}")
        parts = []
        for f in log.queue.files:
            info, units = _read_file(f)
            log.files.append(info)
            parts.append(units)
            if info.stop == STOP_DAMAGED:
                log.warnings.append(f"timerlog {f.path}: unit at position {f.file_from_offset + info.data_end} is "
                                    "damaged (size neither 52 nor a blank record); the rest of the file is passed over")
        if parts:
            log.units = np.concatenate(parts)
        for f in log.queue.files:
            f.wrote_position = next(i.data_end for i in log.files if i.file_from_offset == f.file_from_offset)
        return log

    # ---- positions ---------------------------------------------------------------------------
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

    def index_of(self, pos) -> np.ndarray | int:
        """Row of the unit at position `pos` in `units` (an int or an array); -1 where none starts there."""
        p = self.units["pos"]
        scalar = np.isscalar(pos)
        q = np.atleast_1d(np.asarray(pos, dtype=np.int64))
        i = np.searchsorted(p, q)
        i = np.minimum(i, max(0, len(p) - 1))
        ok = (len(p) > 0) & (p[i] == q) if len(p) else np.zeros(len(q), bool)
        out = np.where(ok, i, -1)
        return int(out[0]) if scalar else out

    def unit_at(self, pos: int) -> np.void | None:
        i = self.index_of(pos)
        return None if i < 0 else self.units[i]

    def chain(self, last_pos: int, limit: int = 1 << 20) -> list[int]:
        """Positions from `last_pos` back through prevPos until -1 (a slot's units, newest first),
        as TimerMessageStore.dequeue walks them. Stops at a position holding no unit, at a
        position seen before (a cycle) or after `limit` units."""
        out: list[int] = []
        seen: set[int] = set()
        pos = last_pos
        prev = self.units["prevPos"]
        while pos >= 0 and len(out) < limit and pos not in seen:
            i = self.index_of(pos)
            if i < 0:
                break
            seen.add(pos)
            out.append(pos)
            pos = int(prev[i])
        return out

    def close(self) -> None:
        if self.queue is not None:
            self.queue.close()


def _read_file(f) -> tuple[TimerLogFile, np.ndarray]:
    n = f.file_size // TIMERLOG_UNIT_SIZE
    raw = np.frombuffer(f.mm, dtype=TIMERLOG_UNIT_DTYPE, count=n)
    try:
        bad = np.flatnonzero(raw["size"] != TIMERLOG_UNIT_SIZE)
        end = int(bad[0]) if bad.size else n
        units = np.empty(end, dtype=TIMERLOG_UNIT_NATIVE)
        units["pos"] = f.file_from_offset + np.arange(end, dtype=np.int64) * TIMERLOG_UNIT_SIZE
        for name in TIMERLOG_UNIT_DTYPE.names:
            units[name] = raw[name][:end]
    finally:
        del raw
    pos = end * TIMERLOG_UNIT_SIZE
    info = TimerLogFile(f.path.name, f.file_from_offset, f.file_size, end, pos, STOP_FULL if end == n else STOP_END)
    remaining = f.file_size - pos
    if end < n or remaining > 0:
        size, zero, magic = _blank_at(f.buf, pos, f.file_size)
        if magic == TIMERLOG_BLANK_MAGIC and size == remaining and remaining >= TIMERLOG_MIN_BLANK_LEN:
            info.stop, info.blank_at, info.blank_size = STOP_BLANK, f.file_from_offset + pos, size
        elif end < n:
            info.stop = STOP_END if size == 0 else STOP_DAMAGED
    return info, units


def _blank_at(buf, pos: int, size: int) -> tuple[int, int, int]:
    if size - pos >= TIMERLOG_BLANK.size:
        return TIMERLOG_BLANK.unpack_from(buf, pos)
    if size - pos >= TIMERLOG_SIZE.size:
        return TIMERLOG_SIZE.unpack_from(buf, pos)[0], 0, 0
    return 0, 0, 0


def open_timerlog(directory: Path, configured: int | None) -> TimerLog | None:
    """The timerlog under `directory` (None without one): file size `configured` when given,
    else what the files say."""
    if not directory.is_dir():
        return None
    size, notes = (configured, []) if configured else detect_file_size(directory)
    if size is None:
        log = TimerLog(Path(directory), 0)
        log.warnings.append("timerlog folder holds no timerlog files")
        return log
    if size < TIMERLOG_UNIT_SIZE:
        raise StoreError(f"timerlog files of {size} bytes cannot hold a 52-byte unit", path=str(directory))
    log = TimerLog.load(directory, size)
    log.warnings[:0] = notes
    return log
