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
- the checkpoint against the data, consumerOffset.json and topics.json against the queues.

`check_task` is the work as an engine task (yields Progress as records are read, polls a
CancelToken, or anything with is_set, and stops with CheckCancelled); `check_store` runs it
for callers that want the answer, with the older `progress(done, total, phase)` callback."""
from __future__ import annotations

import numpy as np

from engine.format import properties as P
from engine.config import CQ_UNIT_SIZE, INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from engine.store.consume_queue import FILLER_SIZE
from engine.store.batch_consume_queue import unit_problems
from engine.errors import StoreError
from engine.store.index_file import time_diff
from engine.tasks import Cancelled, Progress, Task, run

from .chains import chain_cycles, valid_limit
from engine.format.javahash import index_key, index_key_hash
from engine.format.message import (TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE, RecordStatus,
                      body_crc, verify_prop_crc)

DISPATCHED = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


class CheckCancelled(Cancelled):
    """check was cancelled before it finished."""


class Problems:
    def __init__(self, limit: int):
        self.items: list[dict] = []
        self.limit = limit
        self.count = 0

    def add(self, kind: str, detail: str, file, offset) -> None:
        self.count += 1
        if len(self.items) < self.limit:
            self.items.append({"kind": kind, "detail": detail, "file": str(file), "offset": offset})


def check_store(store, max_problems: int = 1000, progress=None, cancel=None) -> dict:
    on_progress = None if progress is None else (lambda p: progress(p.done, p.total, p.phase))
    return run(check_task(store, max_problems, cancel), on_progress)


def check_task(store, max_problems: int = 1000, cancel=None) -> Task[dict]:
    """The whole check; Progress in commitlog bytes, then one per later phase."""
    out = Problems(max_problems)
    messages, n_messages, last_ts = yield from _commitlog(store, out, cancel)  # (DLedger: tail in dledger_check)
    _poll(store, cancel)
    extra = {}
    if getattr(store, "dledger", None) is not None:  # DLedger mode: the entries around the messages
        from .dledger_check import check_entries
        extra["dledgerEntries"] = check_entries(store, out)
    n_units = _consume_queues(store, messages, out)
    yield Progress(1, 3, "consume queues", "phases")
    _poll(store, cancel)
    n_entries = _index(store, messages, out)
    yield Progress(2, 3, "index", "phases")
    _checkpoint(store, last_ts, out)
    _config_json(store, out)
    yield Progress(3, 3, "checkpoint and config", "phases")
    return {"ok": not out.count, "messages": n_messages, "cqUnits": n_units, "indexEntries": n_entries,
            "crcRule": "body CRC and __CRC32# tails" if _verify_tails(store) else "body CRC (4.x: no __CRC32# tails)",
            "problemCount": out.count, "problems": out.items, **extra}


def _verify_tails(store) -> bool:
    """`__CRC32#` tails are checked unless a 4.x broker wrote the store: 4.9 neither writes nor
    strips the property, so there it is only a producer's property."""
    return store.generation().version != "4.x"


# ---- commitlog ------------------------------------------------------------------------------
def _poll(store, cancel) -> None:
    if cancel is not None and cancel.is_set():
        raise CheckCancelled("check cancelled", path=str(store.root))


def _commitlog(store, out: Problems, cancel):
    """Every record; returns {offset: (topic, qid, qoff, size, tranType, keys, tagsCode, storeTs)}."""
    cl = store.commitlog
    rec = store.recovery.commitlog
    last = cl.files[-1] if cl.files else None
    if last is not None and rec.end_offset < last.end_offset and getattr(store, "dledger", None) is None:
        f = cl.queue.find(rec.end_offset) or last
        pos = rec.end_offset - f.file_from_offset
        if pos < f.file_size and any(f.buf[pos:min(f.file_size, pos + 4096)]):
            out.add("commitlog-tail", f"data after the end of the valid log ({rec.stop_reason})", f.path,
                    rec.end_offset)
    if store.abort_present:
        out.add("abort", "abort file present: the store was not shut down cleanly", store.root / "abort", None)
    for a, b in cl.queue.gaps:
        out.add("commitlog-gap", f"files missing between {a} and {b}", cl.queue.dirs[0], a)
    for why in store.refused_files:
        out.add("file", f"passed over: {why}", store.root, None)
    messages: dict[int, tuple] = {}
    crc_tails: dict = {}  # file -> [records whose __CRC32# checks out, offsets of records without one]
    tails_rule = _verify_tails(store)
    last_ts = 0
    total = max(1, cl.max_offset - cl.min_offset)
    step = max(1 << 16, total // 200)
    next_report = cl.min_offset
    for off, r in cl.walk():
        if off >= next_report:
            _poll(store, cancel)
            yield Progress(off - cl.min_offset, total, "commitlog", "bytes")
            next_report = off + step
        if r.status is RecordStatus.MESSAGE:
            m = r.message
            f = cl.queue.find(off)
            tt = m.sysFlag & 0x0C
            messages[off] = (m.topic, m.queueId, m.queueOffset, m.storeSize, tt,
                             [m.uniqKey] * bool(m.uniqKey) + m.key_list, m.tagsCode, m.storeTimestamp)
            last_ts = max(last_ts, m.storeTimestamp)
            if m.physicalOffsetField != off:
                out.add("commitlog-record", f"stored PHYSICALOFFSET {m.physicalOffsetField}, expected {off}", f.path, off)
            if m.sysFlag & 0x700 and not m.sysFlag & 0x1:
                out.add("commitlog-record", f"SYSFLAG {m.sysFlag:#x} names a compression type for a body that is not "
                        "compressed", f.path, off)
            if m.sysFlag & 0xC0 and "INNER_NUM" not in m.properties:
                out.add("commitlog-record", f"SYSFLAG {m.sysFlag:#x} marks an inner batch, but the record has no "
                        "INNER_NUM property", f.path, off)
            if body_crc(m.body) != m.bodyCRC:  # recovery checks CRCs in the last files only; empty = 0
                out.add("commitlog-crc", f"body CRC {body_crc(m.body)} != stored {m.bodyCRC}", f.path, off)
            if not tails_rule:
                continue
            tails = crc_tails.setdefault(f.path, [0, []])
            if verify_prop_crc(f.buf, off - f.file_from_offset, m.storeSize):
                tails[0] += 1
            elif P.CRC32_PROP in m.propertiesRaw:
                out.add("commitlog-crc", "whole-record __CRC32# does not match the record's bytes", f.path, off)
            elif len(tails[1]) < 1000:
                tails[1].append(off)
        elif r.status is not RecordStatus.END_OF_FILE:
            out.add("commitlog-record", f"{r.status.value}: {r.reason}", cl.queue.find(off).path, off)
    for path, (good, without) in crc_tails.items():
        # records of a file written with enabledAppendPropCRC all end in a __CRC32# tail: one
        # without it had its tail (or the properties before it) damaged
        if good and good >= 4 * len(without):
            for off in without:
                out.add("commitlog-crc", "no valid __CRC32# tail, unlike the other records of its file (the "
                        "properties or the CRC were damaged)", path, off)
    yield Progress(total, total, "commitlog", "bytes")
    return messages, len(messages), last_ts


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


def _consume_queues(store, messages: dict, out: Problems) -> int:
    cl = store.commitlog
    n_units = 0
    seen = set()
    for (topic, qid), cq in store.queues.items():
        lmq = cq.lmq  # 5.x LMQ: units of other topics' records (their queue offsets are the real topic's)
        for first, units, path in _unit_runs(cq):
            n_units += len(units)
            for i, (phy, size, tags, *t) in enumerate(units.tolist()):
                q = first + i
                pos = q * CQ_UNIT_SIZE % cq.file_size if cq.file_size else q  # RocksDB: the queue offset
                if phy == 0 and size == FILLER_SIZE:
                    continue
                m = messages.get(phy)
                if m is None:
                    if phy >= cl.max_offset:
                        out.add("cq-unit", f"{topic}/{qid} unit {q} points at {phy}, past the end of the commitlog "
                                f"({cl.max_offset})", path, pos)
                    elif phy >= cl.min_offset:
                        out.add("cq-unit", f"{topic}/{qid} unit {q} points at {phy}, where no record starts",
                                path, pos)
                    continue
                if lmq:
                    if (m[3], m[6]) != (size, tags):
                        out.add("cq-unit", f"{topic}/{qid} unit {q} -> record {m[0]}/{m[1]}@{m[2]} size {m[3]} "
                                f"tagsCode {m[6]} (unit size {size}, tagsCode {tags})", path, pos)
                    continue
                if (m[0], m[1], m[2], m[3]) != (topic, qid, q, size):
                    out.add("cq-unit", f"{topic}/{qid} unit {q} -> record {m[0]}/{m[1]}@{m[2]} size {m[3]} "
                            f"(unit size {size})", path, pos)
                elif m[4] not in DISPATCHED:
                    out.add("cq-unit", f"{topic}/{qid} unit {q} -> a {'prepared' if m[4] == 4 else 'rolled-back'} "
                            "transaction record, which is never dispatched (its SYSFLAG?)", path, pos)
                elif m[6] != tags:
                    out.add("cq-tags", f"{topic}/{qid} unit {q}: tagsCode {tags}, expected {m[6]} from the record's "
                            "TAGS (delivery time for delayed messages)", path, pos)
                elif t and t[0] != m[7]:
                    out.add("cq-time", f"{topic}/{qid} unit {q}: storeTimestamp {t[0]}, the record says {m[7]}",
                            path, pos)
                seen.add((topic, qid, q))
    batch = store.batch_topics
    for p in unit_problems(store, cl.min_offset):  # 5.x BatchCQ units against their records
        out.add("batch-cq-unit", f"{p['topic']}/{p['queueId']} unit at base {p['queueOffset']}: {p['problem']}"
                + (f" (expected {p['expected']}, found {p['actual']})" if p.get("expected") else ""),
                store.root / p["file"], p["fileOffset"])
    for off, m in messages.items():
        topic, qid, qoff, _size, tt = m[:5]
        if tt not in DISPATCHED or (topic, qid, qoff) in seen or (batch and topic in batch):
            continue
        cq = store.find_queue(topic, qid)
        if cq is None:
            out.add("cq-missing", f"record {topic}/{qid}@{qoff}: no consume queue", cl.queue.find(off).path, off)
        elif qoff >= cq.min_offset:
            out.add("cq-missing", f"record {topic}/{qid}@{qoff} has no ConsumeQueue unit", cl.queue.find(off).path, off)
        else:  # RocketMQ deletes a CQ file only once every record it points at has left the commitlog
            out.add("cq-missing", f"record {topic}/{qid}@{qoff} is still in the commitlog but its queue starts at "
                    f"{cq.min_offset} (a ConsumeQueue file deleted?)", cl.queue.find(off).path, off)
    return n_units


# ---- index ----------------------------------------------------------------------------------
def _index(store, messages: dict, out: Problems) -> int:
    cl = store.commitlog
    files = store.index.files
    n_entries = 0
    actual: set[tuple[int, int]] = set()
    for w in store.index.warnings:
        out.add("index-file", w, store.index.directory, None)
    for a, b in zip(files, files[1:]):
        ha, hb = a.header, b.header
        # (a begin of 0 is a header whose begin was never written: nothing reads it)
        if hb.indexCount > 1 and ha.indexCount > 1 and 0 < hb.beginPhyOffset < ha.endPhyOffset:
            out.add("index-file", f"{b.name} begins at commitlog offset {hb.beginPhyOffset}, before {a.name} ends "
                    f"({ha.endPhyOffset}): overlapping index files", b.path, 16)
    for f in files:
        count = f.header.indexCount
        if count > f.index_num:
            out.add("index-header", f"indexCount {count} is beyond the file's {f.index_num} entries", f.path, 36)
            count = f.index_num
        e = f.entries[1:count]
        n_entries += len(e)
        hashes = e["keyHash"].astype(np.int64)
        phys = e["commitLogOffset"].astype(np.int64)
        actual.update(zip(hashes.tolist(), phys.tolist()))
        _chains(f, count, hashes, e, out)
        _header_against_entries(f, count, phys, messages, out)
        base = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * f.slot_num
        begin = f.header.beginTimestamp
        diffs = e["timeDiff"].tolist()
        for i, (h, phy) in enumerate(zip(hashes.tolist(), phys.tolist()), start=1):
            m = messages.get(phy)
            pos = base + INDEX_ENTRY_SIZE * i
            if m is None:
                if cl.min_offset <= phy < cl.max_offset:
                    out.add("index-entry", f"entry {i} points at {phy}, where no record starts", f.path, pos)
                continue
            if i > 1 and diffs[i - 1] != time_diff(m[7], begin):  # entry 1 is relative to the inherited begin
                out.add("index-entry", f"entry {i} timeDiff {diffs[i - 1]}, expected {time_diff(m[7], begin)} "
                        "from its record's store time (time-window queries miss it)", f.path, pos + 12)
            if m[4] == TRANSACTION_ROLLBACK_TYPE or h not in {index_key_hash(index_key(m[0], k)) for k in m[5]}:
                out.add("index-entry", f"entry {i} hash {h} matches no key of the record at {phy}", f.path, pos)
    _index_completeness(store, messages, actual, out)
    return n_entries


def _chains(f, count: int, hashes: np.ndarray, e, out: Problems) -> None:
    """Links, slot membership and time order of one file's chains, vectorized over entries."""
    n = len(hashes)
    s = f.slot_num
    base = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * s
    idx = np.arange(1, n + 1)
    prev = e["prevIndex"].astype(np.int64)
    bad = (prev < 0) | (prev >= idx)
    for i in np.flatnonzero(bad)[:20].tolist():
        out.add("index-chain", f"entry {i + 1} links to entry {int(prev[i])}: not an older entry (a cycle or damage)",
                f.path, base + INDEX_ENTRY_SIZE * (i + 1) + 16)
    _cycles(f, out)
    slots = f.slots.astype(np.int64)
    over = np.flatnonzero((slots < 0) | (slots >= max(count, 1)))
    for j in over[:20].tolist():
        out.add("index-slot", f"slot {j} names entry {int(slots[j])}, beyond the entries (indexCount {count})",
                f.path, INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * j)
    if (hashes < 0).any():
        for i in np.flatnonzero(hashes < 0)[:20].tolist():
            out.add("index-entry", f"entry {i + 1} has a negative key hash", f.path, base + INDEX_ENTRY_SIZE * (i + 1))
    slot_of = np.concatenate([[-1], hashes % s])          # slot_of[k] for entry number k
    times = np.concatenate([[0], e["timeDiff"].astype(np.int64)])
    linked = np.flatnonzero((prev > 0) & ~bad)
    p = prev[linked]
    wrong = linked[slot_of[p] != slot_of[linked + 1]]
    for i in wrong[:20].tolist():
        out.add("index-chain", f"entry {int(prev[i])} in the chain of slot {int(slot_of[i + 1])} hashes to slot "
                f"{int(slot_of[prev[i]])}", f.path, base + INDEX_ENTRY_SIZE * (i + 1) + 16)
    later = linked[(times[p] > times[linked + 1]) & (p > 1)]  # entry 1's timeDiff has RocketMQ's quirk (§9.4)
    for i in later[:20].tolist():
        out.add("index-time", f"entry {i + 1} links to entry {int(prev[i])}, which is newer "
                f"(timeDiff {int(times[prev[i]])} > {int(times[i + 1])})", f.path, base + INDEX_ENTRY_SIZE * (i + 1))
    heads = np.flatnonzero((slots > 0) & (slots < max(count, 1)))
    reached = np.zeros(n + 1, dtype=bool)   # a key can be found only through its slot's chain
    reached[slots[heads]] = True
    reached[prev[linked]] = True
    for k in np.flatnonzero(~reached[1:])[:20].tolist():
        out.add("index-chain", f"entry {k + 1} is unreachable: neither its slot nor a newer entry links to it "
                "(its key cannot be found)", f.path, base + INDEX_ENTRY_SIZE * (k + 1))
    misplaced = heads[slot_of[slots[heads]] != heads]
    for j in misplaced[:20].tolist():
        out.add("index-slot", f"slot {j} names entry {int(slots[j])}, whose key hashes to slot "
                f"{int(slot_of[slots[j]])}", f.path, INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * j)


def _cycles(f, out: Problems) -> None:
    """Every prevIndex cycle once, at the link that closes it, with the slots whose chains run
    into it (select() would walk those until its step limit)."""
    cycles = chain_cycles(f)
    if not cycles:
        return
    L = valid_limit(f)
    prev = f.entries["prevIndex"][:L + 1].astype(np.int32)
    jump = np.where((prev > 0) & (prev <= L), prev, 0).astype(np.int32)
    jump[0] = 0
    for _ in range(int(L).bit_length() + 1):     # 2^k steps ahead: past L steps, a walk is in its cycle
        jump = jump[jump]
    member = np.full(L + 1, -1, dtype=np.int32)
    for i, cyc in enumerate(cycles):
        member[cyc] = i
    heads = f.slots.astype(np.int64)
    live = np.flatnonzero((heads > 0) & (heads <= L))
    into = member[jump[heads[live]]]
    base = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * f.slot_num
    for i, cyc in enumerate(cycles[:20]):
        slots = live[into == i].tolist()
        named = ", ".join(map(str, slots[:5])) + (f" and {len(slots) - 5} more" if len(slots) > 5 else "")
        walk = " -> ".join(map(str, cyc[:8])) + (" -> ..." if len(cyc) > 8 else "")
        out.add("index-cycle", f"entries {walk} -> {cyc[0]} form a prevIndex cycle of {len(cyc)}: "
                + (f"a query by a key of slot {named} loops until its step limit" if slots
                   else "no slot's chain reaches it"), f.path, base + INDEX_ENTRY_SIZE * cyc[-1] + 16)


def _header_against_entries(f, count: int, phys: np.ndarray, messages: dict, out: Problems) -> None:
    """The header's begin/end offsets and times are those of the first and last entries'
    records (putKey sets them; queries pick files and compute entry times from them)."""
    if count <= 1:
        return
    h = f.header
    first, last = messages.get(int(phys[0])), messages.get(int(phys[-1]))
    want = [("beginPhyOffset", 16, int(phys[0]), True), ("endPhyOffset", 24, int(phys[-1]), True),
            ("beginTimestamp", 0, first[7] if first else None, first is not None),
            ("endTimestamp", 8, last[7] if last else None, last is not None)]
    for name, pos, expected, known in want:
        if known and getattr(h, name) != expected:
            out.add("index-header", f"{name} {getattr(h, name)}, expected {expected} from the file's "
                    f"{'first' if name.startswith('begin') else 'last'} entry", f.path, pos)


def _index_completeness(store, messages: dict, actual: set, out: Problems) -> None:
    """Every key RocketMQ indexes (UNIQ_KEY, each KEYS token; not ROLLBACK records) of every
    record from the first index file's first entry to the last file's end has its entry.
    After a clean shutdown every dispatched record is indexed, so the range runs to the log's end."""
    if not store.cfg.messageIndexEnable or not store.index.files:
        return
    used = [f for f in store.index.files if f.header.indexCount > 1]
    if not used:
        return
    lo = min(f.header.beginPhyOffset for f in used)
    hi = max(f.header.endPhyOffset for f in used)
    if not store.abort_present:
        hi = max(hi, store.commitlog.max_offset)
    cl = store.commitlog
    missing = 0
    for off, m in messages.items():
        if not lo <= off <= hi or m[4] == TRANSACTION_ROLLBACK_TYPE:
            continue
        for k in m[5]:
            if k and (index_key_hash(index_key(m[0], k)), off) not in actual:
                missing += 1
                if missing <= 100:
                    out.add("index-missing", f"key {k!r} of record {m[0]}/{m[1]}@{m[2]} has no index entry "
                            "(a query by it cannot find the message)", cl.queue.find(off).path, off)
                else:
                    out.count += 1


# ---- checkpoint and config ------------------------------------------------------------------
def _checkpoint(store, last_ts: int, out: Problems) -> None:
    cp = store.checkpoint
    path = store.root / "checkpoint"
    if not store.checkpoint_exists:
        if store.commitlog.files:
            out.add("checkpoint", "no checkpoint file beside a commitlog", path, None)
        return
    if last_ts and cp.physicMsgTimestamp > last_ts:
        out.add("checkpoint", f"physicMsgTimestamp {cp.physicMsgTimestamp} is after the last record's store time "
                f"{last_ts}: records the checkpoint vouches for are gone", path, 0)
    if last_ts and cp.logicsMsgTimestamp > last_ts:
        out.add("checkpoint", f"logicsMsgTimestamp {cp.logicsMsgTimestamp} is after the last record's store time "
                f"{last_ts}", path, 8)
    ends = [f.header.endTimestamp for f in store.index.files if f.header.indexCount > 1]
    if ends and cp.indexMsgTimestamp > max(ends):
        out.add("checkpoint", f"indexMsgTimestamp {cp.indexMsgTimestamp} is after the newest index entry "
                f"({max(ends)}): index files are missing", path, 16)


def _config_json(store, out: Problems) -> None:
    cfg_dir = store.root / "config"
    try:
        offsets, table = store.consumer_offsets(), store.topic_config()
    except StoreError as e:  # a damaged config file is a problem to report, not a reason to stop
        out.add("config", e.message, e.path or cfg_dir, e.offset)
        return
    for (topic, group, qid), off in sorted(offsets.items()):
        cq = store.find_queue(topic, qid)
        mx = cq.max_offset if cq else 0
        if off > mx and cq is not None:
            out.add("config", f"consumer group {group} is at offset {off} of {topic}/{qid}, past the queue's end "
                    f"({mx})", cfg_dir / "consumerOffset.json", None)
    for (topic, qid) in store.queues:
        tc = table.get(topic)
        if not isinstance(tc, dict):
            continue
        n = max(int(tc.get("readQueueNums") or 0), int(tc.get("writeQueueNums") or 0))
        if n and qid >= n:
            out.add("config", f"queue {topic}/{qid} exists but topics.json gives {topic} {n} queues",
                    cfg_dir / "topics.json", None)
