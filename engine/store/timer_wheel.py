"""TimerWheel: the 5.x timer store's slot file (`<root>/timerwheel`, slotsTotal x 2 slots of 32
bytes, 38,707,200 bytes whatever the precision; sparse, as RocketMQ creates it).

A slot holds its time in precision units, the timerlog positions of its first and last unit
and a count. Slots are never cleared after delivery: `get_slot` applies TimerWheel.getSlot's
rule (the stored time must be the asked time's own, else the slot reads empty), and only
timercheck's lastReadTimeMs says which slots the dequeue has processed. Non-zero slots are
found by reading only the file's data extents (holes read as zeros), with numpy."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import StoreError
from engine.files.mapped_file import data_extents, map_for_reading
from engine.format.timer_layout import (WHEEL_FILE_SIZE, WHEEL_SLOT, WHEEL_SLOT_DTYPE, WHEEL_SLOT_NATIVE,
                                        WHEEL_SLOT_SIZE, slot_index)


@dataclass(frozen=True, slots=True)
class Slot:
    """TimerWheel's Slot: timeMs is the stored time times the precision (-1: empty)."""
    timeMs: int
    firstPos: int
    lastPos: int
    num: int = 0
    magic: int = 0

    @property
    def empty(self) -> bool:
        return self.timeMs < 0

    def to_json(self) -> dict:
        return {"timeMs": self.timeMs, "firstPos": self.firstPos, "lastPos": self.lastPos, "num": self.num,
                "magic": self.magic}


EMPTY_SLOT = Slot(-1, -1, -1)


class TimerWheel:
    def __init__(self, path: Path, precision_ms: int):
        self.path = Path(path)
        self.precision_ms = precision_ms
        self.warnings: list[str] = []
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise StoreError(f"cannot open the timer wheel: {e.strerror}", path=str(self.path)) from None
        try:
            self.file_size = os.fstat(fd).st_size
            self.slots = self.file_size // WHEEL_SLOT_SIZE
            if self.file_size != WHEEL_FILE_SIZE:
                self.warnings.append(f"timerwheel is {self.file_size} bytes, not {WHEEL_FILE_SIZE} (604800 x 2 slots "
                                     f"of 32 bytes); reading it as {self.slots} slots")
            self.mm = map_for_reading(fd, self.file_size) if self.file_size else None
        finally:
            os.close(fd)
        self._occupied: np.ndarray | None = None

    def _scan(self) -> np.ndarray:
        """Every slot with a non-zero byte (WHEEL_SLOT_NATIVE, by slot index)."""
        found = []
        end = self.slots * WHEEL_SLOT_SIZE
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise StoreError(f"cannot open the timer wheel: {e.strerror}", path=str(self.path)) from None
        try:
            extents = list(data_extents(fd, 0, end))
        finally:
            os.close(fd)
        for lo, hi in extents:
            a, b = lo // WHEEL_SLOT_SIZE, min(self.slots, -(-hi // WHEEL_SLOT_SIZE))
            if b <= a:
                continue
            per = WHEEL_SLOT_SIZE // 8      # a slot as 64-bit words: any non-zero word makes it occupied
            words = np.frombuffer(self.mm, dtype=np.uint64, count=(b - a) * per, offset=a * WHEEL_SLOT_SIZE)
            hit = np.flatnonzero(words.reshape(-1, per).any(axis=1))
            del words
            if hit.size:
                found.append(a + hit)
        idx = np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)
        return self._rows(idx)

    def _rows(self, idx: np.ndarray) -> np.ndarray:
        out = np.empty(len(idx), dtype=WHEEL_SLOT_NATIVE)
        out["index"] = idx
        if len(idx):
            raw = np.frombuffer(self.mm, dtype=WHEEL_SLOT_DTYPE, count=self.slots)
            rows = raw[idx]
            del raw
            for name in WHEEL_SLOT_DTYPE.names:
                out[name] = rows[name]
        return out

    # ---- TimerWheel's reads --------------------------------------------------------------------
    @property
    def occupied(self) -> np.ndarray:
        """The non-zero slots (index, time in precision units, firstPos, lastPos, num, magic), found
        on first use from the file's data extents."""
        if self._occupied is None:
            self._occupied = self._scan() if self.mm is not None else self._rows(np.empty(0, np.int64))
        return self._occupied

    def slot_index(self, time_ms: int) -> int:
        return int(slot_index(time_ms, self.precision_ms, self.slots))

    def raw_slot(self, index: int) -> Slot:
        """TimerWheel.getRawSlot by slot index: whatever the slot holds, time scaled to ms."""
        if not (0 <= index < self.slots):
            raise StoreError(f"slot {index} is outside the wheel (0..{self.slots - 1})", path=str(self.path))
        t, first, last, num, magic = WHEEL_SLOT.unpack_from(self.mm, index * WHEEL_SLOT_SIZE)
        return Slot(t * self.precision_ms, first, last, num, magic)

    def get_slot(self, time_ms: int) -> Slot:
        """TimerWheel.getSlot: the slot for `time_ms`, or EMPTY_SLOT when it holds another lap's
        time (or none)."""
        if not self.slots:
            return EMPTY_SLOT
        s = self.raw_slot(self.slot_index(time_ms))
        p = self.precision_ms
        return s if s.timeMs == time_ms // p * p else EMPTY_SLOT

    def close(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:
                pass
            self.mm = None


def detect_precision(occupied: np.ndarray, unit_at) -> tuple[int | None, int]:
    """timerPrecisionMs as the files say: a slot's stored time is `slotTimeMs // precision`, and
    the unit at its lastPos was written for that slot time (currWriteTimeMs + delayTime).
    Returns (precision, slots agreeing); (None, 0) when no slot has its unit."""
    votes: dict[int, int] = {}
    for row in occupied[:4096]:
        t = int(row["time"])
        if t <= 0:
            continue
        u = unit_at(int(row["lastPos"]))
        if u is None:
            continue
        ms = int(u["currWriteTimeMs"]) + int(u["delayTime"])
        p = round(ms / t)
        if p > 0 and ms // p == t:
            votes[p] = votes.get(p, 0) + 1
    if not votes:
        return None, 0
    best = max(votes, key=lambda p: votes[p])
    return best, votes[best]
