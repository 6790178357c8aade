"""A fixed-size data file named by its 20-digit start offset, mapped with mmap.

Read-only stores are mapped with ACCESS_READ (the OS refuses any write through the map);
writable ones with ACCESS_WRITE. Nothing inside a commitlog or CQ file says how much of it is
used, so `wrote_position` is set by whoever scanned it (recovery), never read from the file."""
from __future__ import annotations

import errno
import mmap
import os
from pathlib import Path

from .errors import ConfigError, StoreError, StoreFullError

NAME_DIGITS = 20


def offset_to_name(offset: int) -> str:
    return f"{offset:0{NAME_DIGITS}d}"


def allocate(fd: int, size: int) -> None:
    """Reserve the blocks of [0, size) now. A write through the map into a hole of a sparse file
    on a full disk is SIGBUS (the process dies); reserving first makes it an error up front."""
    try:
        os.posix_fallocate(fd, 0, size)
    except AttributeError:  # no posix_fallocate on this platform: the file stays sparse
        pass
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise


class MappedFile:
    def __init__(self, path: Path, file_size: int, writable: bool = False, create: bool = False):
        self.path = Path(path)
        self.file_from_offset = int(self.path.name)
        self.file_size = file_size
        self.writable = writable
        self.wrote_position = 0
        self.flushed_position = 0
        self.reserved = create  # blocks allocated (see allocate); files we did not create may be sparse
        flags = os.O_RDWR if writable else os.O_RDONLY
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        try:
            fd = os.open(self.path, flags | getattr(os, "O_CLOEXEC", 0), 0o644)
        except OSError as e:
            raise StoreError(f"cannot open file: {e.strerror}", path=str(self.path)) from None
        try:
            if create:
                try:
                    os.ftruncate(fd, file_size)  # reads as zeros like Java's mapped file ...
                    allocate(fd, file_size)      # ... with its blocks reserved: no SIGBUS when the disk fills
                except OSError as e:
                    os.unlink(self.path)
                    raise StoreFullError(f"cannot size new file: {e.strerror}", path=str(self.path)) from None
            actual = os.fstat(fd).st_size
            if actual != file_size:
                raise ConfigError(f"file is {actual} bytes but the configured size is {file_size}",
                                  path=str(self.path))
            self.mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.buf = memoryview(self.mm)

    # ---- reading -----------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    def read(self, pos: int, size: int) -> bytes:
        return bytes(self.buf[pos:pos + size])

    # ---- writing -----------------------------------------------------------------------
    def reserve(self) -> None:
        """Allocate a file someone else created (possibly sparse) before appending to it."""
        try:
            fd = os.open(self.path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            try:
                allocate(fd, self.file_size)
            finally:
                os.close(fd)
        except OSError as e:
            raise StoreFullError(f"cannot reserve disk space for the file: {e.strerror}", path=str(self.path)) from None
        self.reserved = True

    def write_at(self, pos: int, data: bytes) -> None:
        self.buf[pos:pos + len(data)] = data

    def append(self, data: bytes) -> int:
        pos = self.wrote_position
        self.buf[pos:pos + len(data)] = data
        self.wrote_position = pos + len(data)
        return pos

    def flush(self, upto: int | None = None) -> None:
        """msync the written range: after this returns the bytes survive a crash."""
        end = self.wrote_position if upto is None else upto
        if self.writable and end > self.flushed_position:
            start = self.flushed_position - self.flushed_position % mmap.PAGESIZE
            self.mm.flush(start, end - start)
            self.flushed_position = end

    def zero_tail(self, pos: int) -> None:
        """Zero [pos, end of file) so stale bytes can never pass for records later."""
        step = 1 << 20
        for p in range(pos, self.file_size, step):
            n = min(step, self.file_size - p)
            if any(self.buf[p:p + n]):
                self.buf[p:p + n] = bytes(n)

    def close(self) -> None:
        try:
            self.buf.release()
            self.mm.close()
        except BufferError:
            pass  # live numpy views still point in; the map goes when they do

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position})"
