"""The store internals on the command line, built on engine.analysis, read-only:

* `slots STORE [--file NAME]`: per index file, slot use and the chain-length histogram;
* `chain STORE TOPIC KEY [--file NAME]`: the key's slot chain, entry by entry, with the query's
  hits, true collisions (the same keyHash, another key) and slot sharing (another keyHash);
* `fill STORE`: commitlog, ConsumeQueue and index file fill.

`--json` prints one JSON document (shapes may gain fields, never lose them); without it, tables."""
from __future__ import annotations

import json
import sys

from engine import analysis as A
from engine.cli.output import CliError, cancel_on_sigint, cancelled, fmt_time, safe, table
from engine.format.javahash import index_key, index_key_hash
from engine.tasks import Cancelled, CancelToken, run

TOP = 5   # longest chains listed per file


def register(add, commands: dict) -> None:
    sp = add("slots", "index slot use and chain lengths per index file")
    sp.add_argument("--file", metavar="NAME", help="one index file (its name in STORE/index)")
    commands["slots"] = cmd_slots
    sp = add("chain", "a key's index slot chain: hits, true collisions and slot sharing")
    sp.add_argument("topic", help="topic the message was stored under")
    sp.add_argument("key", help="one of the message's KEYS, or its UNIQ_KEY")
    sp.add_argument("--file", metavar="NAME", help="one index file (default: every one)")
    commands["chain"] = cmd_chain
    add("fill", "how full each commitlog, ConsumeQueue and index file is")
    commands["fill"] = cmd_fill


def index_files(store, name: str | None) -> list:
    files = store.index.files
    if name is None:
        return files
    chosen = [f for f in files if f.name == name]
    if not chosen:
        have = ", ".join(f.name for f in files) or "none"
        raise CliError(f"no index file {safe(name)!r} in {store.root / 'index'} (files: {have})")
    return chosen


# ---- slots --------------------------------------------------------------------------------------
def slots_json(f) -> dict:
    lengths, counts = A.chain_census(f)
    h = f.header
    entries = max(0, h.indexCount - 1)
    stats = A.slot_stats(lengths, entries, top=TOP, counts=counts)
    return {"file": f.name, "slotNum": f.slot_num, "indexNum": f.index_num, "indexCount": h.indexCount,
            "entries": entries, "hashSlotCount": h.hashSlotCount, "slotsUsed": A.index_fill(f).slots_used,
            "slotsWithChain": stats.used_slots, "maxChain": len(counts) - 1, "reachableEntries": stats.reachable,
            "loadFactor": entries / f.slot_num if f.slot_num else 0.0,
            "chainHistogram": [int(c) for c in counts],
            "longestChains": [{"slot": s, "length": n} for s, n in stats.longest],
            "cycles": len(A.chain_cycles(f)),
            "beginTimestamp": h.beginTimestamp, "endTimestamp": h.endTimestamp,
            "beginPhyOffset": h.beginPhyOffset, "endPhyOffset": h.endPhyOffset}


def cmd_slots(store, args) -> int:
    out = [slots_json(f) for f in index_files(store, args.file)]
    if args.json:
        print(json.dumps(out))
        return 0
    rows = [[o["file"], o["slotNum"], o["indexNum"], o["indexCount"], o["slotsUsed"], f"{o['loadFactor']:.3f}",
             o["maxChain"], o["cycles"], fmt_time(o["beginTimestamp"]), fmt_time(o["endTimestamp"])]
            for o in out]
    lines = [table(rows, ["INDEX FILE", "SLOT NUM", "INDEX NUM", "INDEX COUNT", "SLOTS USED", "LOAD",
                              "MAX CHAIN", "CYCLES", "BEGIN", "END"])]
    for o in out:
        hist = ", ".join(f"{k}: {n}" for k, n in enumerate(o["chainHistogram"]) if n)
        longest = ", ".join(f"slot {c['slot']} ({c['length']})" for c in o["longestChains"]) or "-"
        lines += ["", f"{o['file']}  chain length: slots  {hist}", f"{o['file']}  longest chains  {longest}"]
    print("\n".join(lines))
    return 0


# ---- chain --------------------------------------------------------------------------------------
def chain_json(f, store, key: str) -> dict:
    res = A.resolve_chain(f, key=key, get_message=store.commitlog.get_message,
                         limit=max(1, f.header.indexCount))
    qhash = res.query_hash
    entries = []
    for e in res.entries:
        s = e.step
        entries.append({"entry": s.index, "keyHash": s.keyHash, "commitLogOffset": s.commitLogOffset,
                        "timeDiff": s.timeDiff, "prevIndex": s.prevIndex, "timestamp": s.timestamp,
                        "hit": e.query_hit, "collision": e.kind == A.COLLISION, "sharing": s.keyHash != qhash,
                        "kind": e.kind, "keys": e.keys, "topic": e.topic, "queueId": e.queue_id,
                        "queueOffset": e.queue_offset})
    return {"file": f.name, "key": key, "keyHash": qhash, "slot": res.slot, "head": res.head,
            "stop": res.stop, "broken": res.broken, "cycleTo": res.cycle_to, "entries": entries,
            "hits": sum(e["hit"] for e in entries), "collisions": sum(e["collision"] for e in entries),
            "sharing": sum(e["sharing"] for e in entries)}


def cmd_chain(store, args) -> int:
    key = index_key(args.topic, args.key)
    out = [chain_json(f, store, key) for f in index_files(store, args.file)]
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    lines = [f"key {safe(key)!r}  keyHash {index_key_hash(key)}"]
    for o in out:
        lines += ["", f"{o['file']}  slot {o['slot']}  head entry {o['head']}  {len(o['entries'])} entries, "
                      f"{o['hits']} hit(s), {o['collisions']} collision(s), {o['sharing']} sharing the slot; "
                      f"ends: {o['stop']}"]
        if o["entries"]:
            rows = [[e["entry"], e["keyHash"], e["commitLogOffset"], e["timeDiff"], e["prevIndex"],
                     "hit" if e["hit"] else "", e["kind"], " | ".join(e["keys"]) or "-"] for e in o["entries"]]
            lines.append(table(rows, ["ENTRY", "KEYHASH", "PHYOFFSET", "TIMEDIFF", "PREV", "QUERY", "KIND", "KEYS"]))
    print("\n".join(lines))
    return 0


# ---- fill ---------------------------------------------------------------------------------------
def fill_json(store, cancel: CancelToken | None = None) -> dict:
    fill = run(A.store_fill_task(store, cancel=cancel))
    return {
        "commitlog": [{"file": c.name, "fileFromOffset": c.file_from_offset, "fileSize": c.file_size,
                       "wrotePosition": c.wrote_position, "usedBytes": c.message_bytes, "messages": c.message_count,
                       "dataEnd": c.data_end, "blankAt": c.blank_at, "blankTail": c.blank_tail,
                       "damagedBytes": c.segments.bytes_by_id().get(A.DAMAGED, 0), "fill": c.fill, "stop": c.stop,
                       "topicBytes": c.topic_bytes()} for c in fill.commitlog],
        "consumeQueues": [{"topic": q.topic, "queueId": q.queue_id, "file": q.name,
                           "firstQueueOffset": q.first_queue_offset, "unitsPerFile": q.units_per_file,
                           "units": q.written_units, "validUnits": q.valid_units, "fillerUnits": q.filler_units,
                           "fill": q.fill} for q in fill.queues],
        # indexCount is the header's; entries and the fills are clamped to the file's capacity
        "index": [{"file": x.name, "indexCount": x.header_index_count, "indexNum": x.index_num,
                   "entries": x.entries_used, "slotNum": x.slot_num, "slotsUsed": x.slots_used,
                   "hashSlotCount": x.hash_slot_count, "entryFill": x.entry_fill, "slotFill": x.slot_fill,
                   "loadFactor": x.load_factor, "headerBeyondCapacity": x.beyond_capacity} for x in fill.index],
    }


def cmd_fill(store, args) -> int:
    cancel = CancelToken()
    try:
        with cancel_on_sigint(cancel):
            out = fill_json(store, cancel)
    except Cancelled:
        return cancelled("fill")
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
        return 0
    pct = lambda x: f"{100 * x:.1f}%"   # noqa: E731
    print(table([[c["file"], c["fileSize"], c["wrotePosition"], c["usedBytes"], c["messages"], c["blankTail"],
                      c["damagedBytes"], pct(c["fill"])] for c in out["commitlog"]],
                    ["COMMITLOG FILE", "SIZE", "WROTE", "USED", "MESSAGES", "BLANK TAIL", "DAMAGED", "FILL"]))
    print()
    print(table([[q["topic"], q["queueId"], q["file"], q["units"], q["unitsPerFile"], q["fillerUnits"],
                      pct(q["fill"])] for q in out["consumeQueues"]],
                    ["TOPIC", "QUEUE", "CQ FILE", "UNITS", "PER FILE", "FILLERS", "FILL"]))
    print()
    print(table([[x["file"], x["indexCount"], x["indexNum"], x["slotsUsed"], x["slotNum"],
                  pct(x["entryFill"]) + ("*" if x["headerBeyondCapacity"] else ""), pct(x["slotFill"])]
                 for x in out["index"]],
                ["INDEX FILE", "INDEX COUNT", "INDEX NUM", "SLOTS USED", "SLOT NUM", "ENTRY FILL", "SLOT FILL"]))
    for x in out["index"]:
        if x["headerBeyondCapacity"]:
            print(f"* {x['file']}: the header's indexCount {x['indexCount']:,} is beyond the file's capacity "
                  f"(maxIndexNum {x['indexNum']:,}): a forged or damaged header; fill shown at the capacity")
    sys.stdout.flush()
    return 0
