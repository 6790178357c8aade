"""Run-length segments over one file: which byte ranges, units or entries hold what.

A segment is ``[start, end) -> category``. A category ``>= 0`` is an index into the file's
``topics`` list; the negative constants below name everything that is not a topic's data."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

BLANK = -1      # commitlog: END_OF_FILE blank record and the zeros after it
FREE = -2       # not written yet (past the write position)
DAMAGED = -3    # bytes that are not a readable record (torn, bad magic, size mismatch)
FILLER = -4     # ConsumeQueue pre-blank filler unit (0, 0x7FFFFFFF, 0)
USED = -5       # used, without a topic (index entries / slots)
RESERVED = -6   # index entry #0, never used
SLOTS = -7      # index slots in use
ENTRY_HEADER = -8  # DLedger data file: the 48-byte entry header before each message
CATEGORY_NAMES = {BLANK: "blank tail", FREE: "unwritten", DAMAGED: "damaged", FILLER: "filler units",
                  USED: "index entries used", RESERVED: "reserved entry #0", SLOTS: "index slots used",
                  ENTRY_HEADER: "DLedger entry headers"}


@dataclass
class Segments:
    """Run-length ranges over one file: ``[starts[i], ends[i]) -> ids[i]`` covering [0, size)."""
    starts: np.ndarray   # int64
    ends: np.ndarray     # int64
    ids: np.ndarray      # int32 category

    @classmethod
    def from_runs(cls, runs: list[tuple[int, int, int]]) -> "Segments":
        runs = [r for r in runs if r[1] > r[0]]
        a = np.array(runs, dtype=np.int64).reshape(-1, 3)
        return cls(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].astype(np.int32))

    @classmethod
    def from_arrays(cls, *parts: tuple[np.ndarray, np.ndarray, np.ndarray]) -> "Segments":
        """Runs given as (starts, ends, ids) arrays, in order; empty runs dropped (a file of a
        million records builds its map without a Python tuple per run)."""
        s = np.concatenate([np.asarray(p[0], dtype=np.int64) for p in parts]) if parts else np.empty(0, np.int64)
        e = np.concatenate([np.asarray(p[1], dtype=np.int64) for p in parts]) if parts else np.empty(0, np.int64)
        c = np.concatenate([np.asarray(p[2], dtype=np.int32) for p in parts]) if parts else np.empty(0, np.int32)
        keep = e > s
        return cls(s[keep], e[keep], c[keep])

    def __len__(self) -> int:
        return len(self.starts)

    def at(self, pos: int) -> int:
        """Index of the segment holding `pos`, or -1."""
        i = int(np.searchsorted(self.starts, pos, side="right")) - 1
        return i if 0 <= i < len(self.starts) and pos < self.ends[i] else -1

    def bytes_by_id(self) -> dict[int, int]:
        """Bytes (units, entries) per category, in order of first appearance."""
        if len(self.ids) < 256:   # a few runs: a loop costs less than numpy's set-up
            out: dict[int, int] = {}
            for i, n in zip(self.ids.tolist(), (self.ends - self.starts).tolist()):
                out[i] = out.get(i, 0) + n
            return out
        uniq, first, inv = np.unique(self.ids, return_index=True, return_inverse=True)
        sums = np.bincount(inv.ravel(), weights=self.ends - self.starts, minlength=len(uniq))
        order = np.argsort(first, kind="stable")
        return {int(uniq[k]): int(sums[k]) for k in order}

    def sample(self, x0: float, x1: float, n: int) -> np.ndarray:
        """Category of each of `n` equal bins over [x0, x1): the one at the bin's centre,
        except that a bin holding any data bytes (a topic or DAMAGED) shows data, so a
        record smaller than a pixel still shows (like peak downsampling). FREE outside."""
        if n <= 0:
            return np.empty(0, dtype=np.int32)
        w = (x1 - x0) / n
        centres = x0 + (np.arange(n, dtype=np.float64) + 0.5) * w
        out = self._at(centres)
        data = (self.ids >= 0) | (self.ids == DAMAGED)
        if data.any():
            ds, de, dc = self.starts[data], self.ends[data], self.ids[data]
            cum = np.concatenate(([0], np.cumsum(de - ds)))
            edges = x0 + np.arange(n + 1, dtype=np.float64) * w

            def before(x):  # data bytes below x
                k = np.searchsorted(ds, x, side="left")
                over = np.where(k > 0, np.maximum(0.0, de[np.maximum(k - 1, 0)] - x), 0.0)
                return cum[k] - over
            F = before(edges)
            has = (F[1:] - F[:-1]) > 0
            fix = has & ~((out >= 0) | (out == DAMAGED))
            if fix.any():
                k = np.searchsorted(ds, edges[1:][fix], side="left") - 1
                out[fix] = dc[np.maximum(k, 0)]
        return out

    def _at(self, x: np.ndarray) -> np.ndarray:
        i = np.searchsorted(self.starts, x, side="right") - 1
        out = np.full(len(x), FREE, dtype=np.int32)
        ok = i >= 0
        ok[ok] = x[ok] < self.ends[i[ok]]
        out[ok] = self.ids[i[ok]]
        return out

    def used_extent(self) -> int:
        """End of the last segment that is not FREE (0 if none)."""
        used = np.flatnonzero(self.ids != FREE)
        return int(self.ends[used[-1]]) if used.size else 0


def run_length(values: np.ndarray, offset: int = 0) -> list[tuple[int, int, int]]:
    """Runs of equal values as (start, end, value), positions shifted by `offset`."""
    if len(values) == 0:
        return []
    change = np.flatnonzero(values[1:] != values[:-1]) + 1
    starts = np.concatenate(([0], change))
    ends = np.concatenate((change, [len(values)]))
    return [(int(s) + offset, int(e) + offset, int(values[s])) for s, e in zip(starts, ends)]


def record_run_arrays(starts: np.ndarray, sizes: np.ndarray,
                      cats: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Consecutive records of one category merged into runs: (starts, ends, categories)."""
    if len(starts) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int32)
    starts = np.asarray(starts, dtype=np.int64)
    ends = starts + sizes
    brk = np.flatnonzero((cats[1:] != cats[:-1]) | (starts[1:] != ends[:-1])) + 1
    first = np.concatenate(([0], brk))
    last = np.concatenate((brk, [len(starts)])) - 1
    return starts[first], ends[last], np.asarray(cats, dtype=np.int32)[first]


def record_runs(starts: np.ndarray, sizes: np.ndarray, cats: np.ndarray) -> list[tuple[int, int, int]]:
    """Merge consecutive records of one category into (start, end, category) runs."""
    a, b, c = record_run_arrays(starts, sizes, cats)
    return list(zip(a.tolist(), b.tolist(), c.tolist()))
