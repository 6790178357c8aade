"""`rmqstore diff`: a fixture against its copy, a copy with messages appended, truncated, with
one flipped byte, stores written independently, and two different stores. Expected numbers come
from the manifests (what RocketMQ returned) or an independent raw walk of the files, and
neither store changes by one byte."""
import json
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import manifest, unpack
from engine import MessageStore, StoreConfig
from engine.analysis.diff import diff_task
from engine.tasks import CancelToken, Cancelled, run
from test_generation import SMALL, cli, tree_digest

CLI = [sys.executable, "-m", "engine"]
V1, V2, BLANK = -626843481, -626843477, -875286124


def cli_diff(capsys, a, b, *extra):
    """`rmqstore diff --json` in this process (test_limit_cancel_and_bad_input runs it as a child too)."""
    out = cli(capsys, "diff", a, b, "--json", *extra)
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, json.loads(out.stdout)


def raw_records(root: Path, file_size: int = 65536):
    """(offset, size) of every record, walked with struct alone (not the engine's walker)."""
    out = []
    for f in sorted((root / "commitlog").iterdir(), key=lambda p: int(p.name)):
        data, base, pos = f.read_bytes(), int(f.name), 0
        while pos + 8 <= len(data):
            total, magic = struct.unpack_from(">ii", data, pos)
            if magic not in (V1, V2) or total <= 0 or pos + total > len(data):
                break
            out.append((base + pos, total))
            pos += total
    return out


def log_end(name: str) -> int:
    last = manifest(name)["messages"][-1]
    return last["phyOffset"] + last["totalSize"]


def test_a_store_and_its_copy_are_identical(fixture_copy, capsys):
    a = unpack("v5")
    b = fixture_copy("v5")
    before = tree_digest(a), tree_digest(b)
    code, d = cli_diff(capsys, a, b)
    assert code == 0 and d["identical"] is True and d["firstDivergence"] is None
    assert d["onlyInA"] == d["onlyInB"] == d["changed"] == d["queues"] == []
    assert d["bytesCompared"] == log_end("v5")  # every valid byte, no more
    assert (tree_digest(a), tree_digest(b)) == before
    text = subprocess.run(CLI + ["diff", str(a), str(b)], capture_output=True, text=True)
    assert text.returncode == 0 and text.stdout.startswith("identical:")


def test_diff_finds_exactly_the_messages_appended_to_a_copy(fixture_copy, capsys):
    a = unpack("small")
    b = fixture_copy("small")
    with MessageStore.open(b, read_only=False) as st:
        put = [st.put_message("TopicTest", f"new {i}".encode(), queue_id=i % 2, tags="N") for i in range(5)]
        put += st.put_messages("Orders_v2-EU", [b"batch"] * 3, queue_id=1)
    before = tree_digest(a), tree_digest(b)
    code, d = cli_diff(capsys, a, b)
    assert code == 1 and d["identical"] is False
    assert d["onlyInA"] == [] and d["onlyInACount"] == 0
    assert [(m["commitLogOffset"], m["msgId"], m["topic"], m["queueId"], m["queueOffset"]) for m in d["onlyInB"]] == \
        [(p.commitLogOffset, p.msgId, p.topic, p.queueId, p.queueOffset) for p in put]
    a_end = log_end("small")
    assert d["firstDivergence"] == a_end == put[0].commitLogOffset
    # the independent walk sees the same records past A's end
    assert [o for o, _ in raw_records(b) if o >= a_end] == [p.commitLogOffset for p in put]
    assert {(q["topic"], q["queueId"]) for q in d["queues"]} == {("TopicTest", 0), ("TopicTest", 1), ("Orders_v2-EU", 1)}
    q = next(q for q in d["queues"] if q["topic"] == "TopicTest" and q["queueId"] == 0)
    assert q["maxOffsetB"] - q["maxOffsetA"] == 3
    code, d2 = cli_diff(capsys, b, a)  # the other way round
    assert [m["msgId"] for m in d2["onlyInA"]] == [p.msgId for p in put] and d2["onlyInB"] == []
    assert (tree_digest(a), tree_digest(b)) == before


def test_a_truncated_copy_lacks_the_tail(fixture_copy, capsys):
    a = unpack("small")
    b = fixture_copy("small")
    msgs = manifest("small")["messages"]
    cut = msgs[-40]["phyOffset"]
    last = sorted((b / "commitlog").iterdir())[-1]
    f = next(p for p in sorted((b / "commitlog").iterdir()) if int(p.name) <= cut < int(p.name) + 65536)
    with open(f, "r+b") as fh:  # what a torn write leaves: zeros from `cut` on
        fh.seek(cut - int(f.name))
        fh.write(bytes(65536 - (cut - int(f.name))))
    for p in (b / "commitlog").iterdir():
        if int(p.name) > int(f.name):
            p.write_bytes(bytes(65536))
    assert last.exists()
    code, d = cli_diff(capsys, a, b)
    want = [m for m in msgs if m["phyOffset"] >= cut]
    assert code == 1 and d["firstDivergence"] == cut
    assert [(m["commitLogOffset"], m["msgId"]) for m in d["onlyInA"]] == [(m["phyOffset"], m["msgId"]) for m in want]
    assert d["onlyInB"] == [] and d["onlyInACount"] == len(want)
    lost = Counter((m["topic"], m["queueId"]) for m in want if m["consumeQueueEntries"])
    assert {(q["topic"], q["queueId"]): q["maxOffsetA"] - q["maxOffsetB"] for q in d["queues"]} == dict(lost)


def test_one_flipped_byte_is_found_where_it_is(fixture_copy, capsys):
    a = unpack("small")
    b = fixture_copy("small")
    m = next(m for m in manifest("small")["messages"][50:] if m["sysFlag"] & 0x30 == 0 and m["bodyLength"] > 4)
    flip = m["phyOffset"] + 88 + 2  # V1, IPv4 hosts: the body starts 88 bytes in (format notes §4.2)
    f = b / "commitlog" / f"{flip - flip % 65536:020d}"
    data = bytearray(f.read_bytes())
    data[flip % 65536] ^= 0x40
    f.write_bytes(bytes(data))
    code, d = cli_diff(capsys, a, b)
    assert code == 1 and d["firstDivergence"] == flip
    assert d["onlyInA"] == d["onlyInB"] == [] and d["queues"] == []
    assert [(c["commitLogOffset"], c["msgId"]) for c in d["changed"]] == [(m["phyOffset"], m["msgId"])]
    assert d["filesWalked"] == 1


def _independent(root: Path, clock, bodies, extra_first: bool):
    with MessageStore.create(root, StoreConfig.from_mapping(SMALL)) as st:
        st.writer.clock = clock
        if extra_first:
            st.put_message("TopicTest", b"only here", queue_id=0, properties={"UNIQ_KEY": "AB" * 16})
        for i, body in enumerate(bodies):
            st.put_message("TopicTest", body, queue_id=i % 2, properties={"UNIQ_KEY": f"{i:032X}"})


def test_stores_written_independently_match_by_uniq_key_and_store_time(tmp_path, capsys):
    """Master and slave written apart: the same messages at other offsets pair up by key."""
    bodies = [f"message {i}".encode() * (1 + i % 5) for i in range(300)]
    _independent(tmp_path / "a", lambda: 1_795_000_000_000, bodies, False)
    _independent(tmp_path / "b", lambda: 1_795_000_000_000, bodies, True)
    code, d = cli_diff(capsys, tmp_path / "a", tmp_path / "b")
    assert code == 1 and d["firstDivergence"] == 8  # same size and magic, then the body CRC differs
    assert d["onlyInA"] == [] and [m["uniqKey"] for m in d["onlyInB"]] == ["AB" * 16]
    assert d["matchedByKey"] == 300 and d["changed"] == []
    assert d["queues"] == [{"topic": "TopicTest", "queueId": 0, "minOffsetA": 0, "maxOffsetA": 150,
                            "minOffsetB": 0, "maxOffsetB": 151}]


def test_two_different_stores_against_an_independent_walk(capsys):
    a, b = unpack("small"), unpack("crashed")
    code, d = cli_diff(capsys, a, b)
    ma = Counter((m["uniqKey"], m["storeTimestamp"]) for m in manifest("small")["messages"])
    mb = Counter((m["uniqKey"], m["storeTimestamp"]) for m in manifest("crashed")["messages"])
    assert code == 1
    assert d["onlyInACount"] == sum((ma - mb).values()) and d["onlyInBCount"] == sum((mb - ma).values())
    assert d["matchedByKey"] == sum((ma & mb).values())
    # the first differing byte, found by comparing the raw files
    la = b"".join(p.read_bytes() for p in sorted((a / "commitlog").iterdir()))
    lb = b"".join(p.read_bytes() for p in sorted((b / "commitlog").iterdir()))
    first = next(i for i in range(min(len(la), len(lb))) if la[i] != lb[i])
    assert d["firstDivergence"] == first


def test_limit_cancel_and_bad_input(tmp_path, capsys):
    a, b = unpack("small"), unpack("crashed")
    code, d = cli_diff(capsys, a, b, "--max", "3")
    assert len(d["onlyInA"]) == 3 and d["onlyInACount"] > 3
    with MessageStore.open(a) as sa, MessageStore.open(b) as sb:
        token = CancelToken()
        token.cancel()
        with pytest.raises(Cancelled):
            run(diff_task(sa, sb, cancel=token))
        seen = []
        r = run(diff_task(sa, sb), seen.append)
        assert not r.identical and {p.phase for p in seen} >= {"compare", "records", "match"}
    bad = subprocess.run(CLI + ["diff", str(a), str(tmp_path / "nope")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no such folder" in bad.stderr
    dl = cli(capsys, "diff", unpack("dledger"), a)
    assert dl.returncode == 1
    (tmp_path / "empty").mkdir()
    bad = cli(capsys, "diff", tmp_path / "empty", a)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_a_store_before_and_after_its_recovery(fixture_copy, capsys):
    """Recovery cuts what the read-only view already left out: the same messages and queues."""
    a = unpack("crashed_torn")
    b = fixture_copy("crashed_torn")
    rec = cli(capsys, "recover", b, "--json")
    assert rec.returncode == 0, rec.stderr
    assert not (b / "abort").exists()
    code, d = cli_diff(capsys, a, b)
    assert code == 0 and d["identical"] and d["commitlog"]["a"] == d["commitlog"]["b"]
    assert d["commitlog"]["a"]["maxOffset"] == manifest("crashed_torn")["after_reopen"]["maxPhyOffset"]


def test_dledger_stores_compare_by_their_entries(fixture_copy, capsys):
    """A DLedger log compares like a classic one: a copy is identical; a byte flipped inside
    an entry's message (48 bytes past the entry's start) is found at its offset, as a changed
    message with the offset RocketMQ gives it."""
    a = unpack("dledger")
    b = fixture_copy("dledger")
    same = cli(capsys, "diff", a, b, "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["identical"] is True
    data = sorted((b / "dledger-n0" / "data").iterdir())
    with MessageStore.open(a) as s:
        m = next(r.message for _, r in s.commitlog.walk()
                 if r.message is not None and r.message.commitLogOffset >= int(data[1].name) + 1000)
    flip = m.commitLogOffset + m.storeSize - 1 - int(data[1].name)   # the record's last byte, inside its entry
    with open(data[1], "r+b") as fh:
        fh.seek(flip)
        byte = fh.read(1)[0]
        fh.seek(flip)
        fh.write(bytes([byte ^ 0xFF]))
    d = cli(capsys, "diff", a, b, "--json")
    r = json.loads(d.stdout)
    assert d.returncode == 1 and r["firstDivergence"] == m.commitLogOffset + m.storeSize - 1
    assert [c["commitLogOffset"] for c in r["changed"]] == [m.commitLogOffset]
