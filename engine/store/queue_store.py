"""Where a store keeps its consume queues: ConsumeQueue files under consumequeue/ (the classic
store), or RocketMQ 5's RocksDB database (engine.store.rocksdb_cq, read-only). The store picks
one when it opens (`for_root`) and from then on asks it, never which one it is: loading the
queues, following a writer, recovery's vouched end, rebuilding, the overview."""
from __future__ import annotations

from pathlib import Path

from engine.errors import ReadOnlyStoreError, StoreError
from engine.format.message import peek_physical_offset
from engine.store import rocksdb_cq
from engine.store.consume_queue import ConsumeQueue
from engine.store.detect import _subdirs


def for_root(root: Path, read_only: bool):
    """The queue store of the store at `root` (a class: made once the store is set up)."""
    if rocksdb_cq.is_rocksdb_cq(root):
        if not read_only:
            raise ReadOnlyStoreError("consume queues are in RocksDB (storeType=defaultRocksDB): such a store "
                                     "opens read-only; writing to it is not supported", path=str(root / "consumequeue"))
        return RocksDBQueueStore
    return FileQueueStore


class FileQueueStore:
    """consumequeue/<topic>/<queueId>/ files, mapped; the compiled page loop reads them."""
    pages_compiled = True
    detects_sizes = True   # files created after a read-only open tell their sizes (MessageStore.refresh)
    loses_units_in_crash = False   # units are in mapped files: a killed process loses none
    recovered_here = True          # `rmqstore recover` (or a read-write open) recovers the store

    def __init__(self, store):
        self.store = store

    def load(self, writable: bool, skip: set | None = None) -> None:
        """Every queue folder's ConsumeQueue into store.queues (skip: those already there)."""
        store = self.store
        for tdir in sorted(_subdirs(store.root / "consumequeue")):
            for qdir in sorted(_subdirs(tdir)):
                try:
                    qid = int(qdir.name)
                except ValueError:
                    if skip is None:
                        store.warnings.append(f"skipped {qdir}: queue id is not a number")
                    continue
                if skip and (tdir.name, qid) in skip:
                    continue
                try:
                    cq = ConsumeQueue(tdir.name, qid, qdir, store.cfg.mappedFileSizeConsumeQueue, writable,
                                      tolerant=store.cfg.tolerant)
                except StoreError:
                    if skip is None:
                        raise
                    continue  # refresh: a file still being created (or sizes not known yet): next time
                store.queues[(tdir.name, qid)] = cq

    def after_recovery(self) -> None:
        """(Recovery cut the queues' files itself.)"""

    def refresh(self, end: int, min_offset: int) -> None:
        """New queues, files and units a writer added; units past the commitlog's `end` dropped."""
        store = self.store
        self.load(False, skip=set(store.queues))
        for cq in store.queues.values():
            cq.queue.load_new()
            for g in cq.queue.files[-3:]:
                g.wrote_position = g.file_size
            cq.recover(exact=False)
            if cq.max_physic_offset >= end:
                cq.truncate_dirty(end)
            cq.correct_min_offset(min_offset)

    def vouched_end(self, commitlog) -> None:
        """None: recovery reads the end from the queues' files."""
        return None

    @staticmethod
    def file_size(cfg) -> int:
        """The ConsumeQueue files' size."""
        return cfg.mappedFileSizeConsumeQueue

    def rebuild_refusal(self) -> None:
        return None

    def info(self) -> dict:
        return {"storeType": "default"}

    def close(self) -> None:
        """(The store closes its queues.)"""


class RocksDBQueueStore(rocksdb_cq.RocksDBConsumeQueueStore):
    """The RocksDB database's queues, read before recovery (their end vouches for the commitlog's)
    and shown after it, cut at the commitlog's end. Pages go through the reference loop."""
    pages_compiled = False
    detects_sizes = False
    loses_units_in_crash = True    # written without a WAL: the crash view re-dispatches what was not flushed
    recovered_here = False         # read-only: the broker's restart recovers it

    def __init__(self, store):
        self.store = store
        super().__init__(store.root)

    def load(self, writable: bool) -> None:
        """(Read when made.)"""

    def after_recovery(self) -> None:
        store = self.store
        store.queues = {}
        end, first = store.commitlog.max_offset, store.commitlog.min_offset
        for key, cq in self.queues.items():
            cq.truncate_dirty(end)
            cq.correct_min_offset(first)
            store.queues[key] = cq
        store.warnings.extend(w for w in self.warnings if w not in store.warnings)

    def refresh(self, end: int, min_offset: int) -> None:
        """The database read anew; not while the crash view serves units in memory (a crashed
        store has no writer: a broker holding it gets no view) -- reading it anew would drop them."""
        if any(getattr(cq, "units_in_memory", 0) for cq in self.store.queues.values()):
            return
        self.db.close()
        rocksdb_cq.RocksDBConsumeQueueStore.__init__(self, self.store.root)
        self.after_recovery()

    @staticmethod
    def file_size(cfg) -> int:
        return 0   # no ConsumeQueue files

    # ---- a crashed store (5.3.3 writes these queues with the WAL off: a crash loses what was
    # not flushed, and recoverAbnormally re-dispatches it from the commitlog)
    def abnormal_start_index(self, commitlog) -> int:
        """CommitLog.isMappedFileMatchedRecover with RocksDB queues: the newest file whose first
        record's PHYSICALOFFSET is no later than the queues' committed max (CHECKPOINT_TOPIC);
        the first file when none is."""
        limit = self.committed_phy_offset or 0
        return commitlog.newest_file_matched(lambda buf: peek_physical_offset(buf, 0) <= limit)

    def make_queue(self, topic: str, queue_id: int) -> rocksdb_cq.RocksDBConsumeQueue:
        """A queue the crash view's dispatch starts (empty; its units live in memory)."""
        return rocksdb_cq.RocksDBConsumeQueue(self, topic, queue_id, 0, 0, -1)

    def rebuild_refusal(self) -> tuple[str, Path]:
        return ("consume queues are in RocksDB (storeType=defaultRocksDB): rebuilding them is not supported; "
                "nothing was changed", self.path)
