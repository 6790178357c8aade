"""The DLedger fixture (RocketMQ 4.9.7 in DLedger mode, DLedger 0.3.1.2) read through the same
MessageStore, getMessage, queries and check as a classic store, against what the real store
returned (tests/fixtures/README_DLEDGER.md); damaged and rearranged copies of it."""
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys

import pytest

from conftest import manifest, unpack
from engine import MessageStore, StoreConfig
from engine.analysis.check import check_store
from engine.errors import ConfigError, NotAStoreError, ReadOnlyStoreError, StoreError
from engine.format import dledger_layout as L
from engine.store.index_file import LONG_MAX

NAME = "dledger"


@pytest.fixture(scope="module")
def store():
    s = MessageStore.open(unpack(NAME))
    yield s
    s.close()


@pytest.fixture(scope="module")
def m():
    return manifest(NAME)


def test_layout_matches_the_manifest_constants(m):
    c = m["config"]
    assert (L.INDEX_UNIT_SIZE, L.ENTRY_HEADER_SIZE, L.ENTRY_BODY_OFFSET, L.ENTRY_POS_OFFSET, L.ENTRY_MAGIC,
            L.BLANK_MAGIC, L.MIN_BLANK_LEN, L.INDEX_FILE_SIZE) == (
        c["dledger_INDEX_UNIT_SIZE"], c["dledger_entry_HEADER_SIZE"], c["dledger_entry_BODY_OFFSET"],
        c["dledger_entry_POS_OFFSET"], c["dledger_CURRENT_MAGIC"], c["dledger_BLANK_MAGIC_CODE"],
        c["dledger_MIN_BLANK_LEN"], c["dledger_mappedFileSizeForEntryIndex"])
    texts = m["before_reopen"]["dledger_text_files"]
    cp = L.LedgerCheckpoint.parse(texts["dledger-n0/checkpoint"])
    term = L.TermFile.parse(texts["dledger-n0/currterm"])
    parsed = m["before_reopen"]
    assert (cp.endIndex, cp.committedIndex) == (int(parsed["dledger_checkpoint_parsed"]["endIndex"]),
                                                int(parsed["dledger_checkpoint_parsed"]["committedIndex"]))
    assert (term.currTerm, term.voteLeader) == (int(parsed["dledger_currterm_parsed"]["currTerm"]),
                                                parsed["dledger_currterm_parsed"]["voteLeader"])
    assert L.LedgerCheckpoint.parse("# c\nendIndex=x\n").endIndex is None
    assert L.TermFile.parse("currTerm=3\nvoteLeader=\n") == L.TermFile(3, None)


def test_bounds_and_ledger_state(store, m):
    mm = m["min_max_offsets"]
    assert (store.min_offset, store.max_offset) == (mm["minPhyOffset"], mm["maxPhyOffset"])
    d = store.info()["dledger"]
    want = m["reopen_states"]["after_leader_and_dispatch"]
    assert (d["ledgerBeginIndex"], d["ledgerEndIndex"], d["ledgerEndTerm"], d["committedIndex"], d["committedPos"],
            d["writePos"], d["currTerm"], d["voteLeader"]) == (
        want["ledgerBeginIndex"], want["ledgerEndIndex"], want["ledgerEndTerm"], want["committedIndex"],
        want["committedPos"], want["writePos"], want["currTerm"], want["leaderId"])
    assert d["selfId"] == m["config"]["dLegerSelfId"] and d["folder"] == "dledger-n0"
    assert d["checkpoint"] == {"endIndex": 1499, "committedIndex": 1499}
    files = store.info()["commitlog"]["files"]
    assert [(f["name"], f["wrotePosition"]) for f in files] == [
        (f["name"], f["wrotePosition"]) for f in m["dledger_files"]["data"]]


def test_every_message_field_by_field(store, m):
    mine = {x.commitLogOffset: x for x in store.iter_messages()}
    expected = m["messages"] + m["messages_not_in_consume_queue"]
    assert len(mine) == len(expected) == m["summary"]["dledgerEntries"]
    for e in expected:
        x = mine[e["commitLogOffset"]]
        for f in ("topic", "queueId", "queueOffset", "storeSize", "bodyCRC", "flag", "sysFlag", "bornTimestamp",
                  "storeTimestamp", "reconsumeTimes", "preparedTransactionOffset", "msgId", "keys", "tags",
                  "properties"):
            assert getattr(x, f) == e[f], (e["commitLogOffset"], f)
        assert x.physicalOffsetField == e["commitLogOffset"]
        assert len(x.body) == e["bodyLength"] and hashlib.sha256(x.body).hexdigest() == e["bodySha256"]
        if "dledgerIndex" in e:
            assert store.dledger_entry(x.commitLogOffset)["index"] == e["dledgerIndex"]


def test_entries_and_index_records(store, m):
    cl = store.commitlog
    entries = m["dledger_entries"]
    seen = [h for kind, _, h in cl.iter_entries() if kind == "entry"]
    assert len(seen) == len(entries)
    for h, e in zip(seen, entries):
        assert (h.index, h.term, h.pos, h.size, h.magic, h.channel, h.chainCrc, h.bodyCrc, h.bodySize) == (
            e["index"], e["term"], e["pos"], e["size"], e["magic"], e["channel"], e["chainCrc"], e["bodyCrc"],
            e["bodyLength"])
        assert cl.index_record(h.index).to_json() == e["indexRecord"]
        assert store.dledger_entry(e["rmqPhyOffset"]) == h.to_json()
    assert store.dledger_entry(entries[5]["rmqPhyOffset"] + 1) is None  # not a message start
    assert cl.index_record(len(entries)).to_json() == {"magic": 0, "pos": 0, "size": 0, "index": 0, "term": 0}


def test_walk_skips_headers_and_ends_files_at_the_blanks(store, m):
    raw = m["dledger_raw_check"]
    blanks = [off for off, r in store.walk() if r.status.value == "end-of-file"]
    assert blanks == [b["absolutePos"] for b in raw["blanks"]] and len(blanks) == 30
    offs = [off for off, r in store.walk() if r.message is not None]
    assert offs == [e["rmqPhyOffset"] for e in m["dledger_entries"]]
    # a walk from the middle starts at the first message at or after the offset
    mid = m["dledger_entries"][700]["rmqPhyOffset"]
    part = [off for off, r in store.walk(mid - 10, mid + 1) if r.message is not None]
    assert part == [mid]


def test_consume_queue_units_point_at_entry_bodies(store, m):
    for q in m["consume_queues"]:
        cq = store.find_queue(q["topic"], q["queueId"])
        if cq is None:
            assert q["maxOffset"] == 0
            continue
        assert (cq.min_offset, cq.max_offset) == (q["minOffset"], q["maxOffset"])
        units = cq.units(q["minOffset"], q["maxOffset"])
        got = [[q["minOffset"] + i, int(u["commitLogOffset"]), int(u["size"]), int(u["tagsCode"]),
                store.dledger_entry(int(u["commitLogOffset"]))["index"]] for i, u in enumerate(units)]
        assert got == q["units"], (q["topic"], q["queueId"])


def test_get_message_calls(store, m):
    from engine.store import page
    assert (page.KERNEL is None) == (os.environ.get("RMQSTORE_PURE_PYTHON") == "1")  # both paths are tested
    for c in m["get_message_calls"] + m["get_message_edge_calls"]:
        r = store.get_message(c["topic"], c["queueId"], c["offset"], c["maxMsgNums"], broker=True)
        ref = store._get_message_py(c["topic"], c["queueId"], c["offset"], c["maxMsgNums"], broker=True)
        assert list(r.messages) == list(ref.messages) and r.nextBeginOffset == ref.nextBeginOffset
        got = (r.status, r.nextBeginOffset, r.minOffset, r.maxOffset, len(r.messages))
        want = (c["status"], c["nextBeginOffset"], c["minOffset"], c["maxOffset"], c["messageCount"])
        assert got == want, c
        if "commitLogOffsets" in c:
            assert [x.commitLogOffset for x in r.messages] == c["commitLogOffsets"], c
            assert [x.queueOffset for x in r.messages] == c["queueOffsets"], c
            assert r.bufferTotalSize == c["bufferTotalSize"], c
    page = store.get_message("TopicTest", 1, 0, 500)  # ours: across CQ files, columns too
    assert len(page.messages) == 127
    assert page.messages.columns["commitLogOffset"].tolist() == [x.commitLogOffset for x in page.messages]
    assert bytes(page.messages.body(3)) == page.messages[3].body


def test_key_queries_and_msgids(store, m):
    for q in m["key_queries"]:
        r = store.query_message(q["topic"], q["key"], 0, LONG_MAX, q["maxNum"], raw=True)
        assert sorted(r.offsets) == q["commitLogOffsets"], (q["topic"], q["key"])
        assert len(r.messages) == len(r.offsets)
        if r.offsets:
            assert (r.indexLastUpdateTimestamp, r.indexLastUpdatePhyoffset) == (
                q["indexLastUpdateTimestamp"], q["indexLastUpdatePhyoffset"])
    for e in m["messages"][::25] + m["messages_not_in_consume_queue"][::25]:
        kind, found = store.lookup_id(e["msgId"])
        assert kind == "offset" and [x.commitLogOffset for x in found] == [e["commitLogOffset"]]
    e = next(x for x in m["messages"] if x["topic"] == "TopicTest")
    assert [x.commitLogOffset for x in store.query_uniq("TopicTest", e["properties"]["UNIQ_KEY"])] == \
        [e["commitLogOffset"]]


def test_index_files(store, m):
    mine = {f.name: f.header.to_json() for f in store.index.files}
    for x in m["index_files"]:
        h = mine[x["name"].rsplit("/", 1)[-1]]
        assert (h["beginTimestamp"], h["endTimestamp"], h["beginPhyOffset"], h["endPhyOffset"], h["hashSlotCount"],
                h["indexCount"]) == (x["beginTimestamp"], x["endTimestamp"], x["beginPhyOffset"], x["endPhyOffset"],
                                     x["hashSlotCount"], x["indexCount"])


def test_check_is_clean(store):
    r = check_store(store)
    assert r["ok"], r["problems"][:5]
    assert (r["messages"], r["cqUnits"], r["dledgerEntries"]) == (1500, 1342, 1500)


def _files_digest(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            st = os.stat(p)
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 22), b""):
                    h.update(chunk)
            out[p] = (st.st_size, st.st_mtime_ns, h.hexdigest())
    return out


def test_read_only_open_writes_nothing_and_writes_are_refused(fixture_copy):
    root = fixture_copy(NAME)
    before = _files_digest(root)
    with MessageStore.open(root) as s:
        check_store(s)
        s.get_message("TopicTest", 0, 0, 64)
    with pytest.raises(ReadOnlyStoreError, match="read-only"):
        MessageStore.open(root, read_only=False)
    from engine.store.rebuild import rebuild_task
    from engine.tasks import run
    with pytest.raises(ReadOnlyStoreError):
        run(rebuild_task(root, None))
    assert _files_digest(root) == before


def _damage(root, rel, at, data):
    with open(root / rel, "r+b") as fh:
        fh.seek(at)
        fh.write(data)


def test_check_finds_damaged_entries_index_records_and_blanks(fixture_copy, m):
    root = fixture_copy(NAME)
    e = m["dledger_entries"][10]
    idx = "dledger-n0/index/00000000000000000000"
    _damage(root, idx, e["index"] * 32 + 24, struct.pack(">q", 7))             # term of index record 10
    b = m["dledger_raw_check"]["blanks"][2]
    _damage(root, f"dledger-n0/data/{b['file']}", b["relativePos"] + 4, struct.pack(">i", 5))   # blank length
    _damage(root, f"dledger-n0/data/{b['file']}", b["relativePos"] + 9, b"\x01")                # blank not zero
    with MessageStore.open(root, tolerant=True) as s:
        r = check_store(s)
    kinds = {(p["kind"], p["offset"]) for p in r["problems"]}
    assert ("dledger-index", e["index"] * 32) in kinds
    assert ("dledger-blank", b["absolutePos"]) in kinds
    assert ("dledger-blank", b["absolutePos"] + 9) in kinds
    assert not r["ok"]


def test_torn_entry_ends_the_ledger_like_dledger_recovery(fixture_copy, m):
    """An entry whose pos field is wrong (a torn write): DLedger's recovery ends the ledger
    before it; the entries after it are not read, and check says so."""
    root = fixture_copy(NAME)
    last = m["dledger_entries"][-3]
    f = 0
    for d in m["dledger_files"]["data"]:
        if d["fileFromOffset"] <= last["pos"]:
            f = d
    _damage(root, f"dledger-n0/data/{f['name']}", last["pos"] - f["fileFromOffset"] + 24, struct.pack(">q", 1))
    with MessageStore.open(root, tolerant=True) as s:
        assert s.max_offset == last["pos"]
        d = s.info()["dledger"]
        assert d["ledgerEndIndex"] == last["index"] - 1 and "pos field" in d["stopReason"]
        assert d["committedIndex"] == last["index"] - 1     # the checkpoint's 1499, clamped to the ledger end
        assert s.look_message_by_offset(m["dledger_entries"][-1]["rmqPhyOffset"]) is None
        r = check_store(s)
    assert any(p["kind"] == "dledger-tail" and p["offset"] == last["pos"] for p in r["problems"])
    assert any(p["kind"] == "dledger-checkpoint" and "endIndex 1499" in p["detail"] for p in r["problems"])


def _mixed_store(fixture_copy):
    """The DLedger fixture as a broker switched to DLedger over an old commitlog leaves it: the
    `small` fixture's 12 commitlog files (sealed with a RocketMQ blank, as DLedgerCommitLog.recover
    does) below, the DLedger log moved up by D = 12 x 65536 (file names, entry pos fields, the
    messages' PHYSICALOFFSET, index records, CQ units and IndexFile entries all + D)."""
    import numpy as np
    from engine.format.cq_unit import CQ_UNIT_DTYPE
    from engine.format.index_layout import INDEX_ENTRY_DTYPE
    from engine.format.record import BLANK_MAGIC
    root = fixture_copy(NAME)
    small = unpack("small")
    shutil.copytree(small / "commitlog", root / "commitlog")
    old = sorted(os.listdir(root / "commitlog"))
    shift = len(old) * 65536
    end = manifest("small")["recovery_result"]["recovered_commitlog_max_offset"]
    _damage(root, f"commitlog/{old[-1]}", end - int(old[-1]), struct.pack(">ii", shift - end, BLANK_MAGIC))
    data = root / "dledger-n0" / "data"
    for name in sorted(os.listdir(data), reverse=True):
        p = data / name
        buf = bytearray(p.read_bytes())
        rel = 0
        while rel + 8 <= len(buf):
            magic, size = struct.unpack_from(">ii", buf, rel)
            if magic != 1 or size == 0:
                break
            for at in (rel + 24, rel + 48 + 28):  # the entry's pos, the message's PHYSICALOFFSET
                struct.pack_into(">q", buf, at, struct.unpack_from(">q", buf, at)[0] + shift)
            rel += size
        p.unlink()
        (data / f"{int(name) + shift:020d}").write_bytes(bytes(buf))
    idx = root / "dledger-n0" / "index" / "00000000000000000000"
    with open(idx, "r+b") as fh:
        recs = np.frombuffer(bytearray(fh.read(1500 * 32)), L.INDEX_DTYPE).copy()
        recs["pos"] += shift
        fh.seek(0)
        fh.write(recs.tobytes())
    for d, _, names in os.walk(root / "consumequeue"):
        for n in names:
            p = os.path.join(d, n)
            u = np.frombuffer(bytearray(open(p, "rb").read()), CQ_UNIT_DTYPE).copy()
            u["commitLogOffset"][u["size"] > 0] += shift
            open(p, "wb").write(u.tobytes())
    for n in os.listdir(root / "index"):
        p = root / "index" / n
        b = bytearray(p.read_bytes())
        for at in (16, 24):
            struct.pack_into(">q", b, at, struct.unpack_from(">q", b, at)[0] + shift)
        count = struct.unpack_from(">i", b, 36)[0]
        e = np.frombuffer(b, INDEX_ENTRY_DTYPE, count - 1, 40 + 64 * 4 + 20).copy()
        e["commitLogOffset"] += shift
        b[40 + 64 * 4 + 20:40 + 64 * 4 + 20 * count] = e.tobytes()
        p.write_bytes(bytes(b))
    return root, shift, old


def test_mixed_store_reads_the_old_commitlog_below_the_dledger_log(fixture_copy, m):
    root, shift, old = _mixed_store(fixture_copy)
    small = manifest("small")
    with MessageStore.open(root, tolerant=True) as s:
        d = s.info()["dledger"]
        assert d["dividedCommitlogOffset"] == shift and d["oldCommitlogFiles"] == old
        assert (s.min_offset, s.max_offset) == (0, m["min_max_offsets"]["maxPhyOffset"] + shift)
        assert d["ledgerEndIndex"] == 1499 and d["committedPos"] == s.max_offset
        offs = [off for off, r in s.walk() if r.message is not None]
        assert offs == [x["phyOffset"] for x in small["messages"]] + [e["rmqPhyOffset"] + shift
                                                                      for e in m["dledger_entries"]]
        x = small["messages"][100]
        got = s.look_message_by_offset(x["phyOffset"])
        assert (got.topic, got.msgId, got.storeSize) == (x["topic"], x["msgId"], x["totalSize"])
        assert s.dledger_entry(x["phyOffset"]) is None
        e = m["dledger_entries"][700]
        assert s.dledger_entry(e["rmqPhyOffset"] + shift)["index"] == 700
        q = next(q for q in m["consume_queues"] if (q["topic"], q["queueId"]) == ("TopicTest", 2))
        r = s.get_message("TopicTest", 2, 0, 500)
        assert [x.commitLogOffset for x in r.messages] == [u[1] + shift for u in q["units"]]
        c = m["get_message_calls"][3]
        r = s.get_message(c["topic"], c["queueId"], c["offset"], c["maxMsgNums"], broker=True)
        assert (r.status, r.nextBeginOffset, len(r.messages)) == (c["status"], c["nextBeginOffset"], c["messageCount"])
        kq = next(k for k in m["key_queries"] if k["commitLogOffsets"])
        raw = s.query_message(kq["topic"], kq["key"], 0, LONG_MAX, kq["maxNum"], raw=True)
        assert sorted(raw.offsets) == [o + shift for o in kq["commitLogOffsets"]]
        r = check_store(s)
    kinds = {p["kind"] for p in r["problems"]}
    assert not {k for k in kinds if k.startswith("dledger") or k.startswith("commitlog")}, r["problems"][:3]
    from engine.scan.api import run_job
    with MessageStore.open(root) as s:
        rows = run_job(s, "topic-stats", engine="local").rows
    assert sum(x["messages"] for x in rows) == len(small["messages"]) + 1500
    from engine.analysis import DAMAGED, commitlog_fill
    with MessageStore.open(root) as s:
        fills = commitlog_fill(s)
    assert [c.message_count for c in fills[len(old):]] == [d["entries"] for d in m["dledger_raw_check"]["data_files"]]
    assert sum(c.message_count for c in fills[:len(old)]) == len(small["messages"])
    assert not any(c.segments.bytes_by_id().get(DAMAGED, 0) for c in fills)


def test_an_old_file_overlapping_the_dledger_log_is_a_warning(fixture_copy):
    root = fixture_copy(NAME)
    (root / "commitlog").mkdir()
    with open(root / "commitlog" / "00000000000000000000", "wb") as fh:
        fh.truncate(65536)
    with MessageStore.open(root) as s:
        assert s.commitlog.old_files == [] and s.max_offset == 1992913
        assert any("reaching past the first DLedger file" in w for w in s.info()["warnings"])


def test_self_id_and_data_path_settings(fixture_copy, m):
    root = fixture_copy(NAME)
    shutil.copytree(root / "dledger-n0", root / "dledger-n1")
    with pytest.raises(ConfigError, match="dLegerSelfId"):
        MessageStore.open(root)
    with MessageStore.open(root, StoreConfig.from_mapping({"dLegerSelfId": "n1"})) as s:
        assert s.info()["dledger"]["selfId"] == "n1" and s.max_offset == m["min_max_offsets"]["maxPhyOffset"]
    shutil.rmtree(root / "dledger-n1")
    os.rename(root / "dledger-n0" / "data", root / "entries")
    cfg = StoreConfig.from_mapping({"storePathDLedgerCommitLog": str(root / "entries")})
    with MessageStore.open(root, cfg) as s:
        assert s.max_offset == m["min_max_offsets"]["maxPhyOffset"] and len(s.commitlog.files) == 31
    with MessageStore.open(root) as s:   # not set: the folder is found by its entries
        assert s.max_offset == m["min_max_offsets"]["maxPhyOffset"] and len(s.commitlog.files) == 31
        assert "found in entries/" in s.info()["dledger"]["foundBy"]
    with pytest.raises(ConfigError, match="outside the store"):
        MessageStore.open(root, StoreConfig.from_mapping({"storePathDLedgerCommitLog": "/tmp"}))


def _cli(*args):
    r = subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def test_cli_info_get_and_refusals(m):
    root = str(unpack(NAME))
    rc, out, _ = _cli("info", root)
    assert rc == 0 and "dledger    dledger-n0 (selfId n0)  term 0  voteLeader n0  entries [0, 1499]" in out
    assert "offsets [0, 1992913)" in out
    rc, out, _ = _cli("get", "--json", root, "Orders_v2-EU", "2", "3", "--count", "2")
    msgs = json.loads(out)["messages"]
    by_off = {e["rmqPhyOffset"]: e for e in m["dledger_entries"]}
    for x in msgs:
        e = by_off[x["commitLogOffset"]]
        assert {k: x["dledger"][k] for k in ("index", "term", "pos")} == {k: e[k] for k in ("index", "term", "pos")}
    rc, out, _ = _cli("check", root)
    assert rc == 0 and out.startswith("OK: 1500 messages, 1342 CQ units, 3243 index entries, 1500 DLedger entries")
    rc, out, err = _cli("send", root, "TopicTest", "--body", "x")
    assert rc == 2 and "read-only" in err and err.count("\n") == 1


def test_crashed_copy_abort_torn_last_entry_lagging_checkpoint(fixture_copy, m):
    """A crash as DLedger leaves one: `abort` present, the checkpoint ~3 s behind, the last
    entry's header written but its body torn and its index record not yet written. DLedger's
    recovery checks headers only, so the ledger still ends after that entry; what the read-only
    open and check report about it."""
    root = fixture_copy(NAME)
    last = m["dledger_entries"][-1]
    (root / "abort").touch()
    (root / "dledger-n0" / "checkpoint").write_text("committedIndex=1400\nendIndex=1400\n")
    data = m["dledger_files"]["data"][-1]
    rel = last["pos"] - data["fileFromOffset"]
    _damage(root, f"dledger-n0/data/{data['name']}", rel + 48 + 400, bytes(last["size"] - 48 - 400))
    _damage(root, "dledger-n0/index/00000000000000000000", last["index"] * 32, bytes(32))
    before = _files_digest(root)
    with MessageStore.open(root, tolerant=True) as s:
        info = s.info()
        d = info["dledger"]
        assert info["abort"] and info["recovery"]["abnormal"]
        assert (d["ledgerEndIndex"], d["writePos"]) == (1499, m["min_max_offsets"]["maxPhyOffset"])
        assert (d["committedIndex"], d["committedPos"]) == (1400, m["dledger_entries"][1400]["pos"]
                                                             + m["dledger_entries"][1400]["size"])
        assert d["indexMismatches"] and d["indexMismatches"][0].startswith("entry 1499")
        assert s.max_offset == m["min_max_offsets"]["maxPhyOffset"]
        assert s.look_message_by_offset(last["rmqPhyOffset"]) is None     # the torn message
        assert s.look_message_by_offset(m["dledger_entries"][-2]["rmqPhyOffset"]) is not None
        r = check_store(s)
    kinds = {p["kind"]: p for p in r["problems"] + r["recoveryPending"]}
    assert {"dledger-index", "commitlog-record"} <= {p["kind"] for p in r["problems"]}
    assert {"abort", "dledger-uncommitted"} <= {p["kind"] for p in r["recoveryPending"]}  # a crash's leftovers
    assert kinds["commitlog-record"]["offset"] == last["rmqPhyOffset"]
    assert kinds["dledger-index"]["offset"] == last["index"] * 32
    assert "1401..1499" in kinds["dledger-uncommitted"]["detail"]
    assert _files_digest(root) == before   # read-only: not a byte written


def test_truncated_data_file_is_refused_with_its_path(fixture_copy):
    root = fixture_copy(NAME)
    last = sorted((root / "dledger-n0" / "data").iterdir())[-1]
    os.truncate(last, 40000)
    with pytest.raises(ConfigError, match="DLedger data files have different sizes") as e:
        MessageStore.open(root)
    assert e.value.path == str(last) and f"{last.name} is 40000 bytes, expected 65536" in str(e.value)
    with pytest.raises(ConfigError, match="configured size") as e:    # the size given: that file is named
        MessageStore.open(root, StoreConfig.from_mapping({"mappedFileSizeCommitLog": 65536}))
    assert e.value.path == str(last)
    with MessageStore.open(root, tolerant=True) as s:   # check passes the file over and says so
        r = check_store(s)
    assert any(p["kind"] == "file" and last.name in p["detail"] for p in r["problems"])


def test_segment_fill_of_the_data_files(store, m):
    from engine.analysis import DAMAGED, ENTRY_HEADER, commitlog_fill
    fills = commitlog_fill(store)
    raw = {d["file"]: d for d in m["dledger_raw_check"]["data_files"]}
    assert len(fills) == len(raw) == 31
    for c in fills:
        d = raw[c.name]
        by = c.segments.bytes_by_id()
        assert c.message_count == d["entries"] and by[ENTRY_HEADER] == 48 * d["entries"]
        assert by.get(DAMAGED, 0) == 0 and c.data_end == d["endOfEntries"]
        assert c.blank_tail == (c.file_size - d["endOfEntries"] if d["stop"] == "blank" else 0)
        # the records are the messages, at their RocketMQ offsets
        assert c.record_at(int(c.record_starts[0]) + 5) == int(c.record_starts[0])
        assert store.look_message_by_offset(c.file_from_offset + int(c.record_starts[-1])) is not None
    assert sum(c.message_count for c in fills) == 1500


def _set_term(root, m, entries, term):
    """The term of `entries` in their headers and their index records."""
    files = {d["name"]: d["fileFromOffset"] for d in m["dledger_files"]["data"]}
    with open(root / "dledger-n0/index/00000000000000000000", "r+b") as idx:
        for entry in entries:
            e = m["dledger_entries"][entry]
            name = max((n for n, f in files.items() if f <= e["pos"]), key=lambda n: files[n])
            with open(root / "dledger-n0/data" / name, "r+b") as fh:
                fh.seek(e["pos"] - files[name] + 16)
                fh.write(struct.pack(">q", term))
            idx.seek(entry * 32 + 24)
            idx.write(struct.pack(">q", term))


def test_terms_above_zero_and_a_term_going_back(fixture_copy, m):
    """Elections in a multi-node group raise the term: entries 1000.. in term 3, currterm 3."""
    root = fixture_copy(NAME)
    _set_term(root, m, range(1000, 1500), 3)
    (root / "dledger-n0" / "currterm").write_text("voteLeader=n1\ncurrTerm=3\n")
    with MessageStore.open(root) as s:
        d = s.info()["dledger"]
        assert (d["ledgerEndTerm"], d["currTerm"], d["voteLeader"], d["ledgerEndIndex"]) == (3, 3, "n1", 1499)
        e = m["dledger_entries"][1200]
        assert s.dledger_entry(e["rmqPhyOffset"])["term"] == 3
        assert s.dledger_entry(m["dledger_entries"][999]["rmqPhyOffset"])["term"] == 0
        assert check_store(s)["ok"]
    (root / "dledger-n0" / "currterm").write_text("voteLeader=n1\ncurrTerm=2\n")   # below the entries' term
    _set_term(root, m, [1400], 1)                                                    # a term going back
    with MessageStore.open(root) as s:
        d = s.info()["dledger"]
        # DLedger's recovery stops before the entry whose term went back
        assert (d["ledgerEndIndex"], d["ledgerEndTerm"]) == (1399, 3) and "term 1 < 3" in d["stopReason"]
        assert s.max_offset == m["dledger_entries"][1400]["pos"]
        r = check_store(s)
    details = [p["detail"] for p in r["problems"] if p["kind"] == "dledger-entry"]
    assert any("above currterm's 2" in x for x in details)


def test_ledger_ending_at_a_blank_before_an_empty_file(fixture_copy, m):
    """A crash after DLedger rolled to a new data file but before its first entry: the newest
    file is all zeros. The ledger ends at the last entry before the previous file's blank."""
    root = fixture_copy(NAME)
    data = m["dledger_files"]["data"]
    (root / "dledger-n0" / "data" / data[-1]["name"]).write_bytes(bytes(65536))
    blank = m["dledger_raw_check"]["blanks"][-1]
    last = max(e["index"] for e in m["dledger_entries"] if e["pos"] < blank["absolutePos"])
    with MessageStore.open(root, tolerant=True) as s:
        d = s.info()["dledger"]
        assert (d["ledgerEndIndex"], d["writePos"], s.max_offset) == (last, blank["absolutePos"], blank["absolutePos"])
        assert d["committedIndex"] == last          # the checkpoint's 1499, clamped to the ledger end
        assert [f["wrotePosition"] for f in s.info()["commitlog"]["files"]][-2:] == [
            blank["absolutePos"] - data[-2]["fileFromOffset"], 0]
        offs = [off for off, r in s.walk() if r.message is not None]
        assert len(offs) == last + 1
        r = check_store(s)
    kinds = {p["kind"] for p in r["problems"]}
    assert "dledger-index" in kinds and "dledger-checkpoint" in kinds   # records and endIndex past the ledger
    assert "dledger-tail" not in kinds and "commitlog-tail" not in kinds   # the blank after the end is DLedger's
