"""`rmqstore slots`, `chain` and `fill` on the conformance stores (RocketMQ 4.9.7 `small` and
`default`, 5.3.3 `v5`; small and v5 use a 64-slot / 256-entry index, default the 5,000,000-slot one).

Every number is checked against a direct walk of the raw files written here with struct and
numpy from the byte layout in STORE_FORMAT.md, never with the engine's own code: index header
40 bytes, slots i32, entries of 20 bytes (keyHash i32, phyOffset i64, timeDiff i32, prevIndex i32),
all big-endian; commitlog records TOTALSIZE i32 + MAGICCODE i32; ConsumeQueue units of 20 bytes."""
from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import manifest, unpack
from engine.cli.app import main as cli_main

MAGIC_V1, MAGIC_V2, MAGIC_BLANK = -626843481, -626843477, -875286124
FILLER_SIZE = 0x7FFFFFFF
STORES = ["small", "v5"]


def cli_json(capsys, *args):
    capsys.readouterr()
    rc = cli_main([*map(str, args), "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


# ---- raw walks ------------------------------------------------------------------------------------
def java_key_hash(s: str) -> int:
    """abs(String.hashCode) over UTF-16 units; -2^31 gives 0 (STORE_FORMAT §9.3)."""
    h = 0
    for (u,) in struct.iter_unpack(">H", s.encode("utf-16-be")):
        h = (31 * h + u) & 0xFFFFFFFF
    h = h - (1 << 32) if h & 0x80000000 else h
    return 0 if h == -(1 << 31) else abs(h)


class RawIndex:
    def __init__(self, path: Path, slot_num: int, index_num: int):
        self.name, self.data = path.name, path.read_bytes()
        self.slot_num, self.index_num = slot_num, index_num
        (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, self.hash_slot_count,
         self.index_count) = struct.unpack_from(">qqqqii", self.data, 0)
        self.slots = np.frombuffer(self.data, ">i4", slot_num, 40)
        self.limit = min(self.index_count, index_num - 1)       # entry numbers 1..limit can be walked

    def entry(self, n: int) -> tuple[int, int, int, int]:
        return struct.unpack_from(">iqii", self.data, 40 + 4 * self.slot_num + 20 * n)

    def chain(self, slot: int) -> list[int]:
        n, seen, out = int(self.slots[slot]), set(), []
        while 0 < n <= self.limit and n not in seen:
            seen.add(n)
            out.append(n)
            n = self.entry(n)[3]
        return out


def raw_index_files(root: Path, mf: dict) -> list[RawIndex]:
    cfg = mf["config"]
    return [RawIndex(p, cfg["maxHashSlotNum"], cfg["maxIndexNum"])
            for p in sorted((root / "index").iterdir()) if p.name.isdigit()]


# ---- slots ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", STORES + ["default"])
def test_slots_match_a_raw_walk(capsys, name):
    root, mf = unpack(name), manifest(name)
    got = cli_json(capsys, "slots", root)
    raw = raw_index_files(root, mf)
    assert [g["file"] for g in got] == [r.name for r in raw] and raw
    for g, r in zip(got, raw):
        used = np.flatnonzero(r.slots)
        lengths = {int(s): len(r.chain(int(s))) for s in used}
        hist = np.bincount(list(lengths.values()) + [0] * (r.slot_num - len(used)))
        assert (g["slotNum"], g["indexNum"]) == (r.slot_num, r.index_num)
        assert g["indexCount"] == r.index_count and g["hashSlotCount"] == r.hash_slot_count
        assert g["slotsUsed"] == len(used)
        assert g["maxChain"] == max(lengths.values(), default=0)
        assert g["chainHistogram"] == hist.tolist()
        assert g["loadFactor"] == pytest.approx((r.index_count - 1) / r.slot_num)
        assert (g["beginTimestamp"], g["endTimestamp"]) == (r.begin_ts, r.end_ts)
        assert g["cycles"] == 0
        for c in g["longestChains"]:
            assert lengths[c["slot"]] == c["length"]


def test_slots_of_one_file_and_the_table(capsys):
    root, mf = unpack("small"), manifest("small")
    raw = raw_index_files(root, mf)[3]
    (one,) = cli_json(capsys, "slots", root, "--file", raw.name)
    assert one["file"] == raw.name and one["slotsUsed"] == np.count_nonzero(raw.slots)
    assert cli_main(["slots", str(root), "--file", raw.name]) == 0
    text = capsys.readouterr().out
    assert "MAX CHAIN" in text and raw.name in text and "chain length: slots" in text


# ---- chain ----------------------------------------------------------------------------------------
QUERY_KEYS = {"Aa", "BB", "AaAa", "BBBB", "shared-key", "order-dup-001", "mk-1", "dupin"}


def queries(mf: dict) -> list[tuple[str, str]]:
    qs = {(m["topic"], k) for m in mf["messages"] for k in (m.get("keys") or "").split() if k in QUERY_KEYS}
    qs |= {("TopicTest", "BB"), ("TopicTest", "Aa"), ("TopicTest", "no-such-key")}
    return sorted(qs)


def message_keys(m: dict) -> list[str]:
    return [f"{m['topic']}#{k}" for k in ([m["uniqKey"]] if m.get("uniqKey") else []) + (m.get("keys") or "").split()]


@pytest.mark.parametrize("name", STORES)
def test_chain_matches_a_raw_walk(capsys, name):
    root, mf = unpack(name), manifest(name)
    raw = raw_index_files(root, mf)
    msgs = {m["phyOffset"]: m for m in mf["messages"]}
    seen_collision = seen_hit = 0
    for topic, key in queries(mf):
        query = f"{topic}#{key}"
        qhash = java_key_hash(query)
        got = cli_json(capsys, "chain", root, topic, key)
        assert [g["file"] for g in got] == [r.name for r in raw]
        for g, r in zip(got, raw):
            slot = qhash % r.slot_num
            chain = r.chain(slot)
            assert g["slot"] == slot and g["keyHash"] == qhash and g["head"] == int(r.slots[slot])
            entries = [r.entry(n) for n in chain]
            assert [(e["entry"], e["keyHash"], e["commitLogOffset"], e["timeDiff"], e["prevIndex"])
                    for e in g["entries"]] == [(n, *x) for n, x in zip(chain, entries)]
            # the entry's own keys: those of its message that hash to its keyHash
            keysets = [tuple(k for k in message_keys(msgs[x[1]]) if java_key_hash(k) == x[0]) if x[1] in msgs else ()
                       for x in entries]
            alive = True
            for e, x, ks in zip(g["entries"], entries, keysets):
                alive = alive and x[2] >= 0
                assert e["hit"] == (alive and x[0] == qhash), (query, e)
                assert e["sharing"] == (x[0] != qhash)
                same = {k for y, k in zip(entries, keysets) if y[0] == x[0] and k}
                # against the query: its hash, another key; elsewhere: two keys share one hash
                true_collision = query not in ks if x[0] == qhash else len(same) > 1
                assert e["collision"] == bool(ks and true_collision), (query, e, same)
                seen_collision += e["collision"]
                seen_hit += e["hit"] and query in ks
    assert seen_collision and seen_hit      # the crafted equal-hash keys (Aa / BB) do collide


def test_chain_table_names_hits_and_collisions(capsys):
    root = unpack("small")
    assert cli_main(["chain", str(root), "TopicTest", "BB"]) == 0
    text = capsys.readouterr().out
    assert "keyHash" in text and "collision" in text and "KEYS" in text


# ---- fill -----------------------------------------------------------------------------------------
def raw_commitlog(root: Path) -> list[dict]:
    out = []
    for p in sorted((root / "commitlog").iterdir()):
        data, pos, messages, used, blank = p.read_bytes(), 0, 0, 0, 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">ii", data, pos)
            if magic == MAGIC_BLANK:
                blank = len(data) - pos
                break
            if magic not in (MAGIC_V1, MAGIC_V2) or total <= 0:
                break
            messages, used, pos = messages + 1, used + total, pos + total
        out.append({"file": p.name, "fileSize": len(data), "messages": messages, "usedBytes": used, "blankTail": blank})
    return out


def raw_queue_files(root: Path) -> dict:
    out = {}
    for p in sorted((root / "consumequeue").glob("*/*/*")):
        u = np.frombuffer(p.read_bytes(), dtype=[("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")])
        zero = np.flatnonzero((u["phy"] == 0) & (u["size"] == 0) & (u["tags"] == 0))
        n = int(zero[0]) if zero.size else len(u)
        filler = int(np.count_nonzero((u["phy"][:n] == 0) & (u["size"][:n] == FILLER_SIZE)))
        out[(p.parent.parent.name, int(p.parent.name), p.name)] = {"units": n, "fillerUnits": filler,
                                                                   "unitsPerFile": len(u)}
    return out


@pytest.mark.parametrize("name", STORES)
def test_fill_matches_a_raw_walk(capsys, name):
    root, mf = unpack(name), manifest(name)
    got = cli_json(capsys, "fill", root)
    cl = raw_commitlog(root)
    assert [{k: c[k] for k in ("file", "fileSize", "messages", "usedBytes", "blankTail")} for c in got["commitlog"]] == cl
    assert sum(c["messages"] for c in got["commitlog"]) == len(mf["messages"])
    cq = raw_queue_files(root)
    assert {(q["topic"], q["queueId"], q["file"]): {"units": q["units"], "fillerUnits": q["fillerUnits"],
                                                    "unitsPerFile": q["unitsPerFile"]}
            for q in got["consumeQueues"]} == cq
    raw = raw_index_files(root, mf)
    assert [(x["file"], x["indexCount"], x["indexNum"], x["slotsUsed"]) for x in got["index"]] == \
        [(r.name, r.index_count, r.index_num, int(np.count_nonzero(r.slots))) for r in raw]
    assert cli_main(["fill", str(root)]) == 0
    text = capsys.readouterr().out
    assert "COMMITLOG FILE" in text and "CQ FILE" in text and "INDEX FILE" in text


# ---- read-only and bad input ----------------------------------------------------------------------
def snapshot(root: Path) -> dict:
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_never_a_byte_written(capsys, fixture_copy):
    root = fixture_copy("small")
    before = snapshot(root)
    for args in (["slots"], ["chain", "TopicTest", "Aa"], ["fill"]):
        assert cli_main([args[0], str(root), *args[1:]]) == 0
        assert cli_main([args[0], str(root), *args[1:], "--json"]) == 0
    capsys.readouterr()
    assert snapshot(root) == before


@pytest.mark.parametrize("args, says", [
    (["slots", "/no/such/store"], "no such folder"),
    (["fill", "/no/such/store"], "no such folder"),
    (["chain", "/no/such/store", "TopicTest", "k"], "no such folder"),
    (["slots", "{small}", "--file", "20990101000000000"], "no index file '20990101000000000'"),
    (["chain", "{small}", "TopicTest", "k", "--file", "nope"], "no index file 'nope'"),
])
def test_bad_input_is_one_line_and_exit_2(args, says):
    args = [a.replace("{small}", str(unpack("small"))) for a in args]
    p = subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and p.stdout == ""
    assert says in p.stderr and len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
