"""A reader beside a writer (live tail), the CLI contract, bad input."""
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import manifest, unpack
from engine import MessageStore, StoreConfig
from engine.analysis.chains import chain_lengths
from engine.cli.app import main as cli_main

SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64, maxIndexNum=256)


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "engine", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def tree_digest(root: Path) -> dict:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[str(p.relative_to(root))] = (hashlib.sha1(p.read_bytes()).hexdigest(), st.st_size, st.st_mtime_ns)
    return out


def test_reader_follows_a_writer(tmp_path):
    root = tmp_path / "s"
    cfg = StoreConfig.from_mapping(SMALL)
    with MessageStore.create(root, cfg) as w:
        w.put_message("T", b"first", queue_id=0)
        r = MessageStore.open(root)
        try:
            assert r.find_queue("T", 0).max_offset == 1
            for i in range(500):  # several commitlog files, CQ files and index files
                w.put_message("T", b"x" * 300, queue_id=0, keys=f"k{i}")
            assert r.refresh()
            assert r.find_queue("T", 0).max_offset == 501
            assert r.max_offset == w.max_offset
            assert [m.body for m in r.get_message("T", 0, 499, 5).messages] == [b"x" * 300] * 2
            assert len(r.query_message("T", "k499").messages) == 1
            assert not r.refresh()
        finally:
            r.close()


def test_cli_json_contracts():
    root = unpack("small")
    m = manifest("small")
    code, out, err = run_cli("info", root, "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["commitlog"]["maxOffset"] == 774278 and info["abort"] is False
    assert {"name", "size", "wrotePosition"} <= set(info["commitlog"]["files"][0])
    assert {"topic", "queueId", "minOffset", "maxOffset"} <= set(info["queues"][0])
    assert {"name", "beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount",
            "indexCount"} <= set(info["indexFiles"][0])
    assert info["config"]["mappedFileSizeCommitLog"] == 65536
    code, out, _ = run_cli("dump", root, "--count", "0", "--json")
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["commitLogOffset"] for x in lines] == [x["phyOffset"] for x in m["messages"]]
    keys = {"topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
            "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
            "preparedTransactionOffset", "properties", "body", "msgId", "uniqKey", "tags", "keys", "tagsCode"}
    assert keys <= set(lines[0])
    code, out, _ = run_cli("get", root, "TopicTest", 0, 45, "--count", 10, "--json")
    g = json.loads(out)
    assert g["status"] == "FOUND" and g["nextBeginOffset"] == 55 and len(g["messages"]) == 10
    code, out, _ = run_cli("get", root, "TopicTest", 0, 9999, "--json")
    assert json.loads(out)["status"] == "OFFSET_OVERFLOW_BADLY"
    code, out, _ = run_cli("cq", root, "TopicTest", 0, "--from", 3, "--count", 2, "--json")
    units = [json.loads(x) for x in out.splitlines()]
    want = [u for q in m["consume_queues"] if (q["topic"], q["queueId"]) == ("TopicTest", 0) for u in q["units"][3:5]]
    assert [[u["offset"], u["commitLogOffset"], u["size"], u["tagsCode"]] for u in units] == want
    assert all(u["phyOffset"] == u["commitLogOffset"] for u in units)   # the old name stays an alias
    code, out, _ = run_cli("query-key", root, "TopicTest", "Aa", "--json")
    q = json.loads(out)
    assert q["truncated"] is False and all("Aa" in x["keys"].split(" ") for x in q["messages"])
    code, out, _ = run_cli("query-key", root, "TopicTest", "Aa", "--raw", "--json")
    raw = json.loads(out)
    assert len(raw["messages"]) > len(q["messages"])  # "BB" shares the hash: RocketMQ returns it too
    code, out, _ = run_cli("query-key", root, "TopicTest", "order-dup-001", "--max", 3, "--json")
    assert json.loads(out)["truncated"] is True
    first = m["messages"][5]
    code, out, _ = run_cli("msgid", root, first["msgId"], "--json")
    assert json.loads(out)["kind"] == "offset"
    code, out, _ = run_cli("msgid", root, first["uniqKey"], "--json")
    got = json.loads(out)
    assert got["kind"] == "uniq" and first["phyOffset"] in [x["commitLogOffset"] for x in got["messages"]]
    code, out, _ = run_cli("uniq", root, first["topic"], first["uniqKey"], "--json")
    assert json.loads(out)["kind"] == "uniq"
    code, out, _ = run_cli("time", root, "TopicTest", 0, "0", "--json")
    assert json.loads(out) == {"offset": 0, "timestamp": 0, "rule": "4.9", "ruleSource": "generation"}  # small: 4.x
    code, out, _ = run_cli("time", root, "TopicTest", 0, "2026-11-22T01:25:30Z", "--json")
    assert json.loads(out)["offset"] > 0


@pytest.mark.parametrize("setup,needle", [
    ("missing", "no such folder"),
    ("empty-dir", "not a RocketMQ store"),
    ("file", "not a folder"),
    ("empty-commitlog-file", "configured size"),
    ("wrong-size", "configured size"),
])
def test_bad_input_one_line_exit_2(tmp_path, setup, needle, fixture_copy):
    root = tmp_path / "store"
    args = ["info", root]
    if setup == "empty-dir":
        root.mkdir()
    elif setup == "file":
        root.write_text("x")
    elif setup == "empty-commitlog-file":
        (root / "commitlog").mkdir(parents=True)
        (root / "commitlog" / "00000000000000000000").write_bytes(b"")
        (root / "commitlog" / "00000000000000065536").write_bytes(b"\0" * 65536)
    elif setup == "garbage-index":
        root = fixture_copy("small")
        (root / "index" / "20261122012526904").write_bytes(os.urandom(1000))
        args = ["info", root]
    elif setup == "wrong-size":
        root = fixture_copy("small")
        args = ["info", root, "--set", "mappedFileSizeCommitLog=131072"]
    elif setup == "bad-json":
        root = fixture_copy("small")
        (root / "config").mkdir()
        (root / "config" / "topics.json").write_text("{oops")
        args = ["info", root]
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err


def test_odd_sized_index_file_is_skipped_with_a_warning(fixture_copy):
    root = fixture_copy("small")
    (root / "index" / "20261122012526904").write_bytes(os.urandom(1000))
    code, out, err = run_cli("info", root, "--json")
    assert code == 0, err
    info = json.loads(out)
    assert len(info["indexFiles"]) == len(manifest("small")["index_files"]) - 1 and any("20261122012526904" in w for w in info["warnings"])
    (root / "config").mkdir()
    (root / "config" / "topics.json").write_text("{oops")
    code, out, err = run_cli("info", root, "--json")
    assert code == 0 and any("not valid JSON" in w for w in json.loads(out)["warnings"])


def test_damage_is_skipped_not_fatal(fixture_copy):
    """A CQ unit pointing past the commitlog and an index chain with a cycle: clean answers."""
    import numpy as np
    root = fixture_copy("small")
    cq = root / "consumequeue" / "TopicTest" / "0" / "00000000000000000000"
    data = bytearray(cq.read_bytes())
    data[20:28] = (10 ** 9).to_bytes(8, "big")  # unit 1 points far past the end
    cq.write_bytes(bytes(data))
    idx = sorted((root / "index").iterdir())[0]
    raw = bytearray(idx.read_bytes())
    entry = lambda n: 40 + 64 * 4 + 20 * n
    raw[entry(5) + 16:entry(5) + 20] = (9).to_bytes(4, "big")
    raw[entry(9) + 16:entry(9) + 20] = (5).to_bytes(4, "big")  # 5 -> 9 -> 5 ...
    idx.write_bytes(bytes(raw))
    with MessageStore.open(root) as s:
        r = s.get_message("TopicTest", 0, 0, 3)
        assert [x.queueOffset for x in r.messages] == [0, 2, 3]
        assert r.skipped and r.skipped[0][0] == 1
        f = s.index.files[0]
        for slot in range(64):
            steps = f.chain(slot)
            assert len(steps) <= f.header.indexCount
        out = []
        f.select("TopicTest#nothing", 64, 0, 2 ** 63 - 1, out)
        assert int(chain_lengths(f).max()) <= f.header.indexCount
    code, out, err = run_cli("check", root, "--json")
    rep = json.loads(out)
    assert code == 1 and any(p["kind"] == "cq-unit" for p in rep["problems"])


def test_read_only_session_changes_not_one_byte(fixture_copy):
    for name in ("small", "crashed_torn"):
        root = fixture_copy(name)
        before = tree_digest(root)
        with MessageStore.open(root) as s:
            list(s.iter_messages())
            for (t, q) in list(s.queues)[:5]:
                s.get_message(t, q, 0, 64)
            s.query_message("TopicTest", "order-dup-001", max_num=0)
            s.lookup_id("0A00000500002A9F0000000000000000")
            s.refresh()
        for cmd in (["info"], ["dump"], ["check"], ["query-key", "--raw"]):
            extra = ["TopicTest", "Aa"] if cmd[0] == "query-key" else []
            run_cli(cmd[0], root, *extra, *cmd[1:])
        assert tree_digest(root) == before


def test_send_via_cli_then_read_back(tmp_path):
    root = tmp_path / "s"
    MessageStore.create(root, StoreConfig.from_mapping(SMALL)).close()
    code, out, err = run_cli("send", root, "OrderEvents", "--queue", 1, "--tags", "Paid", "--keys", "o-1 u-9",
                             "--prop", "a=b", "--body", "hello", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["status"] == "PUT_OK" and res["queueOffset"] == 0
    code, out, _ = run_cli("query-key", root, "OrderEvents", "u-9", "--json")
    msg = json.loads(out)["messages"][0]
    assert msg["properties"]["a"] == "b" and msg["tags"] == "Paid" and msg["msgId"] == res["msgId"]
