"""Recovery (§12) as plan and apply: the one home of what an open does to a store left by a
crash or a clean shutdown.

`plan(store)` reads the freshly loaded store and decides everything, writing nothing: the
kind of shutdown (the `abort` file), where the commitlog's valid data ends and which rule
found it, the bytes and files past that end, the consume-queue units past it (dirty units),
the index files crash recovery drops (the checkpoint's indexMsgTimestamp), the torn slots of
the last index file and the short index files (a writable load has extended them already, as
RocketMQ's map does: IndexService.short_files; a read-only one lists what it would do). It is
the only walk over the commitlog an open makes.

`apply(plan, store)` (a task: yields Progress, returns a RecoveryReport) performs it. On a
writable store it writes (files cut and zeroed, untrusted index files deleted, records
re-dispatched); on a read-only one the same steps only set write positions in memory, so
every view ends where the plan says and a dry run (which *is* the plan of a read-only open)
cannot disagree with what a read-only open shows."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from engine.config import CQ_UNIT_SIZE
from engine.format.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, RecordStatus, check_record
from engine.store.commit_log import ScanResult
from engine.store.dispatcher import dispatch
from engine.store.index_file import LONG_MAX, IndexHeader
from engine.tasks import NEVER, CancelToken, Progress, Task

VERIFY_SPAN = 256 << 20   # read-only normal opens CRC-check this much of the last three files
DISPATCH_STEP = 4096  # records re-dispatched between two progress reports / cancel polls


@dataclass
class RecoveryReport:
    """What apply did (the plan says what it would do)."""
    abnormal: bool
    commitlog: ScanResult
    cq_max_physic_offset: int
    truncated_queues: list[str] = field(default_factory=list)
    deleted_index_files: list[str] = field(default_factory=list)
    dispatched: int = 0          # records re-dispatched (before, during and after the scan)
    units_written: int = 0       # ConsumeQueue units those records added
    index_entries_added: int = 0  # index entries they added

    def summary(self, plan: "RecoveryPlan | None" = None) -> str | None:
        """What a read-write open's recovery did, in one line for `send` and the GUI's
        read-write switch; None when a clean start changed nothing."""
        parts = []
        if plan is not None and plan.data_cut:
            gone = self.commitlog.deleted_files
            parts.append(f"commitlog cut at {self.commitlog.end_offset} ({self.commitlog.stop_reason or 'end'}; "
                         "the data after it zeroed" + (f", files deleted {', '.join(gone)}" if gone else "") + ")")
        if self.truncated_queues:
            parts.append(f"units past it dropped in {len(self.truncated_queues)} queues")
        if self.deleted_index_files:
            parts.append(f"index files rebuilt {', '.join(self.deleted_index_files)}")
        if self.units_written or self.index_entries_added:
            parts.append(f"{self.dispatched:,} records re-dispatched ({self.units_written:,} CQ units, "
                         f"{self.index_entries_added:,} index entries written)")
        if not parts and not self.abnormal:
            return None
        kind = "abnormal recovery (abort file present)" if self.abnormal else "normal recovery"
        return f"{kind}: " + ("; ".join(parts) if parts else "nothing to cut or re-dispatch")


@dataclass
class FileCut:
    """Commitlog bytes [start, end) of one file past the valid end: zeroed, or the whole file
    deleted (a writable recovery; a read-only open only stops reading there)."""
    file: str
    start: int
    end: int
    delete: bool

    def to_json(self) -> dict:
        return {"file": self.file, "from": self.start, "to": self.end, "delete": self.delete}


@dataclass
class QueueCut:
    """A consume queue's dirty tail: units whose record starts at or after the commitlog end."""
    topic: str
    queue_id: int
    max_offset_before: int   # after the queue's own end was found (§8.9)
    max_offset: int          # after the dirty units are dropped (§8.10): the topic queue table's offset

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.queue_id}"

    @property
    def units_dropped(self) -> int:
        return self.max_offset_before - self.max_offset

    def to_json(self) -> dict:
        return {"topic": self.topic, "queueId": self.queue_id, "maxOffsetBefore": self.max_offset_before,
                "maxOffset": self.max_offset, "unitsDropped": self.units_dropped}


@dataclass
class IndexExtension:
    """An index file shorter than configured: a writable load extends it with zeros, as
    RocketMQ's map does (IndexService.short_files); then the crash rule may delete it."""
    file: str
    size: int                # bytes it had
    extended_to: int         # the configured size
    end_timestamp: int       # its header's endTimestamp (the crash rule's)
    deleted: bool = False    # crash recovery then deletes it (and re-indexes its records)

    def to_json(self) -> dict:
        return {"file": self.file, "size": self.size, "extendedTo": self.extended_to,
                "endTimestamp": self.end_timestamp, "deleted": self.deleted}


@dataclass
class RecoveryPlan:
    """Everything recovery will do, decided before any of it is done. The topic queue table
    (RocketMQ's recoverTopicQueueTable: each queue's next offset) is the queues' max offsets
    once the queue cuts are made; consumer offsets are the broker's, left as they are."""
    abnormal: bool               # `abort` was there: the last run did not shut down cleanly
    writable: bool               # apply writes (and re-dispatches); else it shapes the views only
    start_rule: str              # which rule chose where the commitlog scan starts
    start_index: int             # the scan's first commitlog file ...
    start_pos: int               # ... and position in it
    scan: ScanResult             # where valid data ends and why
    crc_checked: bool            # the scan checked body CRCs (checkCRCOnRecover)
    checkpoint: dict
    queue_ends: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # (byte end, maxPhysicOffset)
    cq_max_physic_offset: int = -1
    commitlog_cuts: list[FileCut] = field(default_factory=list)
    queue_cuts: list[QueueCut] = field(default_factory=list)
    index_files_deleted: list[str] = field(default_factory=list)  # crash recovery rebuilds them
    index_files_extended: list[IndexExtension] = field(default_factory=list)  # short: extended first
    empty_index_files: list[str] = field(default_factory=list)    # zero-length: deleted
    torn_slots: dict[str, int] = field(default_factory=dict)      # last index file: slots to point back
    index_end_clamp: tuple[str, int, int] | None = None           # (file, endPhyOffset, lowered to)
    data_cut: bool = False       # written bytes lie past the end (a torn tail), not only zeros

    @property
    def end_offset(self) -> int:
        return self.scan.end_offset

    @property
    def files_deleted(self) -> list[str]:
        return [c.file for c in self.commitlog_cuts if c.delete]

    def to_json(self) -> dict:
        return {"abnormal": self.abnormal, "writable": self.writable, "startRule": self.start_rule,
                "startFile": self.scan.start_file, "startPosition": self.start_pos,
                "endOffset": self.end_offset, "stopReason": self.scan.stop_reason, "crcChecked": self.crc_checked,
                "messagesScanned": self.scan.messages, "cqMaxPhysicOffset": self.cq_max_physic_offset,
                "commitlogCuts": [c.to_json() for c in self.commitlog_cuts],
                "queueCuts": [c.to_json() for c in self.queue_cuts],
                "indexFilesDeleted": self.index_files_deleted, "emptyIndexFiles": self.empty_index_files,
                "indexFilesExtended": [e.to_json() for e in self.index_files_extended],
                "tornSlots": self.torn_slots,
                "indexEndClamp": None if self.index_end_clamp is None else
                dict(zip(("file", "endPhyOffset", "loweredTo"), self.index_end_clamp)),
                "redispatch": self.writable, "checkpoint": self.checkpoint}

    def lines(self) -> list[str]:
        """The plan in words, for the CLI."""
        out = [f"shutdown: {'abnormal (abort file present)' if self.abnormal else 'normal'}",
               f"scan start: {self.start_rule} (file {self.scan.start_file}, position {self.start_pos})",
               f"commitlog end: {self.end_offset} ({self.scan.stop_reason or 'end'}; "
               f"{'CRC checked' if self.crc_checked else 'CRC not checked'}, {self.scan.messages} records scanned)"]
        for c in self.commitlog_cuts:
            out.append(f"  commitlog {c.file}: {'delete the file' if c.delete else 'clear'} [{c.start}, {c.end})")
        for q in self.queue_cuts:
            out.append(f"  consume queue {q.name}: drop {q.units_dropped} units, max offset "
                       f"{q.max_offset_before} -> {q.max_offset}")
        ts = self.checkpoint.get("indexMsgTimestamp")
        for e in self.index_files_extended:
            out.append(f"  index {e.file}: {e.size} bytes, extend to {e.extended_to} with zeros (as RocketMQ's map "
                       "does), then " + (f"delete (the crash rule: endTimestamp {e.end_timestamp}, "
                                         f"indexMsgTimestamp {ts}), rebuilt from the commitlog" if e.deleted else
                                         f"keep it (its entries past byte {e.size} are lost)"))
        extended = {e.file for e in self.index_files_extended}
        for name in (n for n in self.index_files_deleted if n not in extended):
            out.append(f"  index {name}: delete (newer than indexMsgTimestamp "
                       f"{self.checkpoint.get('indexMsgTimestamp')}), rebuilt from the commitlog")
        for name in self.empty_index_files:
            out.append(f"  index {name}: empty, delete")
        for name, n in self.torn_slots.items():
            out.append(f"  index {name}: {n} torn slots pointed back")
        if self.index_end_clamp is not None:
            name, was, now = self.index_end_clamp
            out.append(f"  index {name}: endPhyOffset {was} lowered to {now}")
        if self.writable:
            out.append("records the consume queues or the index lack are re-dispatched")
        return out


# ---- plan ----------------------------------------------------------------------------------
def plan(store) -> RecoveryPlan:
    """Decide recovery for a just-loaded store (MessageStore before `apply`). Writes nothing."""
    writable = not store.read_only
    cl = store.commitlog
    ends: dict[tuple[str, int], tuple[int, int]] = {}
    for key, cq in store.queues.items():
        found = cq.find_end(exact=writable)
        if found is not None:
            ends[key] = found

    def max_physic(key) -> int:
        return ends[key][1] if key in ends else store.queues[key].max_physic_offset

    cq_max = max((max_physic(k) for k in store.queues), default=-1)
    start, start_pos, rule = _scan_start(store, ends, cq_max, max_physic)
    own = cl.own_recovery_start()  # a log that picks its start itself (DLedger), crash or not
    if own is not None:
        (start, rule), start_pos = own, 0
    scan = cl.scan(start, start_pos=start_pos) if cl.files else ScanResult(None, 0, 0, stop_reason="no commitlog files")
    end = scan.end_offset
    p = RecoveryPlan(store.abort_present, writable, rule, start, start_pos, scan, cl.recover_opts.check_crc,
                     store.checkpoint.to_json(), ends, cq_max)
    p.commitlog_cuts = [FileCut(f.path.name, max(end, f.file_from_offset), f.end_offset, f.file_from_offset > end)
                        for f in cl.files if f.end_offset > end]
    f = cl.queue.find(end) if cl.files else None
    pos = end - f.file_from_offset if f is not None else 0
    p.data_cut = bool(p.files_deleted) or (f is not None and any(f.buf[pos:min(f.file_size, pos + 4096)]))
    if cq_max >= end:
        for key, cq in store.queues.items():
            if not writable and max_physic(key) <= end:
                continue  # read-only: every unit it kept ends inside the log, none is dirty
            rec_end = ends[key][0] if key in ends else None
            before = _units_end(cq, rec_end)
            new_end, _ = cq.dirty_end(end, limit=rec_end if writable else None)
            after = _units_end(cq, new_end)
            if after != before:
                p.queue_cuts.append(QueueCut(key[0], key[1], before, after))
    _plan_index(store, p)
    return p


def _scan_start(store, ends, cq_max, max_physic) -> tuple[int, int, str]:
    cl = store.commitlog
    if store.abort_present:
        own = getattr(store.queue_store, "abnormal_start_index", None)
        if own is not None:   # RocksDB queues: the file their committed max phy offset is in
            return (own(cl), 0, "abnormal: newest file whose first record's physical offset is no later than the "
                    f"RocksDB queues' committed max ({store.queue_store.committed_phy_offset or 0})")
        cfg = cl.cfg
        safe = cfg.messageIndexEnable and cfg.messageIndexSafe
        limit = store.checkpoint.min_timestamp_index if safe else store.checkpoint.min_timestamp
        return (cl.abnormal_start_index(store.checkpoint), 0,
                f"abnormal: newest file whose first message is no newer than the checkpoint's "
                f"{'min(physic, logics, index)' if safe else 'min(physic, logics)'} - 3 s = {limit}")
    start = cl.normal_start_index(cq_max)
    third = max(0, len(cl.files) - 3)
    rule = "normal: third-last file" if start == third else "normal: the file holding the consume queues' end"
    if store.read_only and cl.files:
        # read-only after a clean shutdown: the records the consume queues reference were
        # valid when dispatched, so on a big log the scan for the end starts after the last of
        # them (checked here) instead of CRC-checking the last three files: open costs
        # O(files). Up to VERIFY_SPAN bytes are checked as RocketMQ's restart does, which cuts
        # the log at a record whose body CRC no longer matches (checkCRCOnRecover)
        vouched = _vouched_end(store, ends, max_physic)
        if vouched is not None and vouched - cl.files[start].file_from_offset > VERIFY_SPAN:
            f = cl.queue.find(vouched)
            return cl.queue.index_of(f), vouched - f.file_from_offset, \
                "normal, read-only: after the last record the consume queues reference (checked)"
    return start, 0, rule


def _vouched_end(store, ends, max_physic) -> int | None:
    """End of the last record any consume queue references, if that record checks out."""
    if not store.queues:  # queues kept elsewhere (RocksDB) vouch for an end themselves
        return store.queue_store.vouched_end(store.commitlog)
    key = max(store.queues, key=max_physic, default=None)
    if key is None:
        return None
    cq = store.queues[key]
    count = _units_end(cq, ends[key][0] if key in ends else None)
    if count <= 0 or max_physic(key) <= 0:
        return None
    pos = (count - 1) * CQ_UNIT_SIZE
    f = cq.queue.find(pos)
    if f is None or pos < cq.queue.min_offset:
        return None
    u = cq.view(f)[(pos - f.file_from_offset) // CQ_UNIT_SIZE]
    phy, size = int(u["commitLogOffset"]), int(u["size"])
    cl = store.commitlog
    r = cl.read_record(phy, cl.recover_opts)
    if r.status is not RecordStatus.MESSAGE or r.size != size or phy + size != max_physic(key):
        return None
    return phy + size


def _units_end(cq, end: int | None) -> int:
    """The queue's max offset once its byte end is `end` (None: as it stands)."""
    if end is None:
        return cq.max_offset
    files = cq.queue.files
    for f in reversed(files):
        wp = min(cq.file_size, max(0, end - f.file_from_offset))
        if wp > 0:
            return (f.file_from_offset + wp) // CQ_UNIT_SIZE
    return (files[0].file_from_offset if files else 0) // CQ_UNIT_SIZE


def _plan_index(store, p: RecoveryPlan) -> None:
    index, ts = store.index, store.checkpoint.indexMsgTimestamp
    p.index_files_extended = _extensions(store, p.writable)
    if p.abnormal:
        p.index_files_deleted = [f.name for f in index.files_after(ts)]
        # a read-only load passed the short files over: the rule (from the first file that
        # goes, every later one) as the writable load, which maps them, applies it
        newer = [e.file for e in p.index_files_extended if e.end_timestamp > ts]
        first = min(p.index_files_deleted[:1] + newer, default=None)
        if first is not None:
            p.index_files_deleted = [f.name for f in index.files if f.name >= first]
            for e in p.index_files_extended:
                e.deleted = e.file >= first
    if not p.writable:
        return
    p.empty_index_files = list(index.empty_files)
    if index.files:  # the repair reads the whole slot table: a writer does it anyway
        last = index.files[-1]
        torn = torn_slots(last)
        if torn:
            p.torn_slots[last.name] = torn
    kept = [f for f in index.files if f.name not in set(p.index_files_deleted)]
    if kept and kept[-1].header.endPhyOffset > p.end_offset:
        f = kept[-1]
        h = f.header
        e = f.entries[1:h.indexCount]["commitLogOffset"]
        below = e[e < p.end_offset]
        now = int(below.max()) if len(below) else min(h.beginPhyOffset, p.end_offset)
        p.index_end_clamp = (f.name, h.endPhyOffset, now)


def _extensions(store, writable: bool) -> list[IndexExtension]:
    """The short index files: those the writable load extended, or (read-only: nothing is
    written) those it would, with the header the extension leaves (their first 40 bytes)."""
    index, full = store.index, store.cfg.index_file_size
    if writable:
        headers = {f.name: f.header for f in index.files}
        return [IndexExtension(name, size, full, headers[name].endTimestamp) for name, size in index.extended_files]
    out = []
    for path, size, why in index.short() if index.refused else ():
        if why:
            continue   # a writable open refuses it
        h = IndexHeader.read_path(path)
        if h is not None:
            out.append(IndexExtension(path.name, size, full, h.endTimestamp))
    return out


def records_reach(cl) -> int:
    """How far records reach on disk before any cut (what `recover` reports the cut against):
    the scan from the third-last file that ignores write positions and body CRCs."""
    return cl.scan(cl.normal_start_index(), opts=cl.read_opts, to_file_end=True).end_offset if cl.files else 0


def torn_slots(f) -> int:
    """Slots a writer killed between an entry's slot and its header left pointing at or past
    indexCount (IndexFile.repair_torn_put points them back)."""
    return int((f.slots >= f.header.indexCount).sum())


# ---- apply ---------------------------------------------------------------------------------
def apply(p: RecoveryPlan, store, cancel: CancelToken | None = None) -> Task[RecoveryReport]:
    """Perform `p` on the store it was planned for. Cancel is polled between steps and between
    re-dispatched records: the `abort` file stays until a clean close, so a cancelled recovery
    is simply recovered again by the next open."""
    cancel = cancel or NEVER
    writable = p.writable
    cl = store.commitlog
    end = p.end_offset
    counts = [0, 0]  # records dispatched, CQ units they wrote
    report = RecoveryReport(p.abnormal, p.scan, p.cq_max_physic_offset)
    entries_before = store.index.entries_added
    cancel.raise_if_cancelled()  # nothing written yet
    yield Progress(0, 1, "index")
    if writable:
        store.index.repair_after_crash(torn=bool(p.torn_slots))
    yield Progress(0, 1, "consume queues")
    for key, (q_end, q_max_physic) in p.queue_ends.items():
        store.queues[key].set_end(q_end, q_max_physic)
    cancel.raise_if_cancelled()
    if p.abnormal and writable:
        yield Progress(0, 1, "index")
        report.deleted_index_files = store.index.delete_after(store.checkpoint.indexMsgTimestamp)
        if cl.files:
            start = cl.files[p.start_index].file_from_offset
            # crash recovery re-dispatches from the abnormal start file but first deleted the
            # index files newer than indexMsgTimestamp (§12.6): unless messageIndexSafe, RocketMQ
            # then loses the keys in between, and with consume queues behind the start file (a
            # rebuild killed half-way) it never dispatches the records before it. Those first.
            yield from redispatch(store, resume_offset(store, p.cq_max_physic_offset), start, counts, cancel)
            last = [0]
            yield from redispatch(store, start, end, counts, cancel, last)
            if last[0]:
                # RocketMQ's re-dispatch sets logicsMsgTimestamp at every record it hands the
                # queues, present or not: its clean shutdown then writes the last one's time
                # (the crash's value may be ahead of the data recovery kept)
                store.checkpoint.logicsMsgTimestamp = last[0]
    yield Progress(0, 1, "commitlog")
    report.commitlog = dataclasses.replace(p.scan, deleted_files=cl.apply_end(end, zero=writable))
    yield Progress(1, 1, "commitlog")
    if p.cq_max_physic_offset >= end:
        for cq in store.queues.values():
            if not writable and cq.max_physic_offset <= end:
                continue
            before = cq.max_offset
            cq.truncate_dirty(end)
            if cq.max_offset != before:
                report.truncated_queues.append(f"{cq.topic}/{cq.queue_id}")
    if writable:  # reput: catch up from where the least advanced builder stopped (idempotent)
        store.index.clamp_end(end)
        yield from redispatch(store, min(resume_offset(store, reput_start(store, p.abnormal)), end), end, counts, cancel)
        report.dispatched, report.units_written = counts
        report.index_entries_added = store.index.entries_added - entries_before
    yield Progress(1, 1, "index")
    for cq in store.queues.values():
        cq.correct_min_offset(cl.min_offset)
    yield Progress(1, 1, "consume queues")
    return report


def queues_max_physic(store) -> int:
    """The largest maxPhysicOffset of the store's queues, BatchCQ's too (RocketMQ's consume
    queue table holds both): where 4.x's reput resumes; -1 without a queue."""
    queues = list(store.queues.values()) + list(getattr(store, "batch_queues", {}).values())
    return max((q.max_physic_offset for q in queues), default=-1)


def reput_start(store, abnormal: bool) -> int:
    """Where dispatch resumes once recovery is done: 4.x's reput at the queues' largest
    maxPhysicOffset (queues_max_physic); 5.x's at the commitlog's end (getConfirmOffset), which
    after a crash leaves nothing (recoverAbnormally dispatched from its start file) and after a
    clean shutdown follows recoverNormally's dispatch from the queues' end."""
    if abnormal and store.generation().version == "5.x":
        return LONG_MAX
    return queues_max_physic(store)


def resume_offset(store, cq_end: int) -> int:
    """Where re-dispatch must start so that neither builder misses a record: the end of
    what the consume queues hold (RocketMQ's reput start) or, if earlier, the first record
    the index lacks (a writer or a rebuild killed between a record's CQ unit and its index
    entries, an index deleted or cut short). Both builders skip what they already hold."""
    begin = max(cq_end, 0)
    if store.cfg.messageIndexEnable:
        begin = min(begin, store.index.resume_offset(store.commitlog))
    return max(store.commitlog.min_offset, begin)


def _messages(cl, begin: int, end: int):
    """The messages in [begin, end) (CommitLog.walk's verdicts, without its per-record file
    lookup): damage or a blank ends a file, a missing file is passed over."""
    opts = cl.read_opts
    for f in cl.files:
        start = f.file_from_offset
        if f.end_offset <= begin:
            continue
        if start >= end:
            return
        pos, stop, limit, buf = max(begin - start, 0), min(end - start, f.wrote_position), f.wrote_position, f.buf
        while pos < stop:
            r = check_record(buf, pos, limit, start + pos, opts)
            if r.status is RecordStatus.MESSAGE:
                yield r.message
            elif r.status is not RecordStatus.SIZE_MISMATCH or r.size <= 0:
                break
            pos += r.size


def redispatch(store, begin: int, end: int, counts: list[int], cancel: CancelToken, last: list | None = None
              ) -> Task[None]:
    """Re-dispatch the records in [begin, end) (RocketMQ's reput), with progress in bytes;
    `last` gets the store time of the last record the queues take (not prepared, not rolled back)."""
    if begin >= end:
        return
    n = 0
    for msg in _messages(store.commitlog, begin, end):
        counts[0] += 1
        if dispatch(store, msg):
            counts[1] += 1
        if last is not None and msg.sysFlag & 0x0C in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            last[0] = msg.storeTimestamp
        n += 1
        if n % DISPATCH_STEP == 0:
            cancel.raise_if_cancelled()
            yield Progress(msg.physicalOffsetField - begin, end - begin, "commitlog", "bytes",
                           "re-dispatching records")
    yield Progress(end - begin, end - begin, "commitlog", "bytes", "re-dispatching records")
