"""StoreView: what the analysis, scan, CLI and GUI layers may ask of any store, whatever its
kind. They ask these members, never which kind a store is; a kind differs by how it answers.

Implementations:
- MessageStore over a classic CommitLog and ConsumeQueue files (the classic local store);
- MessageStore over a DLedgerCommitLog (records in entries: `entry_header`; its own recovery
  start; no re-dispatch after a crash);
- MessageStore over a RocksDB queue store (engine.store.queue_store: no CQ files,
  `cq_file_size` 0, read-only);
- engine.scan.remote.RemoteStore: a store on any filesystem, listed and read by byte ranges,
  never mapped or recovered (the scans plan it through engine.scan.planning's seams).
The kind is decided where a store is opened (engine.store.message_store's open chooses the log
and the queue store; engine.scan.remote.open_scan_store a path or a URI) and nowhere else.
Timer, LMQ and BatchCQ are extensions of a store (`timer`, LMQ queues among `queues`,
`batch_queues`), a tier (engine.store.tiered) a store with no local files (`local_store` None).
tests/test_store_view.py runs one conformance module against every implementation."""
from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class CommitLogView(Protocol):
    """The log's files (file_from_offset, file_size, path) and where records are."""

    @property
    def files(self) -> list: ...

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    def entry_header(self, f) -> int:
        """Bytes of framing before each record of file `f` (0: records back to back)."""


@runtime_checkable
class StoreView(Protocol):
    root: object           # a Path, or a URI for a store on a filesystem
    cfg: object            # engine.config.StoreConfig (sizes as set or detected)
    commitlog: CommitLogView
    index: object          # .files: index files with header, name, slot_num, index_num
    queues: dict           # (topic, queueId) -> the queue (a listing of its files when not mapped)
    batch_topics: set      # topics dispatched to BatchConsumeQueues

    @property
    def min_offset(self) -> int: ...

    @property
    def max_offset(self) -> int: ...

    @property
    def cq_file_size(self) -> int:
        """The ConsumeQueue files' size (0: the queues are kept elsewhere)."""

    tier_store: object     # the tier behind the store, or None
    local_store: object    # the mapped store whose files the classic views draw, or None

    def close(self) -> None: ...
