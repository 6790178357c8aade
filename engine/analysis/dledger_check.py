"""`check`'s DLedger part: the entry headers around the messages of a DLedger store, against
the rules DLedger's recovery and reads rely on (engine/format/dledger_layout.py).

- every entry: magic 1, its pos field is where it is, bodySize + 48 == size, the RocketMQ
  record inside is exactly the body; indexes dense (0, 1, 2, ... across files), terms never
  decreasing and never above currterm's;
- its 32-byte index record agrees (magic, pos, size, index, term), records past the end are zero;
- every full data file ends with a -1 blank giving the bytes left, then zeros;
- DLedger's checkpoint (endIndex, committedIndex) against the ledger;
- every ConsumeQueue unit points at an entry body (entry pos + 48) with size = entry size - 48;
- after a crash: the keys RocketMQ's restart loses for good (index files it deletes, which a
  DLedger store never redispatches); what the restart's reput adds and commits is pending
  (the read-only view serves it already)."""
from __future__ import annotations

import struct

from functools import singledispatch

import numpy as np

from engine.format import dledger_layout as L
from engine.store.dledger_commit_log import DLedgerCommitLog
from engine.format.cq_unit import is_filler

_I32 = struct.Struct(">i")


@singledispatch
def framing_checks(cl, store, out) -> dict:
    """The check's findings on how the log frames its records (a classic log: none), as
    extra fields of its report."""
    return {}


@framing_checks.register
def _(cl: DLedgerCommitLog, store, out) -> dict:
    return {"dledgerEntries": check_entries(store, out)}


def check_entries(store, out) -> int:
    """Adds problems to `out` (engine.analysis.check.Problems); returns the entries checked."""
    cl = store.commitlog
    st = cl.ledger
    term_file = st.term.currTerm if st.term else None
    bodies: dict[int, int] = {}
    expect, last_term, n = None, -1, 0
    end = st.write_pos
    files = cl.files
    last_with_data = max((i for i, f in enumerate(files) if f.file_from_offset < end), default=-1)
    for kind, pos, what in cl.iter_entries(0):
        f = cl.queue.find(pos)
        if pos >= end:  # past the ledger: a blank is fine (its file was full), anything written is not
            if kind == "blank":
                continue
            if kind == "entry":
                out.add("dledger-tail", f"entry {what.index} after the end of the ledger ({st.stop_reason})", f.path, pos)
            elif kind == "bad" or any(f.buf[pos - f.file_from_offset:pos - f.file_from_offset + 4096]):
                out.add("dledger-tail", f"data after the end of the ledger ({st.stop_reason})", f.path, pos)
            break
        if kind == "bad":
            out.add("dledger-entry", what, f.path, pos)
            continue
        if kind == "end":
            if cl.queue.index_of(f) < last_with_data:
                out.add("dledger-blank", f"data file ends at {pos - f.file_from_offset} without a -1 blank before "
                        "the next file", f.path, pos)
            continue
        if kind == "blank":
            _blank(f, pos, what, out)
            continue
        h = what
        n += 1
        bodies[h.pos + L.ENTRY_BODY_OFFSET] = h.size
        if expect is not None and h.index != expect:
            out.add("dledger-entry", f"entry index {h.index}, expected {expect} (indexes are dense)", f.path, pos)
        if h.term < last_term:
            out.add("dledger-entry", f"entry {h.index} has term {h.term}, after term {last_term}", f.path, pos)
        if term_file is not None and h.term > term_file:
            out.add("dledger-entry", f"entry {h.index} has term {h.term}, above currterm's {term_file}", f.path, pos)
        expect, last_term = h.index + 1, h.term
        rel = pos - f.file_from_offset
        total = _I32.unpack_from(f.buf, rel + L.ENTRY_BODY_OFFSET)[0]
        if total != h.bodySize:
            out.add("dledger-entry", f"entry {h.index}: the message's TOTALSIZE {total} != bodySize {h.bodySize}",
                    f.path, pos + L.ENTRY_BODY_OFFSET)
        rec = cl.index_record(h.index)
        want = (L.ENTRY_MAGIC, h.pos, h.size, h.index, h.term)
        got = None if rec is None else (rec.magic, rec.pos, rec.size, rec.index, rec.term)
        if got != want:
            at = h.index * L.INDEX_UNIT_SIZE
            g = cl.index_queue.find(at)
            out.add("dledger-index", f"index record of entry {h.index} is {got}, expected (magic, pos, size, index, "
                    f"term) {want}", g.path if g else cl.folder.index_dir, at)
    if expect is not None:
        rec = cl.index_record(expect)
        if rec is not None and (rec.magic or rec.pos or rec.size or rec.index):
            at = expect * L.INDEX_UNIT_SIZE
            out.add("dledger-index", f"an index record past the last entry {expect - 1}: {rec.to_json()}",
                    cl.index_queue.find(at).path, at)
    _checkpoint(cl, out)
    _units(store, bodies, out)
    _index_lost_on_restart(store, out)
    _reput_pending(store, out)
    return n


def _index_lost_on_restart(store, out) -> None:
    """RocketMQ's abnormal IndexService.load deletes each index file newer than the
    checkpoint's indexMsgTimestamp. A classic store re-dispatches from its recovery start and
    rebuilds them; DLedgerCommitLog.recover never re-dispatches and reput resumes at the
    consume queues' end, so the keys those files held below that end are lost to
    queryMessage for good. The read-only view already serves the index so
    (engine.store.dledger_reput); the files are still read by exact key answers, marked."""
    view = getattr(store.commitlog, "restart", None)
    lost = getattr(store.index, "lost_files", ())
    if view is None or not lost:
        return
    for f in lost:
        _pending(out, "index-after-checkpoint", f"index file {f.name} is newer than the checkpoint's "
                 f"indexMsgTimestamp {store.checkpoint.indexMsgTimestamp}", f.path, None,
                 "RocketMQ deletes it at restart; reput re-indexes only the records from the consume queues' end "
                 f"({view.reput_from}) on")
        n = f.header.indexCount
        offs = np.unique(np.asarray(f.entries[1:n]["commitLogOffset"], np.int64)) if n > 1 else np.empty(0, np.int64)
        gone = offs[offs < view.reput_from]
        if len(gone):
            out.add("dledger-index-lost", f"index file {f.name} is newer than the checkpoint's indexMsgTimestamp: "
                    f"RocketMQ deletes it when it restarts after the crash and, in DLedger mode, never re-dispatches "
                    f"(reput resumes at the consume queues' end, {view.reput_from}), so queryMessage loses the keys "
                    f"of {len(gone)} messages ({int(gone[0])}..{int(gone[-1])}); rmqstore's exact key answer still "
                    "finds them, marked indexLostByRocketMQ", f.path, int(gone[0]))


def _reput_pending(store, out) -> None:
    """What the restart's reput adds (the read-only view serves it already): consume-queue
    units and index entries of the entries past the consume queues' end."""
    view = getattr(store.commitlog, "restart", None)
    if view is None or not (view.units or view.index_entries_added):
        return  # (a ROLLBACK entry past the queues' end is dispatched on every restart, to no effect)
    units = ", ".join(f"{q} +{n}" for q, n in sorted(view.units.items())) or "none"
    what = (f"{view.dispatched} entries from {view.reput_from} to {view.reput_to} are past the consume queues' end "
            f"(units: {units})")
    how = ("the restarted broker's reput dispatches them (CQ units, index entries"
           + (f" in new index file {', '.join(view.index_files_created)}" if view.index_files_created else "")
           + "); this view already serves them")
    f = store.commitlog.queue.find(view.reput_from)
    _pending(out, "dledger-reput", what, f.path if f else store.commitlog.folder.data_dir, view.reput_from, how)


def _pending(out, kind: str, detail: str, file, offset, recovery: str) -> None:
    """A crash leftover the restart resolves (check's recoveryPending when it has one)."""
    if hasattr(out, "pending"):
        out.pending(kind, detail, file, offset, recovery)
    else:
        out.add(kind, f"{detail}: {recovery}", file, offset)


def _blank(f, pos: int, left: int, out) -> None:
    rel = pos - f.file_from_offset
    room = f.file_size - rel
    if left != room:
        out.add("dledger-blank", f"blank says {left} bytes left, the file has {room}", f.path, pos)
    if room < L.MIN_BLANK_LEN:
        out.add("dledger-blank", f"blank of {room} bytes, under the {L.MIN_BLANK_LEN} DLedger keeps", f.path, pos)
    tail = np.frombuffer(f.mm, np.uint8, room - 8, rel + 8) if room > 8 else np.empty(0, np.uint8)
    nz = np.flatnonzero(tail)
    if len(nz):
        out.add("dledger-blank", "bytes that are not zero after the blank", f.path, pos + 8 + int(nz[0]))


def _checkpoint(cl, out) -> None:
    st = cl.ledger
    path = cl.folder.path / L.CHECKPOINT_FILE
    for note in st.notes:
        out.add("dledger-checkpoint", note, cl.folder.path, None)
    cp = st.checkpoint
    if cp is None:
        if st.end_index >= 0:
            out.add("dledger-checkpoint", "no DLedger checkpoint file: committedIndex is unknown", path, None)
        return
    if cp.endIndex is None or cp.committedIndex is None:
        out.add("dledger-checkpoint", "endIndex or committedIndex is not a number", path, None)
        return
    if cp.committedIndex > cp.endIndex:
        out.add("dledger-checkpoint", f"committedIndex {cp.committedIndex} > endIndex {cp.endIndex}", path, None)
    if cp.endIndex > st.end_index:
        out.add("dledger-checkpoint", f"endIndex {cp.endIndex} is past the last entry {st.end_index}: entries "
                "the checkpoint recorded are gone", path, None)
    elif 0 <= cp.committedIndex < st.end_index:
        _pending(out, "dledger-uncommitted", f"entries {cp.committedIndex + 1}..{st.end_index} are past the "
                 f"checkpoint's committedIndex {cp.committedIndex} (the checkpoint is written every 3 s; after a crash "
                 f"RocketMQ reports max offset {st.committed_pos} until the node leads its group again)", path, None,
                 f"committed once the node leads its group again: max offset {st.write_pos}, as this view serves")


def _units(store, bodies: dict[int, int], out) -> None:
    if not bodies:
        return
    offs = np.fromiter(bodies.keys(), np.int64, len(bodies))
    sizes = np.fromiter(bodies.values(), np.int64, len(bodies))
    order = np.argsort(offs)
    offs, sizes = offs[order], sizes[order]
    for (topic, qid), cq in sorted(store.queues.items()):
        units = cq.units(cq.min_offset, cq.max_offset)
        if not len(units):
            continue
        phy = units["commitLogOffset"].astype(np.int64)
        size = units["size"].astype(np.int64)
        at = np.clip(np.searchsorted(offs, phy), 0, len(offs) - 1)
        bad = np.flatnonzero(((offs[at] != phy) | (sizes[at] != size + L.ENTRY_BODY_OFFSET)) & ~is_filler(phy, size)
                             & (phy >= store.commitlog.divided))   # below: the old commitlog of a mixed store
        for i in bad[:20].tolist():
            out.add("dledger-cq", f"unit {cq.min_offset + i} of {topic}/{qid} ({int(phy[i])}, size {int(size[i])}) is "
                    "not an entry body (entry pos + 48, entry size - 48)",
                    cq.queue.dirs[0] if hasattr(cq, "queue") else store.root / "consumequeue", cq.min_offset + i)
        out.count += max(0, len(bad) - 20)
