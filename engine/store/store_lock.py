"""The `lock` file: a running broker holds an exclusive POSIX record lock on byte 0.
fcntl locks (not flock) are what Java's FileChannel.tryLock takes on Linux, so only they
exclude a broker. Read-only opens never lock; they may ask who holds it (F_GETLK)."""
from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

from engine.errors import StoreLockedError
from engine.files.mapped_file import fsync_dir

_FLOCK = "hhqqi4x"  # struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid
# POSIX locks belong to the process: a second lock in this process would "succeed", and
# closing any descriptor of the file would drop the lock. So this process keeps its own list.
_HELD: set[str] = set()


class StoreLock:
    def __init__(self, root: Path):
        self.path = Path(root) / "lock"
        self.fd: int | None = None

    def acquire(self) -> "Untouched":
        """Returns the store's `lock` and `abort` as they were before (Untouched)."""
        key = os.path.realpath(self.path)
        if key in _HELD:
            raise StoreLockedError("store is already open read-write in this process", path=str(self.path))
        before = Untouched(self.path.parent)  # (read before the lock: closing it later would drop ours)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            pid = holder_pid(self.path)
            who = f" by process {pid}" if pid else ""
            raise StoreLockedError(f"store is locked{who}: a broker or another writer is using it",
                                   path=str(self.path)) from None
        os.pwrite(fd, b"lock", 0)
        os.fsync(fd)
        self.fd = fd
        _HELD.add(key)
        return before

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self.fd)
                self.fd = None
                _HELD.discard(os.path.realpath(self.path))


class Untouched:
    """The `lock` and `abort` files, and the store folder's times, as a read-write open found
    them. An open refused before its first write to the store puts them back (`restore`, after
    the lock is released), so the refusal changes not one byte and the next open, by RocketMQ
    or rmqstore, sees no crash. StoreLock.acquire takes it, before it writes "lock"."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.files = {name: _snapshot(self.root / name) for name in ("lock", "abort")}
        self.root_times = _times(self.root)

    def restore(self) -> None:
        for name, saved in self.files.items():
            p = self.root / name
            if saved is None:
                p.unlink(missing_ok=True)
                continue
            head, size, times = saved
            if _snapshot(p) == saved:
                continue
            fd = os.open(p, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
            try:
                os.pwrite(fd, head, 0)
                os.ftruncate(fd, size)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.utime(p, ns=times)
        fsync_dir(self.root)
        if self.root_times is not None:
            os.utime(self.root, ns=self.root_times)


def _times(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st.st_atime_ns, st.st_mtime_ns


def _snapshot(p: Path) -> tuple[bytes, int, tuple[int, int]] | None:
    """(the first bytes acquire may overwrite, size, times); None when absent."""
    try:
        with open(p, "rb") as fh:
            st = os.fstat(fh.fileno())
            return fh.read(len(b"lock")), st.st_size, (st.st_atime_ns, st.st_mtime_ns)
    except FileNotFoundError:
        return None


def holder_pid(lock_path: Path) -> int | None:
    """PID of the process holding the lock, None when it is free (or unknowable)."""
    if os.path.realpath(lock_path) in _HELD:
        return os.getpid()  # never open+close the file here: that would drop our own lock
    try:
        fd = os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO in its place must not block
    except OSError:
        return None
    try:
        req = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        res = fcntl.fcntl(fd, fcntl.F_GETLK, req)
        l_type, _, _, _, pid = struct.unpack(_FLOCK, res)
        return pid if l_type != fcntl.F_UNLCK else None
    except OSError:
        return None
    finally:
        os.close(fd)
