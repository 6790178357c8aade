"""ConsumeQueueInterface: what the MessageStore, its getMessage pages, queries, time lookups
and check read of a consume queue, whatever keeps it (RocketMQ's name for the same seam).

Implemented by the file-based ConsumeQueue (`kind` "file") and the RocksDB one (`kind`
"rocksdb", engine/store/rocksdb_cq.py). Code that walks CQ *files* (recovery, fill, planning)
uses `cq.queue.files`, which is empty for a queue kept elsewhere."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class ConsumeQueueInterface(Protocol):
    topic: str
    queue_id: int
    kind: str                  # "file" | "rocksdb"

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    max_physic_offset: int     # where the last unit's record ends (-1: none)

    def units(self, start: int, end: int) -> np.ndarray:
        """Units [start, end) clamped to what exists, with at least the fields commitLogOffset,
        size and tagsCode of engine.format.cq_unit.CQ_UNIT_DTYPE (by name)."""

    def unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(commitLogOffset, size, tagsCode) of one unit."""

    def broker_units(self, queue_offset: int, max_count: int) -> np.ndarray:
        """The units one broker getMessage reads from queue_offset."""

    def close(self) -> None: ...
