"""Shared by the internals tests: oracles computed straight from the conformance manifests
(never from the engine or gui code under test) and screenshots."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"

def shot(widget, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    assert widget.grab().save(str(path)), path
    return path


# ---- oracles from the manifest --------------------------------------------------------------
def index_oracle(mf: dict, name: str) -> dict:
    """For index file `name`: slot -> chain (entry numbers, newest first), walked from the
    manifest's nonEmptySlots through its entries' prevIndex."""
    x = next(f for f in mf["index_files"] if f["name"] == name)
    entries = {e[0]: e for e in x["entries"]}          # index -> [index, keyHash, phy, diff, prev]
    chains = {}
    for slot, head in x["nonEmptySlots"]:
        seen, n, chain = set(), head, []
        while n > 0 and n in entries and n not in seen:
            seen.add(n)
            chain.append(n)
            n = entries[n][4]
        chains[slot] = chain
    return {"file": x, "entries": entries, "chains": chains}


def chain_length_counts(mf: dict, name: str) -> dict[int, int]:
    o = index_oracle(mf, name)
    slots = mf["config"]["maxHashSlotNum"]
    c = Counter(len(ch) for ch in o["chains"].values())
    c[0] += slots - len(o["chains"])
    return dict(c)


def commitlog_oracle(mf: dict) -> list[dict]:
    """Per commitlog file: messages, their bytes, bytes per topic, blank tail, write position."""
    size = mf["config"]["mappedFileSizeCommitLog"]
    blanks = {b["file"]: b for b in mf["commitlog"]["end_of_file_blanks"]}
    out = []
    for f in mf["after_reopen"]["commitlog_files_after_recovery"]:
        start = f["fileFromOffset"]
        msgs = [m for m in mf["messages"] if start <= m["phyOffset"] < start + size]
        topics = Counter()
        for m in msgs:
            topics[m["topic"]] += m["totalSize"]
        b = blanks.get(f["name"])
        out.append({"name": f["name"], "wrotePosition": f["wrotePosition"], "messages": len(msgs),
                    "messageBytes": sum(m["totalSize"] for m in msgs), "topicBytes": dict(topics),
                    "blankTail": b["totalSize"] if b else 0, "blankAt": (b["phyOffset"] - start) if b else None,
                    "firstMessage": msgs[0]["phyOffset"] if msgs else None, "msgs": msgs})
    return out
