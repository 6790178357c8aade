"""The in-run baselines: what the hardware does with the same bytes and no engine at all.

- raw_write:      sequential write into a fresh (sparse) mmap'd file, 1 MiB slices; the page
                  faults of a fresh file are included, as they are for a new commitlog file
- raw_write_sync: the same, msync after every `unit` bytes (sync-flush baseline)
- raw_read:       page-cache read through a fresh read-only mmap, 1 MiB slices copied out
- memcpy:         one large in-memory copy between warm buffers"""
from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

CHUNK = 1 << 20


def _fresh_map(path: Path, size: int) -> mmap.mmap:
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, size)
        return mmap.mmap(fd, size)
    finally:
        os.close(fd)


def settle() -> None:
    """Wait until the kernel has written back what earlier steps left dirty: a write timed
    while the journal and writeback are busy with someone else's pages runs up to 3x slower
    (seen here), for the engine and the baseline alike."""
    os.sync()


def raw_write(data, scratch: Path) -> float:
    """Seconds to write `data` (bytes-like) sequentially into a fresh mmap'd file."""
    n = len(data)
    settle()
    path = scratch / "raw-write.tmp"
    mm = _fresh_map(path, max(n, 1))
    src = memoryview(data)
    try:
        t = time.perf_counter()
        for off in range(0, n, CHUNK):
            mm[off:off + CHUNK] = src[off:off + CHUNK]
        return time.perf_counter() - t
    finally:
        src.release()
        mm.close()
        path.unlink()


def raw_write_sync(records: list[bytes], scratch: Path, per: int = 1) -> float:
    """Seconds to write `records` into a fresh mmap'd file with an msync after every `per`
    records (from the start of the page holding the first unsynced byte)."""
    n = sum(len(r) for r in records)
    settle()
    path = scratch / "raw-write-sync.tmp"
    mm = _fresh_map(path, max(n, 1))
    try:
        t = time.perf_counter()
        pos = synced = 0
        for i, r in enumerate(records, 1):
            mm[pos:pos + len(r)] = r
            pos += len(r)
            if i % per == 0 or i == len(records):
                start = synced - synced % mmap.PAGESIZE
                mm.flush(start, pos - start)
                synced = pos
        return time.perf_counter() - t
    finally:
        mm.close()
        path.unlink()


def raw_read(ranges: list[tuple[Path, int, int]], warm: bool = True) -> tuple[float, int]:
    """(seconds, bytes) to read [start, end) of each file through a fresh read-only mmap,
    copying 1 MiB slices into one reused buffer. `warm` reads once first so the bytes are in
    the page cache (the figures it is compared with read from the page cache too)."""
    if warm:
        _read(ranges)
    return _read(ranges)


def _read(ranges) -> tuple[float, int]:
    dst = bytearray(CHUNK)
    out = memoryview(dst)
    total = 0
    t = time.perf_counter()
    for path, start, end in ranges:
        if end <= start:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        src = memoryview(mm)
        for off in range(start, end, CHUNK):
            k = min(CHUNK, end - off)
            out[:k] = src[off:off + k]
        total += end - start
        src.release()
        mm.close()
    return time.perf_counter() - t, total


def memcpy(nbytes: int = 256 << 20) -> float:
    """Bytes per second of one copy between two warm buffers of `nbytes`."""
    src = bytearray(os.urandom(1 << 20)) * (nbytes >> 20)
    dst = bytearray(len(src))
    dst[:] = src  # touch every page first
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        dst[:] = src
        best = min(best, time.perf_counter() - t)
    return len(src) / best
