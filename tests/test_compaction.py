"""Compacted topics (RocketMQ 5.3.3 CompactionStore): every queue's compacted view of the
compaction_store fixture against what DefaultMessageStore.getMessage returned
(README_COMPACTION.md), the CLI's get/info/check on it, and the compaction files never written
(a send goes through the normal commitlog path)."""
from __future__ import annotations

import json
import os

from conftest import manifest, unpack
from engine import MessageStore
from engine.cli.app import main
from engine.format import compaction_layout as C
from engine.store.compaction import key_summary, open_compaction
from engine.store.compaction_check import check_compaction
from test_tiered import tree_hash

FIELDS = ["topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "keys", "tags", "uniqKey", "msgId",
          "storeTimestamp", "bornTimestamp", "sysFlag", "bodyCRC"]


def store_dir():
    return unpack("compaction_store") / "store"


def walk_view(cq, broker=True, step=16):
    msgs, off = [], 0
    while True:
        r = cq.get_message(off, step, broker=broker)
        if r.status != "FOUND":
            assert r.status == "OFFSET_OVERFLOW_ONE", (off, r.status)
            return msgs
        assert r.nextBeginOffset > off
        msgs.extend(r.messages)
        off = r.nextBeginOffset


def test_every_queue_compacted_view_as_the_broker_served_it():
    m = manifest("compaction_store")
    with MessageStore.open(store_dir()) as store:
        cs = open_compaction(store.root, store.topic_config())
        assert cs.topics() == sorted({q["topic"] for q in m["queues"]})
        for q in m["queues"]:
            cq = cs.queue(q["topic"], q["queueId"])
            first = cq.get_message(0, 16)
            assert (first.status, first.minOffset, first.maxOffset) == (
                q["compactedView_firstGetStatus"], q["compactedView_minOffset"], q["compactedView_maxOffset"])
            assert store.queue_bounds(q["topic"], q["queueId"])[2] == q["commitLogConsumeQueueMaxOffset"]
            for broker in (True, False):
                got = walk_view(cq, broker)
                want = [e for e in m["messages"] if (e["topic"], e["queueId"]) == (q["topic"], q["queueId"])]
                assert len(got) == len(want) == q["compactedView_messageCount"]
                for g, e in zip(got, want):
                    assert [getattr(g, f) for f in FIELDS] == [e[f] for f in FIELDS]
                    assert g.body.decode() == e["body"]
            assert cs.compacted_up_to(q["topic"], q["queueId"]) == 94


def test_status_table_and_layout():
    cs = open_compaction(store_dir())
    cq = cs.queue("CompactA", 0)
    assert cq.get_message(cq.max_offset).status == "OFFSET_OVERFLOW_ONE"
    r = cq.get_message(cq.max_offset + 5)
    assert (r.status, r.nextBeginOffset) == ("OFFSET_OVERFLOW_BADLY", cq.max_offset)
    r = cq.get_message(17, 1)  # sparse: the next kept message at or after 17
    assert r.messages[0].queueOffset > 17 and r.nextBeginOffset == r.messages[0].queueOffset + 1
    assert cq.end_units == 1 and C.CQ_UNIT_SIZE == 46
    assert C.cleanup_policy({"attributes": {"+cleanup.policy": "COMPACTION"}}) == "COMPACTION"
    assert not open_compaction(store_dir(), {"CompactA": {"attributes": {"+cleanup.policy": "DELETE"}}}).is_compacted(
        "CompactA")


def test_check_and_key_summary():
    with MessageStore.open(store_dir()) as store:
        cs = open_compaction(store.root)
        rep = check_compaction(cs, store)
        assert rep["units"] == 117 and rep["problems"] == []
        rows = key_summary(cs, store, "CompactA", 0)
        puts = [p for p in manifest("compaction_store")["puts"] if (p["topic"], p["queueId"]) == ("CompactA", 0)]
        assert sum(r["puts"] for r in rows) == len(puts)
        assert sum(len(r["kept"]) for r in rows) == 27
        last = {}
        for p in puts:
            last[p["keys"]] = p["queueOffset"]
        for r in rows:  # every key's last put is kept
            assert last[r["key"]] in [k.queueOffset for k in r["kept"]]
            assert r["compactedAway"] == r["puts"] - len(r["kept"])


def test_cli_get_info_check(capsys):
    before = tree_hash(unpack("compaction_store"))
    s = str(store_dir())
    assert main(["get", s, "CompactB", "1", "0", "--broker", "--json", "--count", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    want = [e["queueOffset"] for e in manifest("compaction_store")["messages"]
            if (e["topic"], e["queueId"]) == ("CompactB", 1)][:4]
    assert out["compacted"] and [x["queueOffset"] for x in out["messages"]] == want
    assert main(["get", s, "CompactB", "1", "0", "--json", "--count", "4"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [x["queueOffset"] for x in out["messages"]] == [0, 1, 2, 3]
    assert [x["queueOffset"] for x in out["compactedView"]["messages"]] == want
    assert main(["get", s, "CompactB", "1", "0"]) == 0
    text = capsys.readouterr().out
    assert "compacted view of CompactB/1" in text and "full queue" in text
    assert main(["info", s]) == 0
    assert text.count("COMPACTED") == 0 and capsys.readouterr().out.count("COMPACTED") == 4
    assert main(["check", s]) == 0
    assert "117 compaction-log units" in capsys.readouterr().out
    assert tree_hash(unpack("compaction_store")) == before


def test_send_into_a_compacted_topic_leaves_compaction_to_the_broker(fixture_copy, capsys):
    root = fixture_copy("compaction_store") / "store"
    comp = tree_hash(root / "compaction")
    assert main(["send", str(root), "CompactA", "--queue", "0", "--keys", "user-1", "--body", "new"]) == 0
    capsys.readouterr()
    assert tree_hash(root / "compaction") == comp
    with MessageStore.open(root) as store:
        assert store.queue_bounds("CompactA", 0)[2] == 99
        assert store.get_message("CompactA", 0, 98).messages[0].body == b"new"
        assert open_compaction(root).queue("CompactA", 0).max_offset == 98  # the view is the broker's to extend
    assert main(["get", str(root), "CompactA", "0", "97", "--broker", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [m["queueOffset"] for m in out["messages"]] == [97]
    assert "1 keyed message(s) of the queue from queue offset 98 on are not in the compaction log" in out["source"]
    assert main(["send", str(root), "CompactA", "--queue", "1", "--body", "no key"]) == 0   # keyless: never copied
    capsys.readouterr()
    assert main(["get", str(root), "CompactA", "1", "0", "--broker", "--json"]) == 0
    assert "not in the compaction log" not in json.loads(capsys.readouterr().out)["source"]


def test_check_finds_a_damaged_compaction_cq(fixture_copy, capsys):
    root = fixture_copy("compaction_store") / "store"
    cq = root / "compaction" / "compactionCq" / "CompactA" / "1" / "00000000000000000000"
    data = bytearray(cq.read_bytes())
    data[46 * 2 + 7] ^= 0x10          # the third unit's compaction-log offset
    cq.write_bytes(bytes(data))
    assert main(["check", str(root)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("PROBLEMS") and "CompactA/1@" in out


def test_check_says_when_the_broker_cannot_load_a_compaction_queue(fixture_copy, capsys):
    """What makes 5.3.3's load fail (differential runs: a clean shutdown left a `.delete` file):
    MappedFileQueue.load parses the name of a file of the folder's size as its offset (the store
    does not load), refuses a file of another size (the queue is not loaded) and skips folders;
    TopicPartitionLog.sanityCheck wants a log file and a CQ file of each name, after its recover
    deleted log files past the CQ's last record."""
    root = fixture_copy("compaction_store") / "store"
    assert main(["check", str(root)]) == 0
    capsys.readouterr()
    logs, cqs = root / "compaction" / "compactionLog", root / "compaction" / "compactionCq"
    first = sorted((logs / "CompactA" / "0").iterdir())[0]
    first.rename(first.with_name(first.name + ".delete"))
    (logs / "CompactA" / "1" / "junk.delete").write_bytes(b"0123456789")
    (logs / "CompactB" / "1" / C.COMPACTING_DIR).mkdir()
    cq = sorted((cqs / "CompactB" / "0").iterdir())[0]   # (the last one: recover would delete the log file past it)
    cq.unlink()
    before = tree_hash(root)
    assert main(["check", "--json", str(root)]) == 1
    rep = json.loads(capsys.readouterr().out)

    def where(ps, *kinds):
        return sorted((p["kind"], p["file"].split("/compaction/")[1]) for p in ps if p["kind"] in kinds)
    assert where(rep["problems"], "compaction-unloadable", "compaction-queue-unloaded") == sorted([
        ("compaction-unloadable", f"compactionLog/CompactA/0/{first.name}.delete"),   # the store does not load
        ("compaction-unloadable", "compactionCq/CompactA/0"),        # its CQ file lost its log file
        ("compaction-queue-unloaded", "compactionLog/CompactA/1/junk.delete"),   # another size: the queue only
        ("compaction-unloadable", "compactionLog/CompactB/0")])      # a log file lost its CQ file
    assert where(rep["notes"], "compaction-interrupted") == [("compaction-interrupted", "compactionLog/CompactB/1/compacting")]
    assert tree_hash(root) == before


def test_a_crashed_store_with_compacted_topics_is_left_to_the_broker(fixture_copy, capsys):
    """5.3.3's abnormal recovery re-dispatches past its checkpoint into the compaction logs too
    (a differential store halted with dispatch stopped: 684 answers); rmqstore's recovery would
    not, and the broker, finding no abort file after it, never would. A writable open refuses."""
    root = fixture_copy("compaction_store") / "store"
    (root / "abort").write_bytes(b"")
    before = tree_hash(root)
    for argv in (["recover", str(root)], ["send", str(root), "CompactA", "--keys", "user-1", "--body", "x"]):
        assert main(argv) != 0
        err = capsys.readouterr().err
        assert "refusing to recover" in err and "Start the broker" in err and "Traceback" not in err
    assert tree_hash(root) == before
    assert main(["get", str(root), "CompactA", "0", "0", "--broker", "--json"]) == 0   # read-only: served
    assert json.loads(capsys.readouterr().out)["status"] == "FOUND"
    (root / "compaction").rename(root / "compaction-gone")   # no compaction log: recover as before
    assert main(["recover", str(root)]) == 0


def test_check_and_the_compacted_view_agree_on_damaged_files(fixture_copy, capsys):
    """Whole files damaged in a copy: a file of another size than its folder's makes 5.3.3's
    load refuse the queue (get --broker answers NO_MATCHED_LOGIC_QUEUE, check names it); a zeroed
    compactionCq file loses its log file's records (OFFSET_FOUND_NULL, check names it)."""
    root = fixture_copy("compaction_store") / "store"
    comp = root / "compaction"
    log = sorted((comp / "compactionLog" / "CompactA" / "0").iterdir())[-1]
    os.truncate(log, log.stat().st_size // 2)
    cq = sorted((comp / "compactionCq" / "CompactB" / "1").iterdir())[0]
    cq.write_bytes(b"\0" * cq.stat().st_size)
    before = tree_hash(root)
    assert main(["check", "--json", str(root)]) == 1
    rep = json.loads(capsys.readouterr().out)
    kinds = {(p["kind"], p["file"].split("/compaction/")[1]) for p in rep["problems"]}
    assert ("compaction-queue-unloaded", f"compactionLog/CompactA/0/{log.name}") in kinds
    assert ("compaction-cq-lost", f"compactionCq/CompactB/1/{cq.name}") in kinds
    for topic, qid, want in (("CompactA", "0", "NO_MATCHED_LOGIC_QUEUE"), ("CompactB", "1", "OFFSET_FOUND_NULL")):
        assert main(["get", str(root), topic, qid, "0", "--broker", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["status"] == want
    assert tree_hash(root) == before
