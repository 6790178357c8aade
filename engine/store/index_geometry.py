"""The geometry of an index file (hashSlotNum S, indexNum N) read from the file itself.

RocketMQ does not record S and N: only 40 + 4*S + 20*N = file size, which many pairs fit (and
maxIndexNum = 4 x maxHashSlotNum is just the default ratio). The entries decide it:

- the last used entry m = indexCount - 1 holds the file's last non-zero word, so the entry area
  starts within 5 words of W - 5*m (W = that word's number), and 4*S = size - 40 - 20*N makes S
  one value modulo 5: exactly one S is left;
- that S must then fit the data: entry #0 is zero, the slot table's largest value is m, every
  entry's keyHash lands in a slot whose head is at least as new, and a chain never leaves its slot.

A header that was never written (a crashed writer) gives no indexCount: then every S whose slot
table's largest value names the entry holding W is tried. A file with no entries cannot decide;
callers then list the candidates that fit its size."""
from __future__ import annotations

import errno
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from engine.config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from engine.files.mapped_file import map_for_reading

SEEK_DATA = getattr(os, "SEEK_DATA", 3)
_WORDS_PER_ENTRY = INDEX_ENTRY_SIZE // 4           # 5
_CHUNK_WORDS = 1 << 22                             # 16 MiB of words per numpy pass
_SAMPLE = 16_384                                   # entries checked at each end and spread between
_GOLDEN = 0.6180339887498949
_INDEX_COUNT = struct.Struct(">i")


@dataclass(frozen=True)
class Geometry:
    slots: int       # maxHashSlotNum
    entries: int     # maxIndexNum

    @property
    def file_size(self) -> int:
        return INDEX_HEADER_SIZE + self.slots * INDEX_SLOT_SIZE + self.entries * INDEX_ENTRY_SIZE


@dataclass
class FileVerdict:
    """What one file says: `geometry` when its entries decide it; `empty` when it has none;
    else `problem` says why no geometry fits its bytes."""
    path: str
    size: int
    geometry: Geometry | None = None
    empty: bool = False
    problem: str = ""
    via: str = ""    # "header" (indexCount) or "scan" (no usable header)


@dataclass
class StoreVerdict:
    geometry: Geometry | None           # decided by a file's entries
    files: list[FileVerdict] = field(default_factory=list)

    @property
    def size(self) -> int | None:
        return self.files[0].size if self.files else None


def candidates(size: int, limit: int | None = None) -> list[Geometry]:
    """Every (S, N) with 40 + 4S + 20N = size, S >= 1, N >= 2; the default ratio N = 4S first,
    then by slot count."""
    rest = size - INDEX_HEADER_SIZE
    if rest < INDEX_SLOT_SIZE + 2 * INDEX_ENTRY_SIZE or rest % INDEX_SLOT_SIZE:
        return []
    words = rest // INDEX_SLOT_SIZE
    first = words % _WORDS_PER_ENTRY or _WORDS_PER_ENTRY
    s_max = words - 2 * _WORDS_PER_ENTRY
    out = []
    if words % 21 == 0:
        out.append(Geometry(words // 21, 4 * (words // 21)))
    for s in range(first, s_max + 1, _WORDS_PER_ENTRY):
        g = Geometry(s, (words - s) // _WORDS_PER_ENTRY)
        if not out or g != out[0]:
            out.append(g)
        if limit is not None and len(out) >= limit:
            break
    return out


def count_candidates(size: int) -> int:
    rest = size - INDEX_HEADER_SIZE
    if rest < INDEX_SLOT_SIZE + 2 * INDEX_ENTRY_SIZE or rest % INDEX_SLOT_SIZE:
        return 0
    words = rest // INDEX_SLOT_SIZE
    first = words % _WORDS_PER_ENTRY or _WORDS_PER_ENTRY
    return max(0, (words - 2 * _WORDS_PER_ENTRY - first) // _WORDS_PER_ENTRY + 1)


def read_file(path: str | os.PathLike) -> FileVerdict:
    """The geometry one index file's own bytes decide (read-only; nothing is written)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        return FileVerdict(str(path), 0, problem=f"cannot open: {e.strerror}")
    try:
        size = os.fstat(fd).st_size
        verdict = FileVerdict(str(path), size)
        if not count_candidates(size):
            verdict.problem = f"size {size} fits no index geometry (40 + 4 x slots + 20 x entries)"
            return verdict
        mm = map_for_reading(fd, size)
        try:
            _decide(fd, mm, verdict)
        except (ValueError, IndexError, RuntimeError) as e:  # bytes changing under a live writer
            verdict.problem = f"unreadable while it changed: {e}"
        finally:
            try:
                mm.close()
            except BufferError:
                pass  # a view is still alive (an exception's frame); the map goes with it
        return verdict
    finally:
        os.close(fd)


def _decide(fd: int, mm: mmap.mmap, verdict: FileVerdict) -> None:
    size = verdict.size
    words = np.frombuffer(mm, dtype=">i4", offset=INDEX_HEADER_SIZE, count=(size - INDEX_HEADER_SIZE) // 4)
    try:
        last = _last_nonzero_word(fd, words)
        if last is None:
            verdict.empty = True
            return
        total = len(words)
        residue = total % _WORDS_PER_ENTRY
        index_count = _INDEX_COUNT.unpack_from(mm, 36)[0]
        if index_count >= 2:
            m = index_count - 1
            s = last - _WORDS_PER_ENTRY * m
            s -= (s - residue) % _WORDS_PER_ENTRY      # the one S of the window [W-5m-4, W-5m]
            if s >= 1 and _fits(words, s, m):
                verdict.geometry, verdict.via = _geometry(total, s), "header"
                return
        found = [s for s, m in _scan_candidates(words, last, residue) if _fits(words, s, m)]
        if len(found) == 1:
            verdict.geometry, verdict.via = _geometry(total, found[0]), "scan"
        elif found:
            verdict.problem = ("several geometries fit its entries: " +
                               ", ".join(f"{_geometry(total, s).slots} slots" for s in found[:5]))
        else:
            verdict.problem = "no geometry fits its entries (damaged slots or entries)"
    finally:
        del words


def _geometry(total_words: int, s: int) -> Geometry:
    return Geometry(s, (total_words - s) // _WORDS_PER_ENTRY)


def _last_nonzero_word(fd: int, words: np.ndarray) -> int | None:
    """The number of the last non-zero word, reading backwards chunk by chunk and skipping the
    holes of a sparse file (SEEK_DATA), so an empty tail costs no reads. The chunks start small
    and double: a full file's last entry is in its last bytes, and a 16 MiB first chunk cost
    a cold open ~40 ms of faults for one word."""
    seek = _has_seek_data(fd)
    end = len(words)
    chunk = 4096
    while end > 0:
        start = max(0, end - chunk)
        if not seek or _data_before(fd, INDEX_HEADER_SIZE + 4 * start, INDEX_HEADER_SIZE + 4 * end):
            if words[start:end].view(np.uint32).any():   # zero is zero in either byte order: no swap
                hi = end
                while hi > start:   # the chunk's last data, 4096 words at a time from its end
                    lo = max(start, hi - 4096)
                    nz = np.flatnonzero(np.array(words[lo:hi].view(np.uint32)))  # a copy: a live writer
                    if len(nz):                                                 # may be adding entries
                        return lo + int(nz[-1])
                    hi = lo
        end = start
        chunk = min(chunk * 2, _CHUNK_WORDS)
    return None


def _has_seek_data(fd: int) -> bool:
    try:
        os.lseek(fd, 0, SEEK_DATA)
        return True
    except OSError as e:
        return e.errno == errno.ENXIO  # a file with no data at all also answers


def _data_before(fd: int, start: int, end: int) -> bool:
    """Is any of [start, end) allocated?"""
    try:
        return os.lseek(fd, start, SEEK_DATA) < end
    except OSError:
        return False  # ENXIO: no data from `start` on


def _scan_candidates(words: np.ndarray, last: int, residue: int):
    """(S, m) pairs where the slot table [0, S) has largest value m, the entry holding word
    `last`: S + 5m <= last < S + 5m + 5. The prefix maximum rises and (last - S) // 5 falls,
    so few S meet; found chunk by chunk to keep memory flat."""
    carry = 0
    for start in range(0, last, _CHUNK_WORDS):
        stop = min(last, start + _CHUNK_WORDS)
        chunk = words[start:stop].astype(np.int64)
        prefix = np.maximum.accumulate(chunk)
        np.maximum(prefix, carry, out=prefix)
        carry = int(prefix[-1])
        # S = j + 1 for position j (slot table [0, S) ends after j)
        s = np.arange(start + 1, stop + 1, dtype=np.int64)
        m = (last - s) // _WORDS_PER_ENTRY
        hit = (prefix == m) & (m >= 1) & ((s - residue) % _WORDS_PER_ENTRY == 0)
        for j in np.flatnonzero(hit)[:64]:
            yield int(s[j]), int(m[j])


def _fits(words: np.ndarray, s: int, m: int) -> bool:
    """Does a slot table of `s` slots with entries 1..m fit these words (checks in the docstring
    at the top; a sample of entries when there are many)?"""
    total = len(words)
    n_entries = (total - s) // _WORDS_PER_ENTRY
    if s < 1 or m < 1 or m >= n_entries or (total - s) % _WORDS_PER_ENTRY:
        return False
    slots = words[:s]
    if int(slots.max()) != m or int(slots.min()) < 0:
        return False
    area = words[s:s + _WORDS_PER_ENTRY * (m + 1)].reshape(m + 1, _WORDS_PER_ENTRY)
    if area[0].any():
        return False
    if m <= 3 * _SAMPLE:
        idx = np.arange(1, m + 1)
    else:   # both ends, and _SAMPLE entries spread over the rest (golden-ratio steps: the same
        # every open, and no numpy.random, whose import cost a first open in a fresh process 50 ms)
        spread = (np.arange(1, _SAMPLE + 1) * _GOLDEN % 1.0 * m).astype(np.int64) + 1
        idx = np.concatenate([np.arange(1, _SAMPLE + 1), np.arange(m - _SAMPLE + 1, m + 1), spread])
    e = area[idx].astype(np.int64)
    key_hash, phy_hi, time_diff, prev = e[:, 0], e[:, 1], e[:, 3], e[:, 4]
    if (key_hash < 0).any() or (phy_hi < 0).any() or (time_diff < 0).any() or (prev < 0).any() \
            or (prev >= idx).any():
        return False
    slot = key_hash % s
    if (slots[slot].astype(np.int64) < idx).any():
        return False
    linked = prev > 0
    prev_hash = area[prev[linked], 0].astype(np.int64)
    return bool((prev_hash % s == slot[linked]).all())


def read_store(index_dir: str | os.PathLike, size: int | None = None) -> StoreVerdict:
    """The geometry of a store's index files of `size` bytes (default: the most common size),
    newest file first, stopping at the first file whose entries decide it."""
    index_dir = Path(index_dir)
    try:
        names = sorted((n for n in os.listdir(index_dir) if n.isdigit()), reverse=True)
    except OSError:
        return StoreVerdict(None)
    sizes: dict[str, int] = {}
    for n in names:
        try:
            st = os.stat(index_dir / n)
        except OSError:
            continue
        if st.st_size:
            sizes[n] = st.st_size
    if not sizes:
        return StoreVerdict(None)
    if size is None:
        counts: dict[int, int] = {}
        for v in sizes.values():
            counts[v] = counts.get(v, 0) + 1
        size = max(counts, key=lambda v: (counts[v], v))
    verdict = StoreVerdict(None)
    for n, v in sizes.items():
        if v != size:
            continue
        fv = read_file(index_dir / n)
        verdict.files.append(fv)
        if fv.geometry is not None:
            verdict.geometry = fv.geometry
            break
    return verdict
