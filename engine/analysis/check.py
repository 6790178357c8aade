"""`check`: verify a store without writing a byte, against every invariant RocketMQ relies on,
and say where each break is (file, offset, what was expected).

- commitlog: each record's size, magic and fields (check_record), body CRC, the stored
  PHYSICALOFFSET and, where records carry it, the whole-record `__CRC32#`; data past the end
  recovery would keep; missing files;
- ConsumeQueue: each unit against its record (offset, size, queue offset, tagsCode by
  RocketMQ's rule: tag hash, delay-level delivery time); every dispatchable record reachable
  from its queue; no unit past the log;
- index: every indexable key of every record in the indexed range has its entry; files that
  could not be read, overlap or do not join; chains: out-of-range and forward links, every
  prevIndex cycle (engine.analysis.chains: a query walking into one loops to its step
  limit), entries in a chain whose key hash belongs to another slot, time order;
- the checkpoint against the data, consumerOffset.json and topics.json against the queues
  (while crash recovery's re-dispatch is pending, a consumer offset inside what the commitlog
  holds for its queue and an indexMsgTimestamp the re-indexed records reach are pending).

`check_task` is the work as an engine task (yields Progress as records are read, polls a
CancelToken, or anything with is_set, and stops with CheckCancelled); `check_store` runs it
for callers that want the answer, with the older `progress(done, total, phase)` callback."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from engine.config import CQ_UNIT_SIZE
from engine.store.consume_queue import FILLER_SIZE
from engine.store.batch_consume_queue import unit_problems
from engine.errors import StoreError
from engine.store.crash_view import disk_index
from engine.tasks import Cancelled, Progress, Task, run

from engine.format.message import SCHEDULE_TOPIC, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE

from . import check_records
from .check_index import chain_findings, index_phase
from .check_queues import DelayLevel, delay_note, expired_units, lmq_files
from .check_cut import records_past_the_cut, whole_records_after
from .check_records import Records, walk_task
from .dledger_check import framing_checks

DISPATCHED = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


class CheckCancelled(Cancelled):
    """check was cancelled before it finished."""


class Problems:
    """What a reader gets wrong (`items`, exit 1), and apart from it what crash recovery will
    still do (`pending_items`: a killed writer's leftovers, exit 0) and `notes` (true of the
    files, invisible to readers)."""

    def __init__(self, limit: int):
        self.items: list[dict] = []
        self.pending_items: list[dict] = []
        self.notes: list[dict] = []
        self.limit = limit
        self.count = 0

    def pending(self, kind: str, detail: str, file, offset, recovery: str) -> None:
        if len(self.pending_items) < self.limit:
            self.pending_items.append({"kind": kind, "detail": detail, "file": str(file), "offset": offset,
                                       "recovery": recovery})

    def note(self, kind: str, detail: str, file, offset) -> None:
        self.notes.append({"kind": kind, "detail": detail, "file": str(file), "offset": offset})

    def add(self, kind: str, detail: str, file, offset) -> None:
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append({"kind": kind, "detail": detail, "file": str(file), "offset": offset})

    def add_each(self, events, word) -> None:
        """One problem per event, worded by word(event) -> (kind, detail, file, offset) while the
        list has room; the rest only counted (a store with a million bad units words 1000)."""
        room = max(0, self.limit - len(self.items))
        for ev in events[:room]:
            self.add(*word(ev))
        self.count += max(0, len(events) - room)


def check_store(store, max_problems: int = 1000, progress=None, cancel=None) -> dict:
    on_progress = None if progress is None else (lambda p: progress(p.done, p.total, p.phase))
    return run(check_task(store, max_problems, cancel), on_progress)


def check_task(store, max_problems: int = 1000, cancel=None) -> Task[dict]:
    """The whole check; Progress in commitlog bytes, then one per later phase."""
    helper = ThreadPoolExecutor(1) if check_records.cores() > 1 else None   # the second core
    disk = disk_index(store)   # a crashed store's index files, not what its read-only open serves
    try:
        return (yield from _check(store if disk is store.index else _OnDisk(store, disk), max_problems, cancel,
                                  helper))
    finally:
        if helper is not None:
            helper.shutdown(wait=True, cancel_futures=True)


class _OnDisk:
    """The store with its index as the files are: check judges the files, not what a read-only
    open serves after a crash (the served index is in memory; its deleted files are findings)."""

    def __init__(self, store, index):
        self._store, self.index = store, index

    def __getattr__(self, name):
        return getattr(self._store, name)


def redispatch_from(store) -> int | None:
    """The commitlog offset from which crash recovery re-dispatches records into the queues
    and the index (engine.store.recovery: the abnormal start file, or earlier where a builder
    stopped before it); None after a clean shutdown, when no recovery is pending."""
    from engine.store.recovery import resume_offset
    p = store.recovery_plan
    cl = store.commitlog
    if p is None or not p.abnormal or not cl.files or not cl.redispatches_after_crash:
        return None  # (DLedger: never re-dispatched; its reput is in the read-only view, dledger_check)
    return min(cl.files[p.start_index].file_from_offset, resume_offset(store, p.cq_max_physic_offset))


def reindex_from(store, pending_from: int) -> int:
    """Where crash recovery's re-dispatch adds index entries again: from `pending_from`, but
    the index builder skips every record below the end of the newest index file the recovery
    keeps (RocketMQ's buildIndex returns for an offset below the last file's endPhyOffset), so
    keys an older, lost index file held are never indexed again."""
    gone = set(store.recovery_plan.index_files_deleted)
    kept = [f for f in store.index.files if f.name not in gone]
    return max(pending_from, store.index.resume_offset(store.commitlog, kept))


def _check(store, max_problems: int, cancel, helper):
    out = Problems(max_problems)
    pending_from = redispatch_from(store)
    chains = None
    walk = _commitlog(store, out, cancel, helper)  # (DLedger: tail in dledger_check)
    while True:
        try:
            p = next(walk)
        except StopIteration as stop:
            rec = stop.value
            break
        if chains is None and helper is not None:  # the index chains need no record: the helper
            chains = helper.submit(chain_findings, store)  # takes them once its part of the walk is done
        yield p
    n_messages = len(rec)
    last_ts = max(0, int(rec.ts.max())) if n_messages else 0
    _poll(store, cancel)
    extra = {}
    extra.update(framing_checks(store.commitlog, store, out))
    yield Progress(0, 3, "consume queues", "phases")  # (then one as each phase ends)
    n_units = _consume_queues(store, rec, out, pending_from)
    yield Progress(1, 3, "consume queues", "phases")
    _poll(store, cancel)
    n_entries = index_phase(store, rec, out, chains.result() if chains is not None else None,
                            None if pending_from is None else reindex_from(store, pending_from))
    _planned_cuts(store, out)
    _restart_cut(store, out)
    yield Progress(2, 3, "index", "phases")
    _checkpoint(store, last_ts, out, rec, pending_from)
    _config_json(store, out, rec, pending_from)
    yield Progress(3, 3, "checkpoint and config", "phases")
    return {"ok": not out.count, "messages": n_messages, "cqUnits": n_units, "indexEntries": n_entries,
            "crcRule": "body CRC and __CRC32# tails" if _verify_tails(store) else "body CRC (4.x: no __CRC32# tails)",
            "problemCount": out.count, "problems": out.items, "recoveryPending": out.pending_items,
            "notes": out.notes, **extra}


def _restart_cut(store, out: Problems) -> None:
    """After a clean shutdown RocketMQ's normal recovery CRC-checks the last three commitlog
    files (checkCRCOnRecover) and ends the log at the first record that fails; a read-only
    open does not read them (engine.store.recovery ends it after the last record the queues
    reference). Say where the broker's next start cuts."""
    p, cl = store.recovery_plan, store.commitlog
    if p is None or p.abnormal or not cl.files or not cl.recover_opts.check_crc or not cl.redispatches_after_crash:
        return
    first = cl.files[max(0, len(cl.files) - 3)].file_from_offset
    bad = [i["offset"] for i in out.items if i["kind"] == "commitlog-crc" and (i["offset"] or -1) >= first]
    if bad:
        off = min(bad)
        out.note("restart-cut", f"RocketMQ's next start ends the commitlog at {off} (normal recovery checks the CRCs "
                 f"of the last three files): the {cl.max_offset - off:,} bytes after it and their queue units are "
                 "dropped; a read-only open still serves them", cl.queue.find(off).path, off)


def _verify_tails(store) -> bool:
    """`__CRC32#` tails are checked unless a 4.x broker wrote the store: 4.9 neither writes nor
    strips the property, so there it is only a producer's property."""
    return store.generation().version != "4.x"


# ---- commitlog ------------------------------------------------------------------------------
def _poll(store, cancel) -> None:
    if cancel is not None and cancel.is_set():
        raise CheckCancelled("check cancelled", path=str(store.root))


def _commitlog(store, out: Problems, cancel, helper=None):
    """The log's own problems, then every record (engine.analysis.check_records); returns Records."""
    cl = store.commitlog
    rec = store.recovery.commitlog
    last = cl.files[-1] if cl.files else None
    crashed = store.abort_present
    if last is not None and rec.end_offset < last.end_offset and not cl.entry_header(last):  # (entries: dledger_check)
        f = cl.queue.find(rec.end_offset) or last
        pos = rec.end_offset - f.file_from_offset
        if pos < f.file_size and any(f.buf[pos:min(f.file_size, pos + 4096)]):
            what = f"data after the end of the valid log ({rec.stop_reason})"
            n, last_whole = whole_records_after(cl, f, rec.end_offset) if crashed else (0, None)
            if n:  # damage inside the log, not a torn tail: the cut drops good records with it
                out.add("commitlog-records-lost", f"the record at the end of the valid log is damaged "
                        f"({rec.stop_reason}) and {n:,} whole record(s) follow it in this file (the last at "
                        f"{last_whole}): crash recovery cuts the log at {rec.end_offset} and drops them with it",
                        f.path, rec.end_offset)
            elif crashed:  # a killed writer's torn tail
                cut = ", ".join(f"{c.file} {'deleted' if c.delete else f'zeroed [{c.start}, {c.end})'}"
                                for c in store.recovery_plan.commitlog_cuts) or "the log ends there"
                out.pending("commitlog-tail", what, f.path, rec.end_offset, f"recovery cuts the log there: {cut}")
            else:
                out.add("commitlog-tail", what, f.path, rec.end_offset)
    if crashed:
        records_past_the_cut(store, rec, out)
        p = store.recovery_plan
        out.pending("abort", "abort file present: the store was not shut down cleanly", store.root / "abort", None,
                    f"abnormal recovery: the commitlog is scanned from file {p.scan.start_file} ({p.start_rule}) "
                    + ("and nothing re-dispatched (DLedger: reput resumes at the consume queues' end)"
                       if not cl.redispatches_after_crash else "and its records re-dispatched"))
    for a, b in cl.queue.gaps:
        out.add("commitlog-gap", f"files missing between {a} and {b}", cl.queue.dirs[0], a)
    for why in store.refused_files:
        out.add("file", f"passed over: {why}", store.root, None)
    return (yield from walk_task(store, out, _verify_tails(store), lambda: _poll(store, cancel), helper))


# ---- consume queues -------------------------------------------------------------------------
def _unit_runs(cq):
    """(first queue offset, units, file) file by file -- a file missing in the middle
    must not hide the rest -- or, for a queue without files (RocksDB), a range read at a time."""
    for cf in cq.queue.files:
        first = max(cf.file_from_offset // CQ_UNIT_SIZE, cq.min_offset)
        yield first, cq.units(first, (cf.file_from_offset + cf.wrote_position) // CQ_UNIT_SIZE), cf.path
    if not cq.queue.files and cq.max_offset > cq.min_offset:
        for a in range(cq.min_offset, cq.max_offset, 4096):
            units = cq.units_with_times(a, min(cq.max_offset, a + 4096))  # store times checked too
            yield a, units, cq.directory
            if len(units) < min(cq.max_offset, a + 4096) - a:
                break  # a unit missing: the rest is reported as missing units


# what is wrong with a unit, in the order the rules are tried
_PAST, _NO_RECORD, _LMQ, _OTHER, _NOT_DISPATCHED, _TAGS, _TIME = range(1, 8)


def _unit_codes(rec: Records, cl, tid: int, qid: int, lmq: bool, q, phy, size, tags, times):
    """(code per unit, 0 = fine; row per unit, -1 = none; units that reached a record
    outside an LMQ -- RocketMQ's "seen")."""
    filler = (phy == 0) & (size == FILLER_SIZE)
    r = rec.find(phy)
    found = (r >= 0) & ~filler
    code = np.zeros(len(phy), dtype=np.int8)
    missing = (r < 0) & ~filler
    code[missing & (phy >= cl.max_offset)] = _PAST
    code[missing & (phy < cl.max_offset) & (phy >= cl.min_offset)] = _NO_RECORD
    rr = np.where(found, r, 0)
    if not rec.n:
        return code, r, found
    if lmq:  # 5.x LMQ: units of other topics' records (their queue offsets are the real topic's)
        code[found & ((rec.size[rr] != size) | (rec.tags[rr] != tags))] = _LMQ
        return code, r, np.zeros(len(phy), dtype=bool)
    other = (rec.topic[rr] != tid) | (rec.qid[rr] != qid) | (rec.qoff[rr] != q) | (rec.size[rr] != size)
    tran = rec.tran[rr]
    undispatched = ~other & (tran != TRANSACTION_NOT_TYPE) & (tran != TRANSACTION_COMMIT_TYPE)
    bad_tags = ~other & ~undispatched & (rec.tags[rr] != tags)
    bad_time = ~other & ~undispatched & ~bad_tags & (times != rec.ts[rr]) if times is not None else None
    code[found & other] = _OTHER
    code[found & undispatched] = _NOT_DISPATCHED
    code[found & bad_tags] = _TAGS
    if bad_time is not None:
        code[found & bad_time] = _TIME
    return code, r, found


def _consume_queues(store, rec: Records, out: Problems, pending_from: int | None = None) -> int:
    cl = store.commitlog
    n_units = 0
    seen: dict[tuple[int, int], list] = {}   # (topic id, queue id) -> queue offsets with a unit
    ok = np.zeros(rec.n, dtype=np.uint8)     # records a unit of their own queue offset reached
    expired = None                           # units the queues' min offsets skip (below the commitlog's start)
    delay_levels: dict[int, int] = {}        # level -> the delay its units show, where not the configured one
    for (topic, qid), cq in store.queues.items():
        tid = rec.topic_ids.get(topic, -1)
        if cl.min_offset > 0 and (n := expired_units(cq)) is not None:
            expired = (expired or 0) + n
        if cq.lmq and cq.queue.files:
            lmq_files(cq, cl, out)
        delays = DelayLevel(qid, _TAGS) if topic == SCHEDULE_TOPIC else None
        for first, units, path in _unit_runs(cq):
            n = len(units)
            n_units += n
            if not n:
                continue
            names = units.dtype.names
            K = check_records._K
            if K is not None and len(names) == 3 and units.dtype.itemsize == CQ_UNIT_SIZE:  # the rules in C
                phy, size, tags, times = units[names[0]], units[names[1]], units[names[2]], None  # (for the words)
                code, r, found = np.empty(n, np.int8), np.empty(n, np.int64), np.empty(n, np.uint8)
                K.cq_units(np.ascontiguousarray(units).view(np.uint8).reshape(-1), first, tid, qid, cq.lmq, rec.off,
                           rec.topic, rec.qid, rec.qoff, rec.size, rec.tran, rec.tags, cl.min_offset, cl.max_offset,
                           code, r, found, ok)
                found = found.view(bool)
            else:
                phy = units[names[0]].astype(np.int64)
                size = units[names[1]].astype(np.int64)
                tags = units[names[2]].astype(np.int64)
                times = units[names[3]].astype(np.int64) if len(names) > 3 else None
                code, r, found = _unit_codes(rec, cl, tid, qid, cq.lmq, first + np.arange(n, dtype=np.int64), phy,
                                             size, tags, times)
            if found.any():
                seen.setdefault((tid, qid), []).append(first + np.flatnonzero(found))  # (ascending: files in order)
            if delays is not None:
                delays.count(found, code)
            bad = np.flatnonzero(code)
            if len(bad):
                word = _unit_word(rec, cl, cq, topic, qid, first, phy, size, tags, times, code, r, path)
                if delays is not None:
                    bad = delays.hold(bad, code, tags, r, rec, word)
                out.add_each(bad, word)
        if delays is not None:
            delays.settle(out, delay_levels)
    batch = store.batch_topics
    for p in unit_problems(store, cl.min_offset):  # 5.x BatchCQ units against their records
        out.add("batch-cq-unit", f"{p['topic']}/{p['queueId']} unit at base {p['queueOffset']}: {p['problem']}"
                + (f" (expected {p['expected']}, found {p['actual']})" if p.get("expected") else ""),
                store.root / p["file"], p["fileOffset"])
    _missing_units(store, rec, seen, ok, batch, out, pending_from)
    delay_note(store, delay_levels, out)
    if cl.min_offset > 0 and cl.files:
        out.note("expired", f"the commitlog begins at offset {cl.min_offset}, not 0: the files before it are gone, "
                 "as after the broker's cleanup (commitlog files older than fileReservedTime, 72 h by default, are "
                 "deleted)" + ("" if expired is None else
                               f"; the queues' {expired} unit(s) that point below it are expired: a reader skips them"),
                 cl.files[0].path, cl.min_offset)
    return n_units


def _unit_word(rec, cl, cq, topic, qid, first, phy, size, tags, times, code, r, path):
    def word(i):
        q = first + int(i)
        pos = q * CQ_UNIT_SIZE % cq.file_size if cq.file_size else q  # RocksDB: the queue offset
        c, p, s, t = int(code[i]), int(phy[i]), int(size[i]), int(tags[i])
        if c == _PAST:
            return "cq-unit", f"{topic}/{qid} unit {q} points at {p}, past the end of the commitlog " \
                f"({cl.max_offset})", path, pos
        if c == _NO_RECORD:
            return "cq-unit", f"{topic}/{qid} unit {q} points at {p}, where no record starts", path, pos
        m = rec.row(int(r[i]))
        if c == _LMQ:
            return "cq-unit", f"{topic}/{qid} unit {q} -> record {m[0]}/{m[1]}@{m[2]} size {m[3]} " \
                f"tagsCode {m[5]} (unit size {s}, tagsCode {t})", path, pos
        if c == _OTHER:
            return "cq-unit", f"{topic}/{qid} unit {q} -> record {m[0]}/{m[1]}@{m[2]} size {m[3]} " \
                f"(unit size {s})", path, pos
        if c == _NOT_DISPATCHED:
            return "cq-unit", f"{topic}/{qid} unit {q} -> a {'prepared' if m[4] == 4 else 'rolled-back'} " \
                "transaction record, which is never dispatched (its SYSFLAG?)", path, pos
        if c == _TAGS:
            return "cq-tags", f"{topic}/{qid} unit {q}: tagsCode {t}, expected {m[5]} from the record's " \
                "TAGS (delivery time for delayed messages)", path, pos
        return "cq-time", f"{topic}/{qid} unit {q}: storeTimestamp {int(times[i])}, the record says {m[6]}", path, pos
    return word


def _at_queue_tail(store, rec: Records, rows: np.ndarray) -> np.ndarray:
    """Which of `rows` a re-dispatch gives a unit: those at or past their queue's end. One
    below it (a CQ file missing in the middle) is skipped as "build consume queue repeatedly"
    (putMessagePositionInfo compares with the last file's end), so its gap stays."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    keys = (rec.topic[rows].astype(np.int64) << 32) | (rec.qid[rows].astype(np.int64) & 0xFFFFFFFF)
    uniq, inv = np.unique(keys, return_inverse=True)
    names = {v: k for k, v in rec.topic_ids.items()}
    ends = np.array([getattr(store.find_queue(names.get(int(k) >> 32), int(k) & 0xFFFFFFFF), "max_offset", 0)
                     for k in uniq], dtype=np.int64)
    return rec.qoff[rows] >= ends[inv]


def _missing_units(store, rec: Records, seen: dict, ok: np.ndarray, batch, out: Problems,
                   pending_from: int | None = None) -> None:
    """Every dispatchable record has its unit: a record is covered when a unit of its queue at
    its queue offset reached a record (RocketMQ's "seen"). `ok` has the records a unit reached
    directly; the others are looked up queue by queue in the units seen (as arrays)."""
    if not rec.n:
        return
    ok = ok.view(bool)
    todo = np.flatnonzero(~ok)
    group = (rec.topic[todo].astype(np.int64) << 32) | (rec.qid[todo].astype(np.int64) & 0xFFFFFFFF)
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    for (tid, qid), qs in seen.items():
        g = (tid << 32) | (qid & 0xFFFFFFFF)
        a, b = np.searchsorted(sorted_group, [g, g + 1])
        if a == b:
            continue
        rows = todo[order[a:b]]
        have = np.concatenate(qs)
        if len(have) > 1 and (have[1:] < have[:-1]).any():
            have = np.sort(have)
        i = np.minimum(np.searchsorted(have, rec.qoff[rows]), len(have) - 1)
        ok[rows[have[i] == rec.qoff[rows]]] = True
    need = ~ok & ((rec.tran == TRANSACTION_NOT_TYPE) | (rec.tran == TRANSACTION_COMMIT_TYPE))
    if batch:
        for t in batch:
            if t in rec.topic_ids:
                need &= rec.topic != rec.topic_ids[t]
    cl = store.commitlog
    if pending_from is not None:  # crash recovery re-dispatches these
        later = need & (rec.off >= pending_from)
        later[later] = _at_queue_tail(store, rec, np.flatnonzero(later))
        if later.any():
            i = int(np.flatnonzero(later)[0])
            out.pending("cq-behind", f"{int(later.sum())} records from commitlog offset {int(rec.off[i])} on have no "
                        "ConsumeQueue unit yet", cl.queue.find(int(rec.off[i])).path, int(rec.off[i]),
                        "re-dispatched into their queues by crash recovery")
            need &= ~later

    def word(i):
        topic, qid, qoff = rec.row(int(i))[:3]
        off = int(rec.off[i])
        path = cl.queue.find(off).path
        cq = store.find_queue(topic, qid)
        if cq is None:
            return "cq-missing", f"record {topic}/{qid}@{qoff}: no consume queue", path, off
        if qoff >= cq.min_offset:
            return "cq-missing", f"record {topic}/{qid}@{qoff} has no ConsumeQueue unit", path, off
        # RocketMQ deletes a CQ file only once every record it points at has left the commitlog
        return "cq-missing", f"record {topic}/{qid}@{qoff} is still in the commitlog but its queue starts at " \
            f"{cq.min_offset} (a ConsumeQueue file deleted?)", path, off
    out.add_each(np.flatnonzero(need), word)


# ---- checkpoint and config ------------------------------------------------------------------
def _checkpoint(store, last_ts: int, out: Problems, rec: Records | None = None,
                pending_from: int | None = None) -> None:
    cp = store.checkpoint
    path = store.root / "checkpoint"
    if not store.checkpoint_exists:   # no reader's answer depends on it: as for a zeroed one, a note
        if store.commitlog.files:
            out.note("checkpoint", "no checkpoint file beside a commitlog (a broker's start writes one of zeros; "
                     "a crash recovery then scans from the first commitlog file)", path, None)
        return
    # a checkpoint ahead of the data changes no answer a reader gets: after a crash recovery
    # rewrites it; after RocketMQ's own recovery physicMsgTimestamp stays where it was
    for name, value, pos in (("physicMsgTimestamp", cp.physicMsgTimestamp, 0),
                             ("logicsMsgTimestamp", cp.logicsMsgTimestamp, 8)):
        if last_ts and value > last_ts:
            what = f"{name} {value} is after the last record's store time {last_ts}"
            if store.abort_present:
                out.pending("checkpoint", what, path, pos, "crash recovery starts its scan from the checkpoint's "
                            "older timestamps; the checkpoint is rewritten at the clean shutdown")
            else:
                out.note("checkpoint", what + " (records were cut after it was written; no reader sees it)", path, pos)
    ends = [f.header.endTimestamp for f in store.index.files if f.header.indexCount > 1]
    if ends and cp.indexMsgTimestamp > max(ends):
        what = f"indexMsgTimestamp {cp.indexMsgTimestamp} is after the newest index entry ({max(ends)})"
        reindex = _reindexed(store, rec, pending_from)
        if reindex is not None and reindex[1] >= cp.indexMsgTimestamp:
            out.pending("checkpoint", what + ": the index is behind the commitlog", path, 16,
                        f"crash recovery re-indexes the records from commitlog offset {reindex[0]} on, stored "
                        f"up to {reindex[1]}: the index then reaches it")
        else:
            out.add("checkpoint", what + ": index files are missing", path, 16)


def _reindexed(store, rec: Records | None, pending_from: int | None) -> tuple[int, int] | None:
    """(commitlog offset, newest store time) of the records with keys crash recovery will
    add to the index (the index's own resume point on: the builder skips what it holds), or
    None when no recovery is pending or the index lacks none of them."""
    if pending_from is None or rec is None or not rec.n or not store.cfg.messageIndexEnable:
        return None
    begin = reindex_from(store, pending_from)
    rows = rec.key_rec
    rows = rows[(rec.off[rows] >= begin) & (rec.tran[rows] != TRANSACTION_ROLLBACK_TYPE)]
    if not len(rows):
        return None
    return int(rec.off[rows[0]]), int(rec.ts[rows].max())


def _regrown_ends(store, rec: Records | None, pending_from: int | None) -> dict[tuple[str, int], int]:
    """(topic, queue id) -> the queue's end once crash recovery has re-dispatched the records
    from `pending_from` on (the last one's queue offset + 1); empty when none is pending."""
    if pending_from is None or rec is None or not rec.n:
        return {}
    rows = np.flatnonzero((rec.off >= pending_from) & ((rec.tran == TRANSACTION_NOT_TYPE)
                                                       | (rec.tran == TRANSACTION_COMMIT_TYPE)))
    if not len(rows):
        return {}
    group = (rec.topic[rows].astype(np.int64) << 32) | (rec.qid[rows].astype(np.int64) & 0xFFFFFFFF)
    order = np.lexsort((rec.qoff[rows], group))
    group, qoff = group[order], rec.qoff[rows][order]
    last = np.flatnonzero(np.append(group[1:] != group[:-1], True))  # each queue's highest queue offset
    qids = rec.qid[rows][order][last].tolist()
    return {(rec.topics[g >> 32], qid): q + 1 for g, qid, q in zip(group[last].tolist(), qids, qoff[last].tolist())}


def _planned_cuts(store, out: Problems) -> None:
    """Consume-queue units past the commitlog's end and index files newer than the checkpoint:
    what crash recovery will drop (a read-only open already reads without them)."""
    p = store.recovery_plan
    if p is None:
        return
    for q in p.queue_cuts:
        cq = store.queues.get((q.topic, q.queue_id))
        where = cq.directory if cq is not None else store.root / "consumequeue"
        if not p.abnormal:  # after a clean shutdown: the records they name are gone
            out.add("cq-unit", f"{q.name}: {q.units_dropped} units from queue offset {q.max_offset} point past the "
                    f"commitlog's end ({p.end_offset}): their records are gone", where, q.max_offset * CQ_UNIT_SIZE)
            continue
        out.pending("cq-past-end", f"{q.name}: {q.units_dropped} units from queue offset {q.max_offset} point past the "
                    "commitlog's end", where, q.max_offset * CQ_UNIT_SIZE,
                    f"recovery drops them: max offset {q.max_offset_before} -> {q.max_offset}")
    if not p.abnormal:
        return
    for name in (p.index_files_deleted if store.commitlog.redispatches_after_crash else []):  # (dledger_check)
        out.pending("index-after-checkpoint", f"index file {name} is newer than the checkpoint's indexMsgTimestamp "
                    f"{p.checkpoint.get('indexMsgTimestamp')}", store.index.directory / name, None,
                    "crash recovery deletes it and re-indexes its records from the commitlog")


def _config_json(store, out: Problems, rec: Records | None = None, pending_from: int | None = None) -> None:
    cfg_dir = store.root / "config"
    try:
        offsets, table = store.consumer_offsets(), store.topic_config()
    except StoreError as e:  # a damaged config file is a problem to report, not a reason to stop
        out.add("config", e.message, e.path or cfg_dir, e.offset)
        return
    regrown = None
    for (topic, group, qid), off in sorted(offsets.items()):
        cq = store.find_queue(topic, qid)
        mx = cq.max_offset if cq else 0
        if off > mx and cq is not None:
            what = f"consumer group {group} is at offset {off} of {topic}/{qid}, past the queue's end ({mx})"
            if regrown is None:
                regrown = _regrown_ends(store, rec, pending_from)
            grows_to = regrown.get((topic, qid), mx) if not cq.lmq and topic not in store.batch_topics else mx
            if off <= grows_to:  # the broker keeps consumer offsets; the queue grows back under them
                out.pending("config", what, cfg_dir / "consumerOffset.json", None,
                            f"crash recovery re-dispatches the queue's records from the commitlog: its end "
                            f"grows back to {grows_to}")
            else:
                out.add("config", what, cfg_dir / "consumerOffset.json", None)
    for (topic, qid) in store.queues:
        tc = table.get(topic)
        if not isinstance(tc, dict):
            continue
        n = max(int(tc.get("readQueueNums") or 0), int(tc.get("writeQueueNums") or 0))
        if n and qid >= n:
            out.add("config", f"queue {topic}/{qid} exists but topics.json gives {topic} {n} queues",
                    cfg_dir / "topics.json", None)
