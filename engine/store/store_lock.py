"""The `lock` file: a running broker holds an exclusive POSIX record lock on byte 0.
fcntl locks (not flock) are what Java's FileChannel.tryLock takes on Linux, so only they
exclude a broker. Read-only opens never lock; they may ask who holds it (F_GETLK)."""
from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

from engine.errors import StoreLockedError

_FLOCK = "hhqqi4x"  # struct flock on Linux: l_type, l_whence, l_start, l_len, l_pid
# POSIX locks belong to the process: a second lock in this process would "succeed", and
# closing any descriptor of the file would drop the lock. So this process keeps its own list.
_HELD: set[str] = set()


class StoreLock:
    def __init__(self, root: Path):
        self.path = Path(root) / "lock"
        self.fd: int | None = None

    def acquire(self) -> None:
        key = os.path.realpath(self.path)
        if key in _HELD:
            raise StoreLockedError("store is already open read-write in this process", path=str(self.path))
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

    def release(self) -> None:
        if self.fd is not None:
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self.fd)
                self.fd = None
                _HELD.discard(os.path.realpath(self.path))


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
