"""check for compacted topics (engine/store/compaction.py reads them): every compactionCq unit
against its compaction-log record and the store's own ConsumeQueue, every log file walked, and
what makes RocketMQ 5.3.3's load refuse a queue or the whole store."""
from __future__ import annotations

from pathlib import Path

from engine.format import compaction_layout as C
from engine.format.message import RecordStatus, check_record
from engine.store.compaction import (CompactedQueue, CompactionStore, LogFile, _mapped_size, _numbered, _strays,
                                     _valid, not_dispatched)


def _stray(e: Path, mapped_size: int | None) -> tuple[str, str, bool] | None:
    """(kind, why, a problem?) for an entry besides the numbered files that MappedFileQueue.load
    meets in a compaction queue's folder: it skips folders and parses the name of a file of the
    mapped-file size as its offset (the store's load fails); a file of another size is
    _misfit's (None here)."""
    if e.is_dir():
        if e.name == C.COMPACTING_DIR:
            return ("compaction-interrupted", "a compaction was interrupted (CompactionLog's swap folder is still here): "
                    "the broker's load skips it, but its next compaction reuses it without reading it, so stale units "
                    "can follow the new ones", False)
        return "compaction-stray", f"{e.name}: a folder the broker does not read", False
    if mapped_size is None or e.stat().st_size != mapped_size:
        return None
    why = ("a file a compaction replaced and could not delete (CompactionLog.replaceFiles destroys it once)"
           if e.name.endswith(".delete") else "not a mapped file of this queue")
    return ("compaction-unloadable", f"{e.name}: {why}; its name is not an offset, so RocketMQ's MappedFileQueue.load "
            "fails and the broker's store does not load until it is removed", True)


def _cq_lost(q: CompactedQueue) -> list[tuple[str, Path]]:
    """compactionCq files with no unit whose log file holds records: the broker serves none of
    those records (a zeroed or emptied cq file)."""
    out = []
    logs = {f.path.name: f for f in q.logs}
    for path, units in q.files:
        f = logs.get(path.name)
        if len(units) or f is None or f.size < 8:
            continue
        with open(f.path, "rb") as fh:
            head = fh.read(8)
        total, magic = int.from_bytes(head[:4], "big", signed=True), int.from_bytes(head[4:], "big", signed=True)
        if total > 0 and magic != C.BLANK_MAGIC:
            out.append((f"{q.topic}/{q.queue_id}: compactionCq file {path.name} holds no unit while its log file holds "
                        "records: the broker serves none of them", path))
    return out


def _full_queue(store, topic: str, queue_id: int) -> dict[int, object]:
    """queue offset -> message of the store's own ConsumeQueue (every message put)."""
    out, b = {}, store.queue_bounds(topic, queue_id) if store is not None else None
    off = b[1] if b else 0
    while b and off < b[2]:
        r = store.get_message(topic, queue_id, off, 1024)
        for m in r.messages:
            out[m.queueOffset] = m
        if r.nextBeginOffset <= off:
            break
        off = r.nextBeginOffset
    return out


def check_compaction(cs: CompactionStore, store=None) -> dict:
    """Every compactionCq unit against its compaction-log record (size, topic, queue, queue
    offset, the rewritten PHYSICALOFFSET) and against the message the store's ConsumeQueue holds
    at that queue offset; every log file walked to its end marker or its zeros."""
    problems, notes, count = [], [], 0

    def add(into, kind, detail, path, offset=None):
        into.append({"kind": kind, "detail": detail, "file": str(path), "offset": offset})

    for (topic, qid), (why, where) in sorted(cs.unloaded.items()):
        add(problems, "compaction-queue-unloaded", f"{topic}/{qid}: {why}", where)
    for (topic, qid), q in sorted(cs.queues.items()):
        for d in (q.log_dir, q.cq_dir):
            size = _mapped_size(d)
            for e in _strays(d):
                found = _stray(e, size)
                if found is not None:
                    add(problems if found[2] else notes, found[0], found[1], e)
        for why, where in _cq_lost(q):
            add(problems, "compaction-cq-lost", why, where)
        logs, cqs = {p.name for p in _numbered(q.log_dir)}, {p.name for p in _numbered(q.cq_dir)}
        last = q._read[-1][_valid(q._read[-1])] if q._read else None
        cut = int(last["commitLogOffset"][-1]) + int(last["size"][-1]) if last is not None and len(last) else -1
        for name in sorted(logs ^ cqs):   # TopicPartitionLog.sanityCheck: a log file and a CQ file of each name
            if name in logs and 0 < cut < int(name):   # (its recover deletes log files past the CQ's last record first)
                add(notes, "compaction-log-after-cq", f"{topic}/{qid}: log file {name} lies past the compactionCq's last "
                    "record: the broker's load deletes it", q.log_dir)
                continue
            mine, other, where = ("compaction-log", "compactionCq", q.log_dir) if name in logs else \
                ("compactionCq", "compaction-log", q.cq_dir)
            add(problems, "compaction-unloadable", f"{topic}/{qid}: {name} is a {mine} file without its {other} "
                "file; sanityCheck refuses the queue, so the broker's store does not load", where)
        lag = not_dispatched(store, topic, qid, q.max_offset) if store is not None else None
        if lag:
            add(notes, "compaction-behind", f"{topic}/{qid}: {lag}", q.log_dir)
        full = _full_queue(store, topic, qid) if store is not None else {}
        last_base, pointed, keys_below = -1, set(), {}
        compacted_files = [p for p, _ in q.files[:-1]]
        for path, units in q.files:
            for i, u in enumerate(units):
                count += 1
                phy, size, base = int(u["commitLogOffset"]), int(u["size"]), int(u["msgBaseOffset"])
                where = f"{topic}/{qid}@{base}"
                if base <= last_base:
                    add(problems, "compaction-cq-order", f"{where} after queue offset {last_base}", path, i * C.CQ_UNIT_SIZE)
                last_base = base
                m = q.message(phy, size)
                if m is None:
                    add(problems, "compaction-unit-dangling", f"{where}: no record of {size} bytes at compaction-log "
                        f"offset {phy}", q.log_dir, phy)
                    continue
                pointed.add(phy)
                if (m.topic, m.queueId, m.queueOffset) != (topic, qid, base):
                    add(problems, "compaction-record-mismatch", f"{where} points at {m.topic}/{m.queueId}@{m.queueOffset}",
                        q.log_dir, phy)
                if m.physicalOffsetField != phy:
                    add(problems, "compaction-physical-offset", f"{where}: PHYSICALOFFSET {m.physicalOffsetField}, "
                        f"the record is at {phy}", q.log_dir, phy)
                orig = full.get(base)
                if orig is not None and (orig.uniqKey, orig.bodyCRC, orig.keys) != (m.uniqKey, m.bodyCRC, m.keys):
                    add(problems, "compaction-differs", f"{where}: not the message the ConsumeQueue holds there",
                        q.log_dir, phy)
                if path in compacted_files:
                    keys_below.setdefault(m.keys, []).append(base)
        for k, bases in keys_below.items():
            if len(bases) > 1:
                add(notes, "compaction-key-kept-twice", f"{topic}/{qid}: key {k!r} kept at queue offsets {bases} "
                    "in compacted files", q.log_dir)
        for f in q.logs:
            _walk_log(f, pointed, topic, qid, add, problems, notes)
    return {"units": count, "problems": problems, "notes": notes}


def _walk_log(f: LogFile, pointed: set, topic, qid, add, problems, notes) -> None:
    """A log file's records from position 0 to the end marker, or to a zero size (a
    compacted file ends in zeros: its end marker is never written)."""
    data = f.path.read_bytes()
    pos = 0
    while pos + 8 <= len(data):
        total = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        magic = int.from_bytes(data[pos + 4:pos + 8], "big", signed=True)
        if total == 0 or magic == C.BLANK_MAGIC:
            return
        r = check_record(data, pos, len(data), f.base + pos)
        if r.status is not RecordStatus.MESSAGE:
            add(problems, "compaction-log-invalid", f"{topic}/{qid}: {r.reason or r.status.value}", f.path, pos)
            return
        if f.base + pos not in pointed:
            add(notes, "compaction-log-unreferenced", f"{topic}/{qid}: record at {f.base + pos} has no compactionCq "
                "unit", f.path, pos)
        pos += r.size
