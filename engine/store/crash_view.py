"""The index a classic store's broker serves after its crash recovery, made in memory on a
read-only open (the files are untouched), so that a key query on a crashed store answers as
RocketMQ does once restarted.

What RocketMQ's restart does to the index (STORE_FORMAT.md §12.6, and what engine.store.recovery
does on a writable open): `IndexService.load(false)` deletes the index files whose endTimestamp
is past the checkpoint's indexMsgTimestamp -- always the unfinished last one -- and the crash
recovery re-dispatches every record from its start file on. buildIndex skips a record below
the last kept file's endPhyOffset but not one at it, so the record where the deleted file began
is indexed a second time (the conformance fixtures' `122722`); keys of records between that
offset and the recovery's start file are never indexed again.

Here the same re-dispatch runs into copies that live only in this process (engine.store.
memory_files): the index, and the consume queues that lack units of records the re-dispatch
reaches (a queue behind the log gets them as RocketMQ's recoverAbnormally writes them; a unit
already there is left as it is; BatchCQ queues alike). 5.x RocksDB queues are written without a
WAL, so a crash loses every unit not yet flushed to an SST: recoverAbnormally starts at the file
holding their committed max phy offset (RocksDBQueueStore.abnormal_start_index) and the units
it adds are kept by each RocksDBConsumeQueue in memory. The deleted
files stay readable as `lost_files`, where the exact key answer finds and marks what only they
hold. `check` and the scans read the index as it is on disk (`disk_index`). A re-dispatch longer
than LIMIT records or LIMIT_BYTES is not made (Python indexes ~40,000 records a second): the
view then stays the files as they are, and a warning says so."""
from __future__ import annotations

from engine.store.index_file import IndexFile
from engine.store.index_service import IndexService
from engine.store.memory_files import MemoryFile, ServedIndexService, copy_of
from engine.store.recovery import redispatch, reput_start
from engine.tasks import run

LIMIT = 100_000           # records the view re-indexes at most (~25 us each in Python)
LIMIT_BYTES = 64 << 20    # and commitlog bytes: a longer re-dispatch is not even begun


def disk_index(store):
    """The store's index as its files are: `store.index` itself, except on a crashed store
    opened read-only, where that is what the restarted broker serves (check and the scans
    judge the files)."""
    return getattr(store.index, "disk", store.index)


class CrashIndexService(ServedIndexService):
    """ServedIndexService over a classic store's index, keeping the disk service whole for
    `check` (its files are shared, so a kept file that gains entries is copied, not closed)."""

    def __init__(self, disk: IndexService, lost: list[IndexFile]):
        super().__init__(disk, lost)
        self.disk = disk

    def last_file_for_write(self) -> IndexFile:
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_write_full and not isinstance(last.file, MemoryFile):
            self.files[-1] = IndexFile(last.path, last.slot_num, last.index_num, file=copy_of(last.file))
            self._kidx = None
        return IndexService.last_file_for_write(self)

    def close_memory(self) -> None:
        """Close what lives in memory only (the disk service's files are its own)."""
        self._kidx = None
        for f in self.files:
            if isinstance(f.file, MemoryFile):
                f.close()

    def close(self) -> None:
        self.close_memory()
        self.disk.close()


class _Redispatch:
    """What dispatch sees: the store's settings, the served index, and its consume queues moved
    into memory (MemoryFileQueue: the last file a private copy) before a unit is added."""

    def __init__(self, store, index: CrashIndexService):
        self.store, self.cfg, self.commitlog, self.index = store, store.cfg, store.commitlog, index
        self.batch_topics = store.batch_topics
        self.warnings = store.warnings
        self.root, self.read_only = store.root, True
        self.moved: dict[tuple[str, int], tuple | None] = {}   # queue key -> (it was there, its view_begin); None: no queue
        self.batch_queues = _BatchQueuesInMemory(store.batch_queues)

    def queue_for_write(self, topic: str, queue_id: int):
        key = (topic, queue_id)
        if key not in self.moved:
            existed = key in self.store.queues
            cq = self.store.queue_for_write(topic, queue_id)   # a new queue is read-only, without files
            self.moved[key] = (existed, cq.view_begin()) if cq is not None else None
        return self.store.queues.get(key)

    def settle(self) -> None:
        """The view is kept: the replaced last files are let go (their private copies serve)."""
        for key, moved in self.moved.items():
            if moved is not None:
                self.store.queues[key].view_keep(moved[1])
        self.moved.clear()
        self.batch_queues.keep()

    def restore(self) -> None:
        """The queues as their files are (a view given up half-way)."""
        for key, moved in self.moved.items():
            if moved is not None and moved[0]:
                self.store.queues[key].view_undo(moved[1])
            elif moved is not None:
                self.store.queues.pop(key, None)
        self.batch_queues.restore()


class _BatchQueuesInMemory:
    """`store.batch_queues` as BatchCQ dispatch sees it in the view: a queue moves into memory
    (view_begin) before its first unit is added, and one dispatch makes lives there only."""

    def __init__(self, queues: dict):
        self.queues = queues
        self.moved: dict[tuple[str, int], tuple | None] = {}   # key -> its view_begin; None: made here

    def get(self, key):
        bcq = self.queues.get(key)
        if bcq is not None and key not in self.moved:
            self.moved[key] = bcq.view_begin()
        return bcq

    def __setitem__(self, key, bcq) -> None:
        bcq.view_begin()
        self.moved[key] = None
        self.queues[key] = bcq

    def keep(self) -> None:
        for key, was in self.moved.items():
            if was is not None:
                self.queues[key].view_keep(was)
        self.moved.clear()

    def restore(self) -> None:
        for key, was in self.moved.items():
            if was is None:
                self.queues.pop(key, None)
            else:
                self.queues[key].view_undo(was)


class _TooLong(Exception):
    pass


def serve_index(store) -> None:
    """Make `store.index` the served index of a crashed classic store opened read-only (the
    opener calls it after recovery). Nothing for a clean shutdown, a writable open, a
    live broker's store (its files are what it serves), an index turned off, or `check`'s
    tolerant open (it judges the files: the re-dispatch would be work thrown away)."""
    p, cl, disk = store.recovery_plan, store.commitlog, store.index
    indexed = store.cfg.messageIndexEnable
    rocks = getattr(store.queue_store, "loses_units_in_crash", False)   # RocksDB queues: written without a WAL
    if not (store.read_only and store.served_view and not store.cfg.tolerant and store.abort_present
            and (indexed or rocks)
            and cl.redispatches_after_crash and cl.files and p is not None and p.abnormal) \
            or store.broker_holding_lock() is not None:
        return
    lost = disk.files_after(store.checkpoint.indexMsgTimestamp)
    served = CrashIndexService(disk, lost)
    view = _Redispatch(store, served)
    start, end = cl.files[p.start_index].file_from_offset, p.end_offset
    kept_end = served.files[-1].header.endPhyOffset if served.files else -1
    counts = [0, 0]
    budget = _Budget(counts)
    try:
        if end - start > LIMIT_BYTES:
            raise _TooLong()
        # RocketMQ's order: recoverAbnormally dispatches from its start file to the end, then
        # 4.x's reput resumes at the consume queues' largest maxPhysicOffset (5.x's at the
        # commitlog's end, getConfirmOffset: nothing more). (rmqstore's own recovery also indexes
        # the records between the kept files' end and the start file, whose keys RocketMQ loses;
        # the broker's answer is what is served here.)
        run(redispatch(view, start, end, counts, budget))
        if store.queues or store.batch_queues:
            run(redispatch(view, max(reput_start(store, True), cl.min_offset), end, counts, budget))
        budget.raise_if_cancelled()   # (redispatch polls it every DISPATCH_STEP records)
    except _TooLong:
        served.close_memory()
        view.restore()
        shown = ((["key queries read the index files as they are on disk"] if indexed else [])
                 + (["the RocksDB consume queues show only the units flushed before the crash"] if rocks else []))
        store.warnings.append(
            f"crash recovery would re-dispatch {end - start:,} bytes of commitlog (more than this view makes: "
            f"{LIMIT:,} records, {LIMIT_BYTES >> 20} MiB): {' and '.join(shown)} "
            + ("(the broker's restart re-dispatches the rest)" if rocks
               else "(`rmqstore recover` on a copy gives what the restarted broker serves)"))
        return
    view.settle()
    if rocks:
        store.warnings.append(
            f"RocksDB consume queues as RocketMQ serves them after its crash recovery (in memory, the database "
            f"unchanged): {counts[1]:,} units of {counts[0]:,} records re-dispatched from the commitlog (5.x writes "
            "these queues without a WAL: a crash loses what was not flushed)")
    if not indexed:
        served.close_memory()
        return
    store.index = served
    offs = [f.entries[1:f.header.indexCount]["commitLogOffset"] for f in lost if f.header.indexCount > 1]
    never = sum(int(((o > kept_end) & (o < start)).sum()) for o in offs)   # neither kept nor re-indexed
    store.warnings.append(
        f"index as RocketMQ serves it after its crash recovery (in memory, no file changed): "
        f"{', '.join(f.name for f in lost) or 'no file'} deleted, {served.entries_added:,} entries of "
        f"{counts[0]:,} records re-indexed" + (f", {never:,} entries of the deleted files never indexed again "
                                                  "(exact key answers mark them INDEX LOST BY ROCKETMQ)" if never else ""))


class _Budget:
    """A CancelToken for _dispatch that stops the view past LIMIT records."""

    def __init__(self, counts: list[int]):
        self.counts = counts

    def raise_if_cancelled(self) -> None:
        if self.counts[0] > LIMIT:
            raise _TooLong()
