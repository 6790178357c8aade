"""What the ConsumeQueues and the index *should* hold, rebuilt from the commitlog by dispatch's
rules (STORE_FORMAT §8.6, §9.8, §11), and how a difference is reported.

- CQ: one unit per NOT_TYPE or COMMIT record at (TOPIC, QUEUEID, QUEUEOFFSET) holding
  (PHYSICALOFFSET, TOTALSIZE, tagsCode). Units pointing below the commitlog's min offset
  (expired) and filler units are not compared. When two records claim one queue offset the
  first keeps it (Java skips the later one) and the later one is reported.
- Index: for every record except ROLLBACK, `topic#UNIQ_KEY` and `topic#token` for each KEYS
  token, each an entry (keyHash, PHYSICALOFFSET). Compared as multisets; an extra entry and
  a missing one with the same keyHash or the same offset are reported as one changed entry.
  Each index file's slot chains must also reach every entry once, from the right slot.

A difference row: structure, problem, file (relative to the store root), fileOffset (byte
position in that file), topic, queueId, queueOffset, key, commitLogOffset, expected, actual."""
from __future__ import annotations

import os

import numpy as np

from engine.format.cq_unit import CQ_UNIT_SIZE
from engine.format.index_layout import INDEX_ENTRY_SIZE, entry_pos, slots_of
from engine.store.crash_view import disk_index

ROW_KEYS = ["structure", "problem", "file", "fileOffset", "topic", "queueId", "queueOffset", "key",
            "commitLogOffset", "expected", "actual"]
MAX_REPORTED = 100_000


def diff_row(**kw) -> dict:
    return {k: kw.get(k) for k in ROW_KEYS}


def cq_file_size(store) -> int:
    """The ConsumeQueue files' size (0: the queues are in RocksDB). A store on a filesystem
    learns it from its listing of the queues, made here if not yet."""
    return store.cq_file_size


def cq_location(topic: str, queue_id: int, queue_offset: int, file_size: int) -> tuple[str, int | None]:
    """(file relative to the store root, byte position) where a queue offset's unit lives;
    file_size 0: the queues are in RocksDB (the database folder, no position)."""
    if not file_size:
        return "consumequeue", None
    pos = queue_offset * CQ_UNIT_SIZE
    start = pos - pos % file_size
    return os.path.join("consumequeue", topic, str(queue_id), f"{start:020d}"), pos % file_size


def unit_dict(phy, size, tags) -> dict:
    """A CQ unit as the consistency job reports it (phyOffset: the name before issue 18, kept)."""
    return {"commitLogOffset": int(phy), "phyOffset": int(phy), "size": int(size), "tagsCode": int(tags)}


def index_file_for(files: list[tuple[str, int, int]], phy: int) -> str | None:
    """The index file whose [beginPhyOffset, endPhyOffset] holds `phy` (files as
    (relative name, begin, end), oldest first); the last one if none does."""
    for name, begin, end in files:
        if begin <= phy <= end:
            return name
    return files[-1][0] if files else None


def pair_index_differences(missing: list[dict], extra: list[dict]) -> list[dict]:
    """Turn (missing, extra) entry lists into difference rows, pairing a missing entry with
    an extra one that has the same offset (keyHash changed) or the same keyHash (offset
    changed). Inputs: missing {keyHash, commitLogOffset, key, topic, file}; extra {keyHash,
    commitLogOffset, file, position, index}."""
    rows = []
    extra = sorted(extra, key=lambda e: (e["file"], e["position"]))
    used = [False] * len(extra)
    by_phy: dict[int, list[int]] = {}
    by_hash: dict[int, list[int]] = {}
    for i, e in enumerate(extra):
        by_phy.setdefault(e["commitLogOffset"], []).append(i)
        by_hash.setdefault(e["keyHash"], []).append(i)
    for m in sorted(missing, key=lambda m: (m["commitLogOffset"], m["key"])):
        pick = None
        for cand in (by_phy.get(m["commitLogOffset"], []), by_hash.get(m["keyHash"], [])):
            for i in cand:
                if not used[i]:
                    pick = i
                    break
            if pick is not None:
                break
        exp = {"keyHash": m["keyHash"], "commitLogOffset": m["commitLogOffset"], "phyOffset": m["commitLogOffset"]}
        if pick is None:
            rows.append(diff_row(structure="index", problem="entry missing", file=m["file"], topic=m["topic"],
                                 key=m["key"], commitLogOffset=m["commitLogOffset"], expected=exp))
            continue
        used[pick] = True
        e = extra[pick]
        rows.append(diff_row(structure="index", problem="entry differs", file=e["file"], fileOffset=e["position"],
                             topic=m["topic"], key=m["key"], commitLogOffset=m["commitLogOffset"], expected=exp,
                             actual={"keyHash": e["keyHash"], "commitLogOffset": e["commitLogOffset"], "phyOffset": e["commitLogOffset"], "index": e["index"]}))
    for i, e in enumerate(extra):
        if not used[i]:
            rows.append(diff_row(structure="index", problem="entry without record", file=e["file"],
                                 fileOffset=e["position"], commitLogOffset=e["commitLogOffset"],
                                 actual={"keyHash": e["keyHash"], "commitLogOffset": e["commitLogOffset"], "phyOffset": e["commitLogOffset"], "index": e["index"]}))
    return rows


def index_chain_problems(store, min_offset: int) -> list[dict]:
    """Per index file: entries no slot chain reaches, and entries chained from a slot their
    keyHash does not map to. Vectorised: all chains are walked in step."""
    rows = []
    for f in disk_index(store).files:
        rows += file_chain_problems(f, min_offset)
    return rows


def chain_problems_json(desc: str, min_offset: int) -> list[str]:
    """file_chain_problems of a remote index file described by RemoteIndexFile.to_json (a task
    reads its slot table and entries by byte ranges), as JSON rows."""
    import json

    from engine.scan.remote import RemoteIndexFile
    return [json.dumps(r) for r in file_chain_problems(RemoteIndexFile.from_json(desc), min_offset)]


def file_chain_problems(f, min_offset: int) -> list[dict]:
    """index_chain_problems of one index file (IndexFile, or engine.scan.remote.RemoteIndexFile)."""
    rows = []
    count = min(f.header.indexCount, f.index_num)
    if count <= 1:
        return rows
    entries = f.entries[:count]
    key_hash = entries["keyHash"].astype(np.int64)
    prev = entries["prevIndex"].astype(np.int64)
    phy = entries["commitLogOffset"].astype(np.int64)
    seen = np.zeros(count, dtype=bool)
    wrong_slot = np.zeros(count, dtype=bool)
    slot_of_chain = np.arange(f.slot_num, dtype=np.int64)
    cur = f.slots.astype(np.int64)
    ok = (cur > 0) & (cur < count)
    cur, slot_of_chain = cur[ok], slot_of_chain[ok]
    steps = 0
    while cur.size and steps < count:
        fresh = ~seen[cur]
        cur, slot_of_chain = cur[fresh], slot_of_chain[fresh]   # a cycle stops its chain
        seen[cur] = True
        wrong_slot[cur] |= slots_of(key_hash[cur], f.slot_num) != slot_of_chain
        nxt = prev[cur]
        ok = (nxt > 0) & (nxt < count)
        cur, slot_of_chain = nxt[ok], slot_of_chain[ok]
        steps += 1
    base = entry_pos(f.slot_num, 0)
    rel = os.path.join("index", f.name)
    for n in np.flatnonzero(~seen[1:] & (phy[1:] >= min_offset)) + 1:
        rows.append(diff_row(structure="index", problem="entry unreachable from its slot", file=rel,
                             fileOffset=int(base + INDEX_ENTRY_SIZE * n), commitLogOffset=int(phy[n]),
                             actual={"keyHash": int(key_hash[n]), "commitLogOffset": int(phy[n]), "phyOffset": int(phy[n]), "index": int(n)}))
    for n in np.flatnonzero(wrong_slot & (phy >= min_offset)):
        rows.append(diff_row(structure="index", problem="entry chained from the wrong slot", file=rel,
                             fileOffset=int(base + INDEX_ENTRY_SIZE * n), commitLogOffset=int(phy[n]),
                             actual={"keyHash": int(key_hash[n]), "commitLogOffset": int(phy[n]), "phyOffset": int(phy[n]), "index": int(n)}))
    return rows


def index_file_ranges(store) -> list[tuple[str, int, int]]:
    return [(os.path.join("index", f.name), f.header.beginPhyOffset, f.header.endPhyOffset)
            for f in disk_index(store).files]


def merge_rows(rows: list[dict], chain_rows: list[dict]) -> list[dict]:
    """Difference rows in a stable order; a chain problem at a position already reported
    by the content comparison is dropped (one defect, one row)."""
    taken = {(r["file"], r["fileOffset"]) for r in rows if r["fileOffset"] is not None}
    out = rows + [r for r in chain_rows if (r["file"], r["fileOffset"]) not in taken]
    order = {"consumequeue": 0, "index": 1}
    out.sort(key=lambda r: (order.get(r["structure"], 2), r["file"] or "", r["fileOffset"] if r["fileOffset"]
                            is not None else -1, r["commitLogOffset"] if r["commitLogOffset"] is not None else -1,
                            r["key"] or "", r["problem"]))
    return out
