"""`check`: verify a store without writing a byte. Reports, with file and offset, what
recovery would cut and where ConsumeQueue or index disagree with the commitlog."""
from __future__ import annotations

import numpy as np

from .config import CQ_UNIT_SIZE
from .consume_queue import FILLER_SIZE
from .javahash import index_key, index_key_hash
from .message import (TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE, RecordStatus,
                      body_crc)


def check_store(store, max_problems: int = 1000) -> dict:
    problems: list[dict] = []

    def problem(kind, detail, file, offset):
        if len(problems) < max_problems:
            problems.append({"kind": kind, "detail": detail, "file": str(file), "offset": offset})

    cl = store.commitlog
    rec = store.recovery.commitlog
    last = cl.files[-1] if cl.files else None
    if last is not None and rec.end_offset < last.end_offset:
        f = cl.queue.find(rec.end_offset) or last
        pos = rec.end_offset - f.file_from_offset
        if pos < f.file_size and any(f.buf[pos:min(f.file_size, pos + 4096)]):
            problem("commitlog-tail", f"data after the end of the valid log ({rec.stop_reason})", f.path, rec.end_offset)
    if store.abort_present:
        problem("abort", "abort file present: the store was not shut down cleanly", store.root / "abort", None)
    for a, b in cl.queue.gaps:
        problem("commitlog-gap", f"files missing between {a} and {b}", cl.queue.dirs[0], a)

    messages = {}
    n_messages = 0
    for off, r in cl.walk():
        if r.status is RecordStatus.MESSAGE:
            m = r.message
            n_messages += 1
            messages[off] = (m.topic, m.queueId, m.queueOffset, m.storeSize, m.sysFlag & 0x0C,
                             [m.uniqKey] * bool(m.uniqKey) + m.key_list)
            if m.physicalOffsetField != off:
                problem("commitlog-record", f"stored PHYSICALOFFSET {m.physicalOffsetField}", cl.queue.find(off).path, off)
            if m.body and body_crc(m.body) != m.bodyCRC:  # recovery checks CRCs in the last files only
                problem("commitlog-crc", f"body CRC {body_crc(m.body)} != stored {m.bodyCRC}", cl.queue.find(off).path, off)
        elif r.status is not RecordStatus.END_OF_FILE:
            problem("commitlog-record", f"{r.status.value}: {r.reason}", cl.queue.find(off).path, off)

    n_units = 0
    expected_units = {}
    for off, (topic, qid, qoff, size, tt, _) in messages.items():
        if tt in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
            expected_units[(topic, qid, qoff)] = (off, size)
    seen = set()
    for (topic, qid), cq in store.queues.items():
        for cf in cq.queue.files:  # file by file: a file missing in the middle must not hide the rest
            first = max(cf.file_from_offset // CQ_UNIT_SIZE, cq.min_offset)
            units = cq.units(first, (cf.file_from_offset + cf.wrote_position) // CQ_UNIT_SIZE)
            n_units += len(units)
            for i, (phy, size, _tags) in enumerate(units.tolist()):
                q = first + i
                where = cq.file_for(q)
                path = where.path if where else cq.directory
                if phy == 0 and size == FILLER_SIZE:
                    continue
                m = messages.get(phy)
                if m is None:
                    if phy >= cl.min_offset:
                        problem("cq-unit", f"{topic}/{qid} unit {q} points at {phy}, where no record starts", path,
                                q * CQ_UNIT_SIZE % cq.file_size)
                    continue
                if (m[0], m[1], m[2], m[3]) != (topic, qid, q, size):
                    problem("cq-unit", f"{topic}/{qid} unit {q} -> record {m[0]}/{m[1]}@{m[2]} size {m[3]} "
                            f"(unit size {size})", path, q * CQ_UNIT_SIZE % cq.file_size)
                seen.add((topic, qid, q))
    for (topic, qid, qoff), (off, _size) in expected_units.items():
        cq = store.find_queue(topic, qid)
        if (topic, qid, qoff) not in seen and cq is not None and qoff >= cq.min_offset:
            problem("cq-missing", f"record {topic}/{qid}@{qoff} has no ConsumeQueue unit", cl.queue.find(off).path, off)
        elif cq is None:
            problem("cq-missing", f"record {topic}/{qid}@{qoff}: no consume queue", cl.queue.find(off).path, off)

    n_entries = 0
    for f in store.index.files:
        count = f.header.indexCount
        e = f.entries[1:count]
        n_entries += len(e)
        lengths = f.chain_lengths()
        if lengths.sum() > max(0, count - 1):
            problem("index-chain", "slot chains are longer than the entries (a cycle)", f.path, None)
        for i, (h, phy) in enumerate(zip(e["keyHash"].tolist(), e["phyOffset"].tolist()), start=1):
            m = messages.get(phy)
            pos = 40 + 4 * f.slot_num + 20 * i
            if m is None:
                if cl.min_offset <= phy < cl.max_offset:
                    problem("index-entry", f"entry {i} points at {phy}, where no record starts", f.path, pos)
                continue
            if m[4] == TRANSACTION_ROLLBACK_TYPE or h not in {index_key_hash(index_key(m[0], k)) for k in m[5]}:
                problem("index-entry", f"entry {i} hash {h} matches no key of the record at {phy}", f.path, pos)
    return {"ok": not problems, "messages": n_messages, "cqUnits": n_units, "indexEntries": n_entries,
            "problems": problems}
