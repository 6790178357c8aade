"""A fixed-size data file named by its 20-digit start offset, mapped with mmap.

Read-only stores are mapped with ACCESS_READ (the OS refuses any write through the map);
writable ones with ACCESS_WRITE. Nothing inside a commitlog or CQ file says how much of it is
used, so `wrote_position` is set by whoever scanned it (recovery), never read from the file."""
from __future__ import annotations

import ctypes
import errno
import functools
import mmap
import os
import struct
import sys
import threading
from pathlib import Path

import numpy as np

from engine.accel import load as _load_accel, state_property
from engine.errors import ConfigError, StoreError, StoreFullError

NAME_DIGITS = 20


def offset_to_name(offset: int) -> str:
    return f"{offset:0{NAME_DIGITS}d}"


PAGE = mmap.PAGESIZE
SEEK_DATA = getattr(os, "SEEK_DATA", 3)
SEEK_HOLE = getattr(os, "SEEK_HOLE", 4)
DEFAULT_RESERVE_STEP = 4 << 20


MADV_POPULATE_WRITE = getattr(mmap, "MADV_POPULATE_WRITE", 23)   # Linux 5.14+


def populate_pages(mm, start: int, length: int) -> None:
    """Fault reserved pages in now, in one call: a put then writes to mapped pages instead of
    taking a page fault every third 1 KiB record (RocketMQ's warmMappedFile does this by
    writing zeros). Used for the commitlog only: CQ and index writes are 20 bytes, a fault
    per hundreds of them. Best effort: an older kernel (EINVAL) keeps faulting lazily."""
    try:
        mm.madvise(MADV_POPULATE_WRITE, start, length)
    except (OSError, ValueError, AttributeError):
        pass


@functools.lru_cache(maxsize=None)
def _libc_range_call(name: str):
    """libc's `name` (madvise, msync: an address, a length, flags) through ctypes, which lets
    go of the GIL for the call -- mmap.madvise and mmap.flush keep it, and mmap.flush keeps it
    through the whole write-back (a background flush of 500 ms of appends stopped every thread
    of the process for the ~0.3 s the disk took). None where there is none to call (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        f = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    f.argtypes, f.restype = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int
    return f


def _libc_madvise():
    return _libc_range_call("madvise")


MS_SYNC = 4   # Linux's msync flag (the mmap module does not export it)


def sync_range(mm, start: int, length: int) -> None:
    """msync [start, start + length) of a writable map (start page-aligned), the GIL let go
    where libc is at hand; the range is held by a buffer export for the call."""
    f = _libc_range_call("msync")
    if f is None:
        mm.flush(start, length)
        return
    view = (ctypes.c_char * length).from_buffer(mm, start)
    try:
        if f(ctypes.addressof(view), length, MS_SYNC) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))
    finally:
        del view


class Warmer:
    """populate_pages on a thread of its own, as RocketMQ's AllocateMappedFileService warms
    the next file off the put path: the appends go on while the kernel zeroes and maps the
    pages ahead of them (~4 us a page on a VM, a page every three 1 KiB records). The range
    is held by a buffer export until the call returns, so the map cannot go away under it;
    whoever unmaps calls join() first. Best effort like populate_pages: an error leaves the
    pages to fault in lazily."""

    def __init__(self, mm, start: int, length: int):
        self._view = (ctypes.c_char * length).from_buffer(mm, start)   # the export
        self._thread = threading.Thread(target=self._run, name="rmqstore-warm", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            _libc_madvise()(ctypes.addressof(self._view), len(self._view), MADV_POPULATE_WRITE)
        finally:
            self._view = None

    def join(self) -> None:
        self._thread.join()


def warm_pages(mm, start: int, length: int) -> Warmer | None:
    """populate_pages in the background where the GIL can be let go (Linux), else now.
    (Populating the first pages in line, for the writer that starts there, measured worse:
    the fault reads ahead and zeroes large folios in the writer's thread.)"""
    if length <= 0:
        return None
    if _libc_madvise() is not None and start % PAGE == 0:
        try:
            return Warmer(mm, start, length)
        except (ValueError, TypeError, RuntimeError):
            pass   # a range past the map, a closed map, no thread to be had: in line
    populate_pages(mm, start, length)
    return None


def allocate(fd: int, start: int, length: int) -> None:
    """Reserve the blocks of [start, start + length) now. A write through the map into a hole of
    a sparse file on a full disk is SIGBUS (the process dies); reserving first makes it an error
    up front. Filesystems without fallocate leave the file sparse."""
    try:
        os.posix_fallocate(fd, start, length)
    except AttributeError:  # no posix_fallocate on this platform: the file stays sparse
        pass
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise


def durable_touch(path) -> None:
    """Create `path` (if missing) and make it and its folder entry durable (fsync both): a
    marker such as `abort` must be on disk before any write it vouches for."""
    Path(path).touch()
    fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def fsync_dir(path) -> None:
    """Make the folder's entries (files created or deleted in it) durable."""
    try:
        dfd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass  # some filesystems refuse fsync on a folder; nothing more can be done
    finally:
        os.close(dfd)


def punch_hole(fd: int, start: int, end: int) -> None:
    """Deallocate [start, end) (fallocate PUNCH_HOLE | KEEP_SIZE): the bytes read as zeros again.
    Best effort: where the call is missing the blocks stay."""
    if end <= start:
        return
    libc = _libc()
    if libc is not None and hasattr(libc, "fallocate"):
        import ctypes
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
        libc.fallocate(fd, 0x02 | 0x01, start, end - start)  # FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE


def data_extents(fd: int, start: int, end: int):
    """The allocated ranges of [start, end) (SEEK_DATA/SEEK_HOLE); the whole range where the
    filesystem cannot tell. Holes read as zeros and need no scan."""
    pos = start
    while pos < end:
        try:
            lo = os.lseek(fd, pos, SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return  # only a hole from here on
            yield pos, end  # no SEEK_DATA: everything may hold data
            return
        if lo >= end:
            return
        hi = min(end, os.lseek(fd, lo, SEEK_HOLE))
        yield lo, hi
        pos = hi


TMPFS_MAGIC = 0x01021994


@functools.lru_cache(maxsize=1)
def _libc():
    """The C library through ctypes, loaded once (None where it cannot be)."""
    try:
        import ctypes
        return ctypes.CDLL(None, use_errno=True)
    except (OSError, AttributeError):
        return None


_FS_TYPES: dict[int, int | None] = {}  # st_dev -> statfs f_type: one statfs per filesystem


def _fs_type(fd: int) -> int | None:
    """statfs f_type (Linux), None where it cannot be read."""
    dev = os.fstat(fd).st_dev
    if dev not in _FS_TYPES:
        libc = _libc()
        kind = None
        if libc is not None and hasattr(libc, "fstatfs"):
            import ctypes
            buf = ctypes.create_string_buffer(256)
            if libc.fstatfs(fd, buf) == 0:
                kind = struct.unpack_from("l", buf)[0]
        _FS_TYPES[dev] = kind
    return _FS_TYPES[dev]


def holes_need_room(fd: int) -> int:
    """Bytes of holes a read of this file could turn into pages that need room: on tmpfs a read
    fault on a hole allocates a page, and on a full tmpfs that is SIGBUS. 0 elsewhere (disk
    filesystems read holes as zeros without allocating)."""
    st = os.fstat(fd)
    holes = st.st_size - st.st_blocks * 512
    if holes <= 0 or _fs_type(fd) != TMPFS_MAGIC:
        return 0
    return holes


def map_for_reading(fd: int, size: int) -> mmap.mmap:
    """A read-only map of the file; on a tmpfs without room for its holes, its data extents
    are read into private anonymous memory instead (holes there read as the zero page), so no
    read can die of SIGBUS. Such a copy does not follow later writes."""
    holes = holes_need_room(fd)
    if not holes:
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    vfs = os.fstatvfs(fd)
    if holes < vfs.f_bavail * vfs.f_frsize:
        return mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | getattr(mmap, "MAP_ANONYMOUS", 0x20))
    view = memoryview(mm)
    try:
        for lo, hi in data_extents(fd, 0, size):
            at = lo
            while at < hi:
                n = os.preadv(fd, [view[at:min(hi, at + (16 << 20))]], at)
                if n <= 0:
                    break
                at += n
    finally:
        view.release()
    return mm


WRITE_MARGIN = 8 << 20


def refuse_full_tmpfs(path) -> None:
    """Before a read-write open: on a tmpfs, recovery's reads past each file's data touch holes,
    which allocate; with no room left that is SIGBUS, so a full tmpfs is refused up front."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return
    try:
        if _fs_type(fd) != TMPFS_MAGIC:
            return
        vfs = os.fstatvfs(fd)
        if vfs.f_bavail * vfs.f_frsize < WRITE_MARGIN:
            raise StoreFullError("the tmpfs holding the store is full (under 8 MiB free): no room to recover or "
                                 "write", path=str(path))
    finally:
        os.close(fd)


class PyFileState:
    """FileState's pure twin (engine/accel/_state.pyx): a MappedFile's offset, write position,
    end of its reserved blocks and map view."""
    __slots__ = ("file_from_offset", "wrote_position", "reserved_until", "buf")

    def __init__(self):
        self.file_from_offset = self.wrote_position = self.reserved_until = 0
        self.buf = None


_STATE = _load_accel("_state")
FileState = PyFileState if _STATE is None else _STATE.FileState   # the positions as C fields for the compiled put


class MappedFile:
    """One data file and its map. Its offset, positions and view live in `state` (a FileState),
    which the kernels take; the properties below read and write them there. (`state` is a slot:
    the kernels' one lookup per file is the cheap kind.)"""
    __slots__ = ("state", "__dict__", "__weakref__")
    file_from_offset = state_property("file_from_offset", "the file's start in its queue (its name)")
    wrote_position = state_property("wrote_position", "bytes written (set by recovery and the appends)")
    reserved_until = state_property("reserved_until", "blocks are reserved up to here (ensure_room)")
    buf = state_property("buf", "a memoryview of the map")
    _flush_lock = None   # a writable file's lock for an msync in flight (set by __init__)

    def __init__(self, path: Path, file_size: int, writable: bool = False, create: bool = False,
                 reserve_step: int = DEFAULT_RESERVE_STEP, reserve_from_start: bool = False,
                 populate: bool = False):
        self.path = Path(path)
        # wrote_position, and reserved_until: files are sparse, as RocketMQ's are; blocks are
        # reserved a step ahead of the writes (ensure_room), so a full disk refuses a put
        # instead of killing the process
        self.state = FileState()
        self.file_from_offset = int(self.path.name)
        self.file_size = file_size
        self.writable = writable
        self.flushed_position = 0
        self.reserve_step = reserve_step
        self.reserve_from_start = reserve_from_start  # random writes from 0 (index slots), not appends
        self.populate = populate and writable  # fault reserved pages in at once (see `populate_pages`)
        self._warmer: Warmer | None = None     # the last background populate (`warm_pages`)
        self._flush_lock = threading.RLock() if writable else None   # an msync in flight (flush)
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
                    os.ftruncate(fd, file_size)  # sparse, reads as zeros like Java's mapped file
                    self._reserve(fd, min(file_size, reserve_step))  # the first writes' blocks
                except OSError as e:
                    os.unlink(self.path)
                    raise StoreFullError(f"cannot size new file: {e.strerror}", path=str(self.path)) from None
            actual = os.fstat(fd).st_size
            if actual != file_size:
                raise ConfigError(f"file is {actual} bytes but the configured size is {file_size}",
                                  path=str(self.path))
            self.mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_WRITE) if writable else \
                map_for_reading(fd, file_size)
            if create and self.populate:
                self.warm(0, self.reserved_until)
        finally:
            os.close(fd)
        self.buf = memoryview(self.mm)

    # ---- reading -----------------------------------------------------------------------
    @property
    def end_offset(self) -> int:
        return self.file_from_offset + self.file_size


    def read(self, pos: int, size: int) -> bytes:
        return bytes(self.buf[pos:pos + size])

    # ---- writing -----------------------------------------------------------------------
    def ensure_room(self, end: int) -> None:
        """Blocks for every byte up to `end` are reserved (plus a step ahead, so this costs one
        fallocate per step). Raises StoreFullError, before anything is written, when the disk
        has no room."""
        if end <= self.reserved_until:
            return
        try:
            fd = os.open(self.path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            try:
                self._reserve(fd, end)
            finally:
                os.close(fd)
        except OSError as e:
            raise StoreFullError(f"cannot reserve disk space for the file: {e.strerror}", path=str(self.path),
                                 offset=self.file_from_offset + self.reserved_until) from None

    def _reserve(self, fd: int, end: int) -> None:
        start = self.reserved_until if self.reserve_from_start else max(self.reserved_until, self.wrote_position)
        start -= start % PAGE
        stop = max(end, start + self.reserve_step)
        stop = min(self.file_size, stop + (-stop) % PAGE)
        if stop > start:
            try:
                allocate(fd, start, stop - start)
            except OSError:
                if not self.reserve_from_start:  # give back what a partial reservation took,
                    # from the first page no write has touched (start is page-aligned)
                    punch_hole(fd, max(start, self.wrote_position + (-self.wrote_position) % PAGE), stop)
                raise
        self.reserved_until = stop
        mm = getattr(self, "mm", None)  # a new file is mapped after its first reservation
        if self.populate and mm is not None and stop > start:
            self.warm(start, stop - start)

    def warm(self, start: int, length: int) -> None:
        """Fault [start, start + length) in on a thread of its own (`warm_pages`)."""
        self.join_warmer()
        self._warmer = warm_pages(self.mm, start, length)

    def join_warmer(self) -> None:
        """Wait for the background populate (before the map is closed or resized)."""
        w = getattr(self, "_warmer", None)
        if w is not None:
            w.join()
            self._warmer = None

    def write_at(self, pos: int, data: bytes) -> None:
        if pos + len(data) > self.reserved_until:
            self.ensure_room(pos + len(data))
        self.buf[pos:pos + len(data)] = data

    def append(self, data: bytes) -> int:
        st = self.state
        pos = st.wrote_position
        if pos + len(data) > st.reserved_until:
            self.ensure_room(pos + len(data))
        self.buf[pos:pos + len(data)] = data
        st.wrote_position = pos + len(data)
        return pos

    def flush(self, upto: int | None = None) -> None:
        """msync the written range: after this returns the bytes survive a crash. Safe beside
        the appends (the background flusher calls it without the writer's lock): the msync lets
        go of the GIL, and the file's own lock keeps the map open and the position monotone."""
        if not self.writable:
            return
        with self._flush_lock:
            end = self.wrote_position if upto is None else upto
            if end > self.flushed_position:
                self._msync(self.flushed_position, end)
                self.flushed_position = end

    def sync(self) -> None:
        """msync the whole map (pages that are not dirty cost nothing): for changes made
        outside the append path, such as recovery's truncation."""
        if self.writable:
            with self._flush_lock:
                keep, self.flushed_position = self.flushed_position, 0
                try:
                    self.flush(self.file_size)
                finally:
                    self.flushed_position = keep

    def sync_head(self, length: int) -> None:
        """msync the pages of [0, length) only (an index file's header)."""
        if self.writable:
            with self._flush_lock:
                self._msync(0, length)

    def _msync(self, start: int, end: int) -> None:
        if self.mm.closed:
            return   # closed under a flusher that chose the file before (nothing left to sync)
        start -= start % PAGE
        sync_range(self.mm, start, end - start)

    def zero_tail(self, pos: int) -> None:
        """Zero [pos, end of file) so stale bytes can never pass for records later. Only the
        allocated extents are read (holes are zeros), a MiB at a time with numpy, and only
        their non-zero spans are written, so a clean sparse tail costs a few lseeks."""
        fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            extents = list(data_extents(fd, pos, self.file_size))
        finally:
            os.close(fd)
        step = 1 << 20
        for lo, hi in extents:
            for p in range(max(lo, pos), hi, step):
                n = min(step, hi - p)
                nz = np.flatnonzero(np.frombuffer(self.mm, dtype=np.uint8, count=n, offset=p))
                if len(nz):
                    a, b = p + int(nz[0]), p + int(nz[-1]) + 1
                    self.buf[a:b] = bytes(b - a)

    def close(self) -> None:
        self.join_warmer()
        lock = self._flush_lock
        if lock is not None:
            lock.acquire()   # wait for a background flush's msync of this file
        try:
            self.buf.release()
            self.mm.close()
        except BufferError:
            pass  # live numpy views still point in; the map goes when they do
        finally:
            if lock is not None:
                lock.release()

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position})"
