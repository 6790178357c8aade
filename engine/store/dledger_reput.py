"""A DLedger store as the restarted broker serves it (RocketMQ 4.9.7 + DLedger 0.3.1.2),
built in memory on a read-only open: not one byte of the store changes.

What the broker does when it reopens the files (STORE_FORMAT_DLEDGER.md §6):

- `DefaultMessageStore.load` runs `IndexService.load(lastExitOK)`. After a crash (`abort`
  present) it deletes *each* index file whose endTimestamp is after the checkpoint's
  indexMsgTimestamp, file by file.
- `DLedgerCommitLog.recover` runs DLedger's recovery (engine.store.dledger_commit_log) and
  cuts consume-queue units past the ledger's write position. It never re-dispatches, crash
  or not.
- `start()` sets reput to the largest maxPhysicOffset of all consume queues (at least the
  commitlog's min offset) and waits until reput reaches the max offset. That max is
  committedPos: once the node leads its group again, the end of the ledger.
- Reput dispatches every entry from there: a ConsumeQueue unit (NOT_TYPE and COMMIT) and,
  with messageIndexEnable, index entries (`IndexService.buildIndex`). buildIndex writes into
  the last index file that is left, or into a new one that takes its end (endPhyOffset,
  endTimestamp), and it skips any record below that file's endPhyOffset.

So after a crash, the keys held only by the deleted files are gone for good. Reput starts at
the consume queues' end, far past the start of those files. The entries the queues lacked
get their units and keys.

Here the same steps run over copies that live only in memory. Files that gain units or
entries are mapped copy-on-write (MAP_PRIVATE, so writes never reach the file). Files the
broker would create are anonymous memory. The deleted index files leave `store.index` (what
every key query reads) for `store.index.lost_files`, where the exact key answer still
finds them and marks them (`indexLostByRocketMQ`). Nothing is done while a process holds
the store's lock: a running broker has already restarted it, and its files are live."""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.format import dledger_layout as L
from engine.format.message import RecordStatus, check_record
from engine.store.dispatcher import dispatch
from engine.store.index_file import IndexFile
from engine.store.memory_files import MemoryFileQueue, ServedIndexService, queue_into_memory


@dataclass
class RestartView:
    """What the broker's restart did to what a reader is served (the store's files are as they were)."""
    abnormal: bool
    reput_from: int                  # the consume queues' largest maxPhysicOffset (reput's start)
    reput_to: int                    # the max offset: committedPos once the node leads again
    dispatched: int = 0              # messages reput dispatched
    units: dict[str, int] = field(default_factory=dict)   # "topic/queueId": units reput added
    index_files_deleted: list[str] = field(default_factory=list)  # IndexService.load(false)
    index_files_created: list[str] = field(default_factory=list)  # by reput's buildIndex
    index_entries_added: int = 0
    keys_lost: int = 0               # entries of the deleted files below reput's start: never indexed again
    skipped: list[str] = field(default_factory=list)  # where reput passed over data, and why

    def to_json(self) -> dict:
        return {"abnormal": self.abnormal, "reputFrom": self.reput_from, "reputTo": self.reput_to,
                "dispatched": self.dispatched, "unitsAdded": self.units,
                "indexFilesDeleted": self.index_files_deleted, "indexFilesCreated": self.index_files_created,
                "indexEntriesAdded": self.index_entries_added, "indexEntriesLost": self.keys_lost,
                "skipped": self.skipped}

    def lines(self) -> list[str]:
        out = []
        if self.index_files_deleted:
            out.append(f"index files RocketMQ deletes at restart (newer than the checkpoint's indexMsgTimestamp): "
                       f"{', '.join(self.index_files_deleted)}; {self.keys_lost} of their entries are never "
                       "indexed again (DLedger recovery does not re-dispatch)")
        if self.units or self.index_entries_added:
            units = ", ".join(f"{q} +{n}" for q, n in sorted(self.units.items()))
            out.append(f"reput dispatches {self.dispatched} entries from {self.reput_from} to {self.reput_to}"
                       + (f" (units: {units})" if units else ""))
        out.extend(self.skipped)
        return out


class _Reput:
    """The store as reput's dispatch sees it: the same cfg and batch topics, the queues and
    the index moved into memory before anything is added to them."""

    def __init__(self, store, index: ServedIndexService, view: RestartView):
        self.store, self.cfg, self.index, self.view = store, store.cfg, index, view
        self.batch_topics = store.batch_topics
        self.warnings = store.warnings

    def queue_for_write(self, topic: str, queue_id: int):
        cq = self.store.queue_for_write(topic, queue_id)  # a new queue is made read-only, without files
        if cq is not None and not isinstance(cq.queue, MemoryFileQueue):
            old = queue_into_memory(cq).last
            if old is not None:
                old.close()
        return cq


def restart_view(store) -> RestartView | None:
    """Turn the freshly recovered read-only `store` (a DLedger one) into what the restarted
    broker serves, and say what changed (DLedgerCommitLog.after_recovery calls it). None: a
    process holds its lock (a live broker: its files are what it serves)."""
    cl = store.commitlog
    if store.broker_holding_lock() is not None:
        return None
    abnormal = bool(store.abort_present)
    lost: list[IndexFile] = []
    if abnormal:  # IndexService.load(false): each file on its own endTimestamp
        ts = store.checkpoint.indexMsgTimestamp
        lost = [f for f in store.index.files if f.header.endTimestamp > ts]
    start = max([cl.min_offset] + [cq.max_physic_offset for cq in store.queues.values()])
    end = cl.max_offset
    view = RestartView(abnormal, start, end, index_files_deleted=[f.name for f in lost])
    served = ServedIndexService(store.index, lost)
    store.index = served
    reput = _Reput(store, served, view)
    before = {k: cq.max_offset for k, cq in store.queues.items()}
    if start < end:
        for msg in _reput_messages(cl, start, end, view):
            dispatch(reput, msg)
            view.dispatched += 1
    for key, cq in store.queues.items():
        n = cq.max_offset - before.get(key, cq.min_offset)
        if n > 0:
            view.units[f"{key[0]}/{key[1]}"] = n
            if key not in before:
                cq.correct_min_offset(cl.min_offset)
    view.index_files_created = list(served.created)
    view.index_entries_added = served.entries_added
    for f in lost:
        n = f.header.indexCount
        if n > 1:
            offs = f.entries[1:n]["commitLogOffset"]
            view.keys_lost += int((offs < start).sum())
    cl.restart = view
    return view


def _reput_messages(cl, start: int, end: int, view: RestartView):
    """The messages reput dispatches from `start` (an entry's start, the consume queues'
    end) to `end`: each entry's message in order, a -1 blank moving to the next file. A
    start inside an entry is RocketMQ's "[BUG] dispatch message to consume queue error":
    it passes over the rest of that file. A record that does not decode is passed over
    (its entry size tells where the next starts, as reput's bufferSize does)."""
    if start < cl.divided:  # a mixed store: old commitlog records below the first DLedger file
        for _, r in cl.walk(start, min(end, cl.divided)):
            if r.status is RecordStatus.MESSAGE:
                yield r.message
        start = cl.divided
    data = cl.data_files
    first = cl.queue.find(start)
    if first is None or first not in data:
        return
    skip_file = None
    for kind, pos, what in cl.iter_entries(data.index(first)):
        if pos >= end:
            return
        f = cl.queue.find(pos)
        if f is skip_file:
            continue
        if kind != "entry":
            continue  # a blank or the end of a file's data: reput rolls to the next file
        if pos < start:
            if pos + what.size > start:
                view.skipped.append(f"reput starts at {start}, inside entry {what.index} at {pos}: RocketMQ "
                                    f"passes over the rest of {f.path.name}")
                skip_file = f
            continue
        rel = pos - f.file_from_offset
        r = check_record(f.buf, rel + L.ENTRY_BODY_OFFSET, rel + what.size, pos + L.ENTRY_BODY_OFFSET, cl.read_opts)
        if r.status is RecordStatus.MESSAGE:
            yield r.message
        else:
            view.skipped.append(f"entry {what.index} at {pos}: its message does not decode ({r.status.value}); "
                                "reput passes over it")
