"""Typed errors. Every error names the file and, where it applies, the byte offset involved,
so the CLI can print one useful line and the GUI can point at the damage."""
from __future__ import annotations


class StoreError(Exception):
    """Base of every error the engine raises on purpose."""

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None):
        self.message = message
        self.path = str(path) if path is not None else None
        self.offset = offset
        super().__init__(self.describe())

    def describe(self) -> str:
        where = []
        if self.path:
            where.append(self.path)
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.message} ({', '.join(where)})" if where else self.message


class NotAStoreError(StoreError, FileNotFoundError):
    """The folder does not look like a RocketMQ store root."""


class ConfigError(StoreError, ValueError):
    """Configured sizes or settings do not fit the files on disk."""


class CorruptDataError(StoreError, ValueError):
    """Bytes on disk that break the format (bad magic, impossible lengths, broken links)."""


class StoreLockedError(StoreError, BlockingIOError):
    """Another writer (a broker or another rmqstore) holds the store's lock file."""


class ReadOnlyStoreError(StoreError, PermissionError):
    """A write was attempted on a store opened read-only."""


class MessageRejectedError(StoreError, ValueError):
    """A message broke one of RocketMQ's limits (topic rules, sizes) and was not written."""


class StoreFullError(StoreError, OSError):
    """The disk refused a write; nothing was acknowledged."""
