"""check over a tier folder, without writing: every CONSUME_QUEUE unit against its COMMIT_LOG
record (size, queue offset, the rewritten PHYSICALOFFSET), the commit log walked record by
record, every index item against its slot, its key hash and the message it points at, and
the metadata file against what the segments say."""
from __future__ import annotations

from engine.format import tiered_layout as L
from engine.format.message import RecordStatus, check_record

MAX_LISTED = 200


def check_tier(store) -> dict:
    problems: list[dict] = []
    notes: list[dict] = []
    counts = {"messages": 0, "cqUnits": 0, "indexEntries": 0}

    def problem(kind, detail, file, offset=None, into=problems):
        into.append({"kind": kind, "detail": detail, "file": str(file), "offset": offset})

    for (topic, qid), q in sorted(store.queues.items()):
        for kind, ff in (("commitlog-gap", q.commitlog), ("cq-gap", q.cq)):
            for a, b in ff.gaps:
                problem(kind, f"no segment holds bytes [{a}, {b})", ff.folder, a)
        if q.cq.max_offset % L.CQ_UNIT_SIZE:
            problem("cq-torn", f"consume queue ends {q.cq.max_offset % L.CQ_UNIT_SIZE} bytes into a unit",
                    q.cq.folder, q.cq.max_offset)
        seen_end = q.commitlog.min_offset
        units = q.units(q.min_offset, q.max_offset)
        units = units.tolist() if units is not None else []
        for i, (phy, size, _tags) in enumerate(units, start=q.min_offset):
            counts["cqUnits"] += 1
            data = q.commitlog.read(phy, size)
            if data is None:
                problem("cq-unit-dangling", f"{topic}/{qid}@{i}: no {size} bytes at tiered commit-log offset {phy}",
                        q.cq.folder, i * L.CQ_UNIT_SIZE)
                continue
            r = check_record(data, 0, len(data), phy)
            m = r.message
            if r.status is not RecordStatus.MESSAGE or m is None or r.size != size:
                problem("record-invalid", f"{topic}/{qid}@{i}: {r.reason or r.status.value}", q.commitlog.folder, phy)
                continue
            counts["messages"] += 1
            if (m.topic, m.queueId, m.queueOffset) != (topic, qid, i):
                problem("record-mismatch", f"unit {topic}/{qid}@{i} points at {m.topic}/{m.queueId}@{m.queueOffset}",
                        q.commitlog.folder, phy)
            if m.physicalOffsetField != phy:
                problem("physical-offset", f"{topic}/{qid}@{i}: PHYSICALOFFSET {m.physicalOffsetField}, the record "
                        f"is at tiered offset {phy} (the upload rewrites it)", q.commitlog.folder, phy)
            if phy != seen_end:
                problem("commitlog-hole", f"{topic}/{qid}@{i}: record at {phy}, the previous ended at {seen_end}",
                        q.commitlog.folder, phy)
            seen_end = phy + size
        if units and seen_end != q.commitlog.max_offset:
            problem("commitlog-tail", f"{topic}/{qid}: {q.commitlog.max_offset - seen_end} bytes after the last "
                    "record no consume-queue unit points at", q.commitlog.folder, seen_end, into=notes)
    ids = _check_index(store, counts, problem, notes)
    _check_metadata(store, ids, problem, notes)
    listed = problems[:MAX_LISTED]
    return {"ok": not problems, "kind": "tiered", **counts, "problemCount": len(problems), "problems": listed,
            "notes": notes, "crcRule": "none (the tier keeps no CRC of its own; bodies carry their BODYCRC)",
            "recoveryPending": []}


def _check_index(store, counts, problem, notes) -> dict[int, str]:
    """Items in their hash's slot, pointing at a message of their queue that has a key hashing
    to them; returns the topic ids the items proved (topicId -> topic)."""
    ids: dict[int, str] = {}
    by_queue = {}
    for (t, q), tq in store.queues.items():
        by_queue.setdefault(q, []).append((t, tq))
    for f in store.index_files:
        path = f.segment.path
        if f.magic != L.END_MAGIC:
            problem("index-magic", f"magic {f.magic:#x}: not a sealed, compacted index file", path, 0)
        if f.slots is None:
            problem("index-geometry", f"size {f.segment.size} leaves no whole number of slots", path)
            continue
        by_size = L.slot_count(f.segment.size, f.item_count)
        if by_size != f.slots:
            problem("index-geometry", f"slot 0 says {f.slots} slots, the file size {by_size} (the slots are read "
                    f"as slot 0 says)", path, 28, into=notes)
        items = f.all_items()
        if len(items) != f.item_count:
            problem("index-count", f"header says {f.item_count} items, slots hold {len(items)}", path, 24)
        for slot, (h, tid, qid, off, size, _t) in items:
            counts["indexEntries"] += 1
            if h % f.slots != slot:
                problem("index-slot", f"item hash {h} in slot {slot}, belongs to slot {h % f.slots}", path)
                continue
            owner = None
            for topic, tq in by_queue.get(qid, []):
                m = tq.message(off, size)
                if m is not None and m.topic == topic and any(
                        L.tiered_key_hash(topic, k) == h for k in [m.uniqKey] + m.key_list if k):
                    owner = topic
                    break
            if owner is None:
                problem("index-dangling", f"item (topicId {tid}, queue {qid}, offset {off}, size {size}) points at "
                        "no message with a key of its hash", path, into=notes)
                continue
            if ids.setdefault(tid, owner) != owner:
                problem("index-topic-id", f"topicId {tid} points at {ids[tid]} and at {owner}", path)
    return ids


def _check_metadata(store, ids: dict[int, str], problem, notes) -> None:
    if store.metadata_path is None:
        notes.append({"kind": "metadata-absent", "detail": "no tieredStoreMetadata.json beside the tier: topic ids "
                      "come from the index items", "file": str(store.root), "offset": None})
        return
    table = store.metadata.get("topicMetadataTable") if store.metadata else None
    if not isinstance(table, dict):
        problem("metadata-unreadable", "no topicMetadataTable", store.metadata_path, into=notes)
        return
    for tid, topic in sorted(ids.items()):
        entry = table.get(topic)
        got = entry.get("topicId") if isinstance(entry, dict) else None
        if got != tid:
            problem("metadata-topic-id", f"index items give {topic} topicId {tid}, the metadata {got}",
                    store.metadata_path)
    cl = store.metadata.get("commitLogFileSegmentTable") or {}
    for (topic, qid), q in sorted(store.queues.items()):
        segs = cl.get(f"{store.broker}/{topic}/{qid}") if isinstance(cl, dict) else None
        if not isinstance(segs, dict):
            continue
        meta = {int(k): v.get("size") for k, v in segs.items() if str(k).lstrip("-").isdigit() and isinstance(v, dict)}
        disk = {s.base: s.size for s in q.commitlog.segments}
        if meta != disk:
            problem("metadata-segments", f"{topic}/{qid}: metadata lists commit-log segments {sorted(meta.items())}, "
                    f"the folder holds {sorted(disk.items())} (the segments are read)", store.metadata_path, into=notes)
