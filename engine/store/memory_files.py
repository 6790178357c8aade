"""Files that live in this process only: what a restarted broker would add to a store, served
by a read-only open without writing a byte. A file that gains units or entries is a private
copy-on-write map of its file (MAP_PRIVATE: writes never reach it); a file the broker would
create is anonymous memory. Used by the DLedger restart view (engine.store.dledger_reput) and
the classic crash view (engine.store.crash_view)."""
from __future__ import annotations

import mmap
import os
import time
from pathlib import Path

from engine.files.mapped_file import FileState, MappedFile
from engine.files.mapped_file_queue import MappedFileQueue
from engine.store.index_file import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE, IndexFile
from engine.store.index_service import IndexService


class MemoryFile(MappedFile):
    """A MappedFile that lives in this process only: a private copy-on-write map of the file
    at `path` (copy=True) or anonymous zeros (a file the broker would create). It is never
    written back, flushed, extended or deleted."""

    def __init__(self, path: Path, file_size: int, copy: bool = False):  # noqa: D107 - MappedFile's fields
        self.state = FileState()       # MappedFile's offset, positions and view
        self.path = Path(path)
        self.file_from_offset = int(self.path.name)
        self.file_size = file_size
        self.writable = False          # flush and sync do nothing
        self.wrote_position = self.flushed_position = 0
        self.reserved_until = file_size  # every byte is there: ensure_room is never called
        self.reserve_step = file_size
        self.reserve_from_start = False
        self.populate = False
        self._warmer = None
        if copy:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                actual = os.fstat(fd).st_size
                if actual != file_size:  # MappedFile refused it already; a copy would not be one
                    raise ValueError(f"{self.path}: {actual} bytes, expected {file_size}")
                self.mm = mmap.mmap(fd, file_size, flags=mmap.MAP_PRIVATE,
                                    prot=mmap.PROT_READ | mmap.PROT_WRITE)
            finally:
                os.close(fd)
        else:
            self.mm = mmap.mmap(-1, file_size, flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20))
        self.made_ms = time.time_ns() // 1_000_000   # a file the broker makes is last modified about now
        self.buf = memoryview(self.mm)

    def ensure_room(self, end: int) -> None:
        return None

    def zero_tail(self, pos: int) -> None:
        self.buf[pos:self.file_size] = bytes(self.file_size - pos)

    def destroy(self) -> None:
        self.close()  # in memory only: there is no file of ours to delete

    def __repr__(self) -> str:
        return f"MemoryFile({self.path.name}, wrote={self.wrote_position})"


def copy_of(f: MappedFile) -> MemoryFile:
    """`f` as a private copy-on-write map, at the same write position."""
    m = MemoryFile(f.path, f.file_size, copy=True)
    m.wrote_position = m.flushed_position = f.wrote_position
    return m


class MemoryFileQueue(MappedFileQueue):
    """A consume queue's files once reput appends to it: the files on disk stay mapped
    read-only, the last one is a private copy, and new files are anonymous memory."""

    @classmethod
    def of(cls, q: MappedFileQueue) -> "MemoryFileQueue":
        m = cls(q.dirs, q.file_size, writable=False, reserve_step=q.reserve_step)
        m.files = list(q.files)
        m.skipped, m.gaps, m.refused = q.skipped, q.gaps, q.refused
        if m.files:
            m.files[-1] = copy_of(m.files[-1])
        return m

    def create_next(self, start: int | None = None) -> MappedFile:
        if start is None:
            start = self.last.end_offset if self.last else 0
        f = MemoryFile(self.dirs[0] / f"{start:020d}", self.file_size)
        self.files.append(f)
        return f

    def truncate_to(self, offset: int, zero: bool = True) -> list[str]:
        """Only write positions move (nothing on disk is ever deleted from here)."""
        for f in self.files:
            if f.end_offset > offset:
                f.wrote_position = f.flushed_position = max(0, offset - f.file_from_offset)
        return []


def close_memory_files(q: MappedFileQueue) -> None:
    """Close a queue's files that live in this process only (its disk files are shared)."""
    for f in q.files:
        if isinstance(f, MemoryFile):
            f.close()


def queue_into_memory(cq) -> MappedFileQueue:
    """Move a consume queue's files into memory before a restart view adds units to it (its
    cached view of the last file dropped); returns the queue as its files are."""
    q = cq.queue
    if not isinstance(q, MemoryFileQueue):
        getattr(cq, "_views", {}).pop(q.last.file_from_offset if q.last else None, None)
        cq.queue = MemoryFileQueue.of(q)
    return q


def let_go_replaced(q: MappedFileQueue) -> None:
    """A restart view is kept: the queue's replaced last file is closed (its private copy serves)."""
    if q.last is not None:
        q.last.close()


def _index_size(cfg) -> int:
    return INDEX_HEADER_SIZE + cfg.maxHashSlotNum * INDEX_SLOT_SIZE + cfg.maxIndexNum * INDEX_ENTRY_SIZE


class ServedIndexService(IndexService):
    """The index a restarted broker queries: the files its IndexService.load kept, with the
    entries reput adds in memory. `lost_files`: those it deleted (still read by the exact
    key answer, which marks what only they hold)."""

    def __init__(self, disk: IndexService, lost: list[IndexFile]):
        super().__init__(disk.cfg, writable=False)
        gone = {id(f) for f in lost}
        self.files = [f for f in disk.files if id(f) not in gone]
        self.lost_files = list(lost)
        self.skipped, self.warnings, self.empty_files = disk.skipped, disk.warnings, disk.empty_files
        self.refused, self._short = disk.refused, disk._short
        self.created: list[str] = []   # index files reput made (in memory)

    def last_file_for_write(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full and not isinstance(last.file, MemoryFile):
            old = last
            last = self.files[-1] = IndexFile(old.path, old.slot_num, old.index_num,
                                              file=copy_of(old.file))
            old.close()
            self._kidx = None
        return super().last_file_for_write()

    def _create_file(self, name: str) -> IndexFile:
        self.created.append(name)
        self._kidx = None
        size = _index_size(self.cfg)
        return IndexFile(self.directory / name, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum,
                         file=MemoryFile(self.directory / name, size))

    def load_new(self) -> None:
        """A live follow's new files, never the ones the restart deleted."""
        lost = {f.name for f in self.lost_files}
        super().load_new()
        for f in [f for f in self.files if f.name in lost and all(f is not g for g in self.lost_files)]:
            self.files.remove(f)
            f.close()

    def close(self) -> None:
        super().close()
        for f in self.lost_files:
            f.close()
