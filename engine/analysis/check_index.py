"""check's index phase: every entry against the record it names, the chains of each file, the
headers, and every indexable key of the indexed range against the entries -- vectorized over
the entries and the commitlog's columns (engine.analysis.check_records.Records)."""
from __future__ import annotations

import numpy as np

from engine.config import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE
from engine.format.index_layout import NO_SLOT, slot_of as _slot_of, slots_of
from engine.format.message import TRANSACTION_ROLLBACK_TYPE
from engine.store.index_file import IndexHeader

from engine import accel

from .chains import chain_cycles, valid_limit
from .check_records import record_keys

_K = accel.load("_check")


def time_diffs(store_ts: np.ndarray, begin_ts: int) -> np.ndarray:
    """engine.store.index_file.time_diff over arrays."""
    d = store_ts - begin_ts
    q = np.where(d >= 0, d // 1000, -((-d) // 1000))
    if begin_ts <= 0:
        return np.zeros_like(q)
    return np.where(q < 0, 0, np.minimum(q, 0x7FFFFFFF))


def _pairs(rows: np.ndarray, hashes: np.ndarray) -> np.ndarray:
    """(row, key hash) as one int64 (hashes as their 32 bits: a negative one matches no key)."""
    return (rows.astype(np.int64) << 32) | (hashes.astype(np.int64) & 0xFFFFFFFF)


def _member(needles: np.ndarray, sorted_hay: np.ndarray) -> np.ndarray:
    if not len(sorted_hay):
        return np.zeros(len(needles), dtype=bool)
    i = np.minimum(np.searchsorted(sorted_hay, needles), len(sorted_hay) - 1)
    return sorted_hay[i] == needles


def _used(f) -> int:
    """The entries the check reads of an index file: indexCount, at most the file's."""
    return min(f.header.indexCount, f.index_num)


def chain_findings(store) -> dict:
    """The chains kernel's findings per index file (path -> (found, counts); counts None: the
    numpy twin decides): they need no record, so they can run beside the commitlog walk."""
    res = {}
    if _K is None:
        return res
    for f in store.index.files:
        count = _used(f)
        found = np.empty((7, 20), dtype=np.int64)
        e = f.entries[1:count]
        res[f.path] = found, _K.chains(np.ascontiguousarray(e).view(np.uint8).reshape(-1), f.slots.view(np.uint8),
                                       count, f.slot_num, found)
    return res


def index_phase(store, rec, out, chains: dict | None = None, redispatch_from: int | None = None) -> int:
    cl = store.commitlog
    files = store.index.files
    n_entries = 0
    key_start = np.zeros(rec.n + 1, dtype=np.int64)
    if _K is not None:
        _K.key_starts(rec.key_rec, key_start)
    else:
        np.cumsum(np.bincount(rec.key_rec, minlength=rec.n), out=key_start[1:])
    key_found = np.zeros(len(rec.key_rec), dtype=np.uint8)   # keys with an entry (hash and offset)
    keys = None if _K is not None else np.sort(_pairs(rec.key_rec, rec.key_hash))
    _refused_files(store, out, redispatch_from is not None)
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
        _past_the_end(store, f, e, out, redispatch_from is not None)
        _chains(f, count, e, out, (chains or {}).get(f.path))
        if _K is not None:
            rows = np.empty(len(e), dtype=np.int64)
            bad = np.zeros(len(e), dtype=np.uint8)
            _K.index_entries(np.ascontiguousarray(e).view(np.uint8).reshape(-1), rec.off, rec.ts, rec.tran,
                             key_start, rec.key_hash, key_found, f.header.beginTimestamp, cl.min_offset,
                             cl.max_offset, rows, bad)
        else:
            rows, bad = _match(f, cl, rec, e, e["keyHash"].astype(np.int64), keys, key_start, key_found)
        if len(e):
            _header_against_entries(f, count, int(e["commitLogOffset"][0]), int(e["commitLogOffset"][-1]),
                                    rows, rec, out)
        _entry_problems(f, rec, e, rows, bad, out)
    _completeness(store, rec, key_found, out, redispatch_from)
    return n_entries


NO_RECORD, BAD_TIME, BAD_HASH = 1, 2, 4   # engine.accel._check's bits


def _match(f, cl, rec, e, hashes, keys, key_start, key_found):
    """The pure-Python twin of engine.accel._check.index_entries (rows, bad bits; key_found)."""
    n = len(e)
    phys = e["commitLogOffset"].astype(np.int64)
    rows = rec.find(phys)
    found = rows >= 0
    r = np.where(found, rows, 0)
    bad = np.zeros(n, dtype=np.uint8)
    if not n:
        return rows, bad
    bad[~found & (phys >= cl.min_offset) & (phys < cl.max_offset)] = NO_RECORD
    if not rec.n:
        return rows, bad
    want = time_diffs(rec.ts[r], f.header.beginTimestamp)
    idx = np.arange(1, n + 1)
    bad[found & (idx > 1) & (e["timeDiff"].astype(np.int64) != want)] |= BAD_TIME  # entry 1: the inherited begin
    pairs = _pairs(r, hashes)
    bad[found & ((rec.tran[r] == TRANSACTION_ROLLBACK_TYPE) | ~_member(pairs, keys))] |= BAD_HASH
    if len(key_found):
        key_found |= _member(_pairs(rec.key_rec, rec.key_hash), np.sort(pairs[found])).astype(np.uint8)
    return rows, bad


def _entry_problems(f, rec, e, rows, bad, out) -> None:
    """Each entry i (1-based): a record starts at its offset, its timeDiff is its record's, its
    hash is one of its record's keys' -- in entry order, an entry's timeDiff before its hash."""
    hit = np.flatnonzero(bad)
    if not len(hit):
        return
    base = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * f.slot_num
    b = bad[hit]
    code = np.stack([b & NO_RECORD, b & BAD_TIME, b & BAD_HASH]).T != 0
    ent, which = np.nonzero(code)
    events = list(zip(hit[ent].tolist(), which.tolist()))
    begin = f.header.beginTimestamp

    def word(ev):
        j, which = ev
        phy, pos = int(e["commitLogOffset"][j]), base + INDEX_ENTRY_SIZE * (j + 1)
        if which == 0:
            return "index-entry", f"entry {j + 1} points at {phy}, where no record starts", f.path, pos
        if which == 1:
            want = int(time_diffs(rec.ts[rows[j]:rows[j] + 1], begin)[0])
            return ("index-entry", f"entry {j + 1} timeDiff {int(e['timeDiff'][j])}, expected {want} from its "
                    "record's store time (time-window queries miss it)", f.path, pos + 12)
        return ("index-entry", f"entry {j + 1} hash {int(e['keyHash'][j])} matches no key of the record at {phy}",
                f.path, pos)
    out.add_each(events, word)


def _chains(f, count: int, e, out, pre=None) -> None:
    """Links, slot membership and time order of one file's chains: in one pass in C
    (engine.accel._check.chains; `pre` its findings from chain_findings), or vectorized over
    the entries (the twin)."""
    if _K is not None:
        if pre is None:
            found = np.empty((7, 20), dtype=np.int64)
            pre = found, _K.chains(np.ascontiguousarray(e).view(np.uint8).reshape(-1), f.slots.view(np.uint8), count,
                                   f.slot_num, found)
        found, counts = pre
        if counts is not None:
            _chain_words(f, count, e, [found[k, :c].tolist() for k, c in enumerate(counts)], out)
            return
    _chains_numpy(f, count, e["keyHash"].astype(np.int64), e, out)


def _chain_words(f, count: int, e, found: list[list[int]], out) -> None:
    """The kernel's findings, worded and ordered as _chains_numpy words them."""
    s = f.slot_num
    base = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * s
    bad, over, neg, wrong, later, unreachable, misplaced = found
    prev = e["prevIndex"]

    def slot_of(k: int) -> int:
        return _slot_of(int(e["keyHash"][k - 1]), s)

    for i in bad:
        out.add("index-chain", f"entry {i + 1} links to entry {int(prev[i])}: not an older entry (a cycle or damage)",
                f.path, base + INDEX_ENTRY_SIZE * (i + 1) + 16)
    if bad or _may_close_cycle(f, count):   # a cycle needs a link to an entry not older than its own
        _cycles(f, out)
    for j in over:
        out.add("index-slot", f"slot {j} names entry {int(f.slots[j])}, beyond the entries (indexCount {count})",
                f.path, INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * j)
    for i in neg:
        out.add("index-entry", f"entry {i + 1} has a negative key hash", f.path, base + INDEX_ENTRY_SIZE * (i + 1))
    for i in wrong:
        p = int(prev[i])
        out.add("index-chain", f"entry {p} in the chain of {_slot_word(slot_of(i + 1))} hashes to "
                f"{_slot_word(slot_of(p))}",
                f.path, base + INDEX_ENTRY_SIZE * (i + 1) + 16)
    for i in later:
        p = int(prev[i])
        out.add("index-time", f"entry {i + 1} links to entry {p}, which is newer "
                f"(timeDiff {int(e['timeDiff'][p - 1])} > {int(e['timeDiff'][i])})", f.path,
                base + INDEX_ENTRY_SIZE * (i + 1))
    for k in unreachable:
        out.add("index-chain", f"entry {k + 1} is unreachable: neither its slot nor a newer entry links to it "
                "(its key cannot be found)", f.path, base + INDEX_ENTRY_SIZE * (k + 1))
    for j in misplaced:
        v = int(f.slots[j])
        out.add("index-slot", f"slot {j} names entry {v}, whose key hashes to {_slot_word(slot_of(v))}", f.path,
                INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * j)


def _slot_word(slot: int) -> str:
    """'slot 5', or what a negative keyHash means (index_layout.slot_of: no slot)."""
    return "no slot (a negative key hash)" if slot == NO_SLOT else f"slot {slot}"


def _may_close_cycle(f, count: int) -> bool:
    """Whether entry `count` (one past those the kernel read, but still in chain_cycles' range
    when indexCount < maxIndexNum) links to itself: the kernel saw the entries before it."""
    L = valid_limit(f)
    return L >= count and count < len(f.entries) and int(f.entries["prevIndex"][count]) == count


def _chains_numpy(f, count: int, hashes: np.ndarray, e, out) -> None:
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
    slots = f.slots.astype(np.int32)       # (native order: the slot table is read once)
    nz = np.flatnonzero(slots)             # most slots of a big file are empty
    sv = slots[nz].astype(np.int64)
    over = nz[(sv < 0) | (sv >= max(count, 1))]
    for j in over[:20].tolist():
        out.add("index-slot", f"slot {j} names entry {int(slots[j])}, beyond the entries (indexCount {count})",
                f.path, INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * j)
    if (hashes < 0).any():
        for i in np.flatnonzero(hashes < 0)[:20].tolist():
            out.add("index-entry", f"entry {i + 1} has a negative key hash", f.path, base + INDEX_ENTRY_SIZE * (i + 1))
    slot_of = np.concatenate([[NO_SLOT], slots_of(hashes, s)])   # slot_of[k] for entry number k
    times = np.concatenate([[0], e["timeDiff"].astype(np.int64)])
    linked = np.flatnonzero((prev > 0) & ~bad)
    p = prev[linked]
    wrong = linked[slot_of[p] != slot_of[linked + 1]]
    for i in wrong[:20].tolist():
        out.add("index-chain", f"entry {int(prev[i])} in the chain of {_slot_word(int(slot_of[i + 1]))} hashes to "
                f"{_slot_word(int(slot_of[prev[i]]))}", f.path, base + INDEX_ENTRY_SIZE * (i + 1) + 16)
    later = linked[(times[p] > times[linked + 1]) & (p > 1)]  # entry 1's timeDiff has RocketMQ's quirk (§9.4)
    for i in later[:20].tolist():
        out.add("index-time", f"entry {i + 1} links to entry {int(prev[i])}, which is newer "
                f"(timeDiff {int(times[prev[i]])} > {int(times[i + 1])})", f.path, base + INDEX_ENTRY_SIZE * (i + 1))
    heads = nz[(sv > 0) & (sv < max(count, 1))]
    reached = np.zeros(n + 1, dtype=bool)   # a key can be found only through its slot's chain
    reached[slots[heads]] = True
    reached[prev[linked]] = True
    for k in np.flatnonzero(~reached[1:])[:20].tolist():
        out.add("index-chain", f"entry {k + 1} is unreachable: neither its slot nor a newer entry links to it "
                "(its key cannot be found)", f.path, base + INDEX_ENTRY_SIZE * (k + 1))
    misplaced = heads[slot_of[slots[heads]] != heads]
    for j in misplaced[:20].tolist():
        out.add("index-slot", f"slot {j} names entry {int(slots[j])}, whose key hashes to "
                f"{_slot_word(int(slot_of[slots[j]]))}", f.path, INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * j)


def _cycles(f, out) -> None:
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


def _header_against_entries(f, count: int, first_phy: int, last_phy: int, rows, rec, out) -> None:
    """The header's begin/end offsets and times are those of the first and last entries'
    records (putKey sets them; queries pick files and compute entry times from them)."""
    if count <= 1:
        return
    h = f.header
    first = int(rec.ts[rows[0]]) if rows[0] >= 0 else None
    last = int(rec.ts[rows[-1]]) if rows[-1] >= 0 else None
    want = [("beginPhyOffset", 16, first_phy, True), ("endPhyOffset", 24, last_phy, True),
            ("beginTimestamp", 0, first, first is not None), ("endTimestamp", 8, last, last is not None)]
    for name, pos, expected, known in want:
        if known and getattr(h, name) != expected:
            out.add("index-header", f"{name} {getattr(h, name)}, expected {expected} from the file's "
                    f"{'first' if name.startswith('begin') else 'last'} entry", f.path, pos)


def _refused_files(store, out, crashed: bool) -> None:
    """The index files the load passed over (a wrong size: IndexService.refused). After a crash
    RocketMQ's IndexService.load(false) maps each one anyway (the map gives a short file its
    full size) and deletes it when its header's endTimestamp is past the checkpoint's
    indexMsgTimestamp; the crash recovery then re-indexes its records: recovery pending. Any
    other (an older file, which the broker keeps with a zero tail; no whole header; a clean
    shutdown) has lost its entries: a problem."""
    index = store.index
    ts = store.checkpoint.indexMsgTimestamp
    extended = {p.name for p, _, why in index.short() if not why} if index.refused else set()
    for path, why in index.refused:
        h = IndexHeader.read_path(path, as_found=True) if crashed else None
        if h is None or h.endTimestamp <= ts:
            fate = ("; a read-write open extends it with zeros and keeps it, as RocketMQ does: the entries past its "
                    "end stay lost") if path.name in extended else ""
            out.add("index-file", f"skipped index file: {why}{fate}", index.directory, None)
            continue
        out.pending("index-after-checkpoint", f"index file {path.name} is newer than the checkpoint's "
                    f"indexMsgTimestamp {ts} (its header's endTimestamp is {h.endTimestamp}); its entries are not "
                    f"read: {why}", path, 8,
                    "RocketMQ's crash recovery deletes it and re-indexes its records from the commitlog " +
                    ("(rmqstore's read-write open too, once it has extended the file to its size)"
                     if path.name in extended else "(rmqstore's read-write open refuses an index file of this size)"))


def _past_the_end(store, f, e, out, crashed: bool) -> None:
    """Entries naming records past the commitlog's end: a crash's leftovers (the records were
    torn off) when recovery is pending, damage after a clean shutdown. Exact queries skip
    them; raw ones return them."""
    end = store.commitlog.max_offset
    past = np.flatnonzero(e["commitLogOffset"] >= end) if len(e) else ()
    if not len(past):
        return
    pos = INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * f.slot_num + INDEX_ENTRY_SIZE * (int(past[0]) + 1)
    what = f"{len(past)} entries (from entry {int(past[0]) + 1}) name records past the commitlog's end ({end})"
    if not crashed:
        out.add("index-entry", what + ": their records are gone (raw key queries return them)", f.path, pos)
        return
    plan = store.recovery_plan
    if plan is not None and f.name in plan.index_files_deleted:
        fate = "the file is newer than the checkpoint's indexMsgTimestamp: recovery deletes it and re-indexes"
    elif plan is not None and plan.index_end_clamp is not None and plan.index_end_clamp[0] == f.name:
        fate = f"recovery lowers the file's endPhyOffset to {plan.index_end_clamp[2]}; exact queries skip them"
    else:
        fate = "they stay, as RocketMQ leaves them; exact queries skip them"
    out.pending("index-past-end", what + " (a torn tail)", f.path, pos, fate)


def _missing_keys(rec, key_found: np.ndarray, lo: int, hi: int, room: int) -> tuple[int, np.ndarray]:
    """Keys of the records in [lo, hi] (not ROLLBACK) without an entry: how many, and the
    first `room` of them (key indexes)."""
    kr = rec.key_rec
    if _K is not None:
        first = np.empty(room, dtype=np.int64)
        n = _K.keys_missing(kr, rec.off, rec.tran, key_found, lo, hi, first)
        return n, first[:min(n, room)]
    off = rec.off[kr]
    want = (off >= lo) & (off <= hi) & (rec.tran[kr] != TRANSACTION_ROLLBACK_TYPE)
    missing = np.flatnonzero(want & (key_found == 0))
    return len(missing), missing[:room]


def _completeness(store, rec, key_found: np.ndarray, out, redispatch_from: int | None) -> None:
    """Every key RocketMQ indexes (UNIQ_KEY, each KEYS token; not ROLLBACK records) of every
    record from the first message onwards has its entry, whatever index files remain: RocketMQ
    deletes an index file only once its endPhyOffset is below the commitlog's min offset
    (IndexService.deleteExpiredFile), so a record still in the log has its file unless that
    file was lost. Keys of records crash recovery will index again (from `redispatch_from`:
    check.reindex_from) are pending recovery, not missing."""
    if not store.cfg.messageIndexEnable or not len(rec.key_rec) or not rec.n:
        return
    lo = int(rec.off[0])
    hi = store.commitlog.max_offset
    damage_hi = hi if redispatch_from is None else redispatch_from - 1
    n_missing, missing = _missing_keys(rec, key_found, lo, damage_hi, 100)
    if n_missing:
        _uncovered_ranges(store, rec, key_found, lo, damage_hi, n_missing, out)
        _word_missing(store, rec, missing, out, "index-missing",
                      "has no index entry (a query by it cannot find the message)")
        out.count += max(0, n_missing - len(missing))
    if redispatch_from is not None and redispatch_from <= hi:
        n_pending, first = _missing_keys(rec, key_found, redispatch_from, hi, 1)
        if n_pending:
            o = int(rec.off[rec.key_rec[first[0]]])
            out.pending("index-behind", f"{n_pending} keys of records from commitlog offset {o} on have no index "
                        "entry yet", store.commitlog.queue.find(o).path, o,
                        "re-dispatched into the index by crash recovery")


def _word_missing(store, rec, missing, out, kind: str, what: str) -> None:
    cl = store.commitlog
    kr = rec.key_rec
    for p in missing.tolist():
        row = int(kr[p])
        o = int(rec.off[row])
        m = cl.read_record(o).message
        k = record_keys(m)[p - int(np.searchsorted(kr, row))]
        out.add(kind, f"key {k!r} of record {m.topic}/{m.queueId}@{m.queueOffset} {what}", cl.queue.find(o).path, o)


def _uncovered_ranges(store, rec, key_found, lo: int, hi: int, n_missing: int, out) -> None:
    """One problem per stretch of the log with unindexed keys that no index file's range
    covers: the index file that held them is gone (deleted, lost), which the per-key lines
    alone would not say."""
    _, missing = _missing_keys(rec, key_found, lo, hi, n_missing)
    offs = rec.off[rec.key_rec[missing]]
    files = sorted((f for f in store.index.files if f.header.indexCount > 1), key=lambda f: f.header.beginPhyOffset)
    begins = np.array([f.header.beginPhyOffset for f in files], dtype=np.int64)
    ends = np.array([f.header.endPhyOffset for f in files], dtype=np.int64)
    gap = np.searchsorted(begins, offs, side="right")      # files[gap - 1] begins at or before the record
    covered = (gap > 0) & (offs <= ends[np.maximum(gap - 1, 0)] if len(files) else np.zeros(len(offs), bool))
    cl = store.commitlog
    for g in np.unique(gap[~covered]).tolist():
        sel = offs[(gap == g) & ~covered]
        a, b = int(sel.min()), int(sel.max())
        if not files:
            where = "and there is no index file"
        elif g == 0:
            where = f"before the oldest index file ({files[0].name} begins at {int(begins[0])})"
        elif g == len(files):
            where = f"after the newest index file ({files[-1].name} ends at {int(ends[-1])})"
        else:
            where = f"between index files {files[g - 1].name} (ends at {int(ends[g - 1])}) and {files[g].name} " \
                f"(begins at {int(begins[g])})"
        out.add("index-file-missing", f"{len(sel)} keys of records at commitlog offsets {a}..{b} are in no index "
                f"file, {where}: an index file is missing (key queries cannot find them; rmqstore rebuild "
                "re-creates the index)", cl.queue.find(a).path, a)
