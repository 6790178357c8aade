"""The checkpoint file: the store times up to which commitlog, CQ and index are known durable.
4096 bytes; 3 big-endian i64 in 4.9, 5 in 5.1.1+ (the rest zero). A missing file reads as zeros."""
from __future__ import annotations

import errno
import os
import stat
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.config import CHECKPOINT_SIZE
from engine.format.checkpoint_layout import CHECKPOINT_FIELDS as _FIELDS
from engine.errors import CorruptDataError, StoreError, StoreFullError

_STORE_LOCK = threading.Lock()


@dataclass
class Checkpoint:
    physicMsgTimestamp: int = 0
    logicsMsgTimestamp: int = 0
    indexMsgTimestamp: int = 0
    masterFlushedOffset: int = 0
    confirmPhyOffset: int = 0

    @property
    def min_timestamp(self) -> int:
        return max(0, min(self.physicMsgTimestamp, self.logicsMsgTimestamp) - 3000)

    @property
    def min_timestamp_index(self) -> int:
        return min(self.min_timestamp, self.indexMsgTimestamp)

    def to_json(self) -> dict:
        d = asdict(self)
        d["minTimestamp"] = self.min_timestamp
        d["minTimestampIndex"] = self.min_timestamp_index
        return d

    @classmethod
    def load(cls, path: Path) -> tuple["Checkpoint", bool]:
        """(checkpoint, existed)."""
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block the open
                raise CorruptDataError("checkpoint is not a regular file", path=str(path))
            with open(path, "rb") as fh:
                data = fh.read(_FIELDS.size)
        except FileNotFoundError:
            return cls(), False
        except OSError as e:
            raise CorruptDataError(f"cannot read checkpoint: {e.strerror}", path=str(path)) from None
        data = data.ljust(_FIELDS.size, b"\0")  # Java maps a whole page: a short file reads as zeros
        return cls(*_FIELDS.unpack(data)), True

    def store(self, path: Path) -> None:
        """Rewrite the 4096-byte page in place and fsync (Java flushes its mapped page). One
        store at a time, each packing the fields as they are when it writes: the flusher and an
        index roll (on the put's thread) both store, and an older page must not land last."""
        with _STORE_LOCK:
            self._store(path)

    def _store(self, path: Path) -> None:
        data = _FIELDS.pack(self.physicMsgTimestamp, self.logicsMsgTimestamp, self.indexMsgTimestamp,
                            self.masterFlushedOffset, self.confirmPhyOffset)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size < CHECKPOINT_SIZE:
                    os.ftruncate(fd, CHECKPOINT_SIZE)
                os.pwrite(fd, data, 0)
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:  # a full disk when the file is first written: typed, like every write error
            full = e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
            raise (StoreFullError if full else StoreError)(f"cannot write checkpoint: {e.strerror}",
                                                           path=str(path)) from None
