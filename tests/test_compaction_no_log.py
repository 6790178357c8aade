"""A topic whose cleanup.policy is COMPACTION but whose queue has no compaction log loaded:
DefaultMessageStore.getMessage hands it to CompactionStore.getMessage, which answers
GetMessageResult.NO_MATCH_LOGIC_QUEUE (status NO_MATCHED_LOGIC_QUEUE, offsets 0) -- 5.3.3
DefaultMessageStore.java:805-808, CompactionStore.java:180-189, load():104-108 -- until its topic
scan (every 30 s, scanAllTopicConfig) starts an empty CompactionLog for each write queue: from
then on NO_MESSAGE_IN_QUEUE, min -1 (BatchConsumeQueue's). `get --broker` answers as a running
broker does; a queue whose log files have no compactionCq files stays unloaded (sanityCheck).
Without --broker the full queue is shown beside that answer."""
from __future__ import annotations

import json
import shutil

from conftest import manifest
from engine.cli.app import main
from test_tiered import tree_hash


def with_policy(root, policies: dict) -> None:
    (root / "config").mkdir(exist_ok=True)
    table = {t: {"topicName": t, "readQueueNums": 2, "writeQueueNums": 2, "perm": 6,
                 "attributes": {"+cleanup.policy": p}} for t, p in policies.items()}
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": table}))


def get(capsys, root, *argv):
    rc = main(["get", str(root), *argv, "--json"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    return json.loads(out.out)


def test_a_compacted_queue_without_its_log_answers_no_matched_logic_queue(fixture_copy, capsys):
    root = fixture_copy("compaction_store") / "store"
    with_policy(root, {"CompactA": "COMPACTION", "CompactB": "COMPACTION"})
    shutil.rmtree(root / "compaction" / "compactionLog" / "CompactA" / "1")
    shutil.rmtree(root / "compaction" / "compactionCq" / "CompactA" / "1")
    shutil.rmtree(root / "compaction" / "compactionCq" / "CompactB" / "0")   # a log the broker cannot load
    before = tree_hash(root)
    for topic, qid, want in (("CompactA", 1, ("NO_MESSAGE_IN_QUEUE", 0, -1, 0)),      # the scan starts an empty log
                             ("CompactB", 0, ("NO_MATCHED_LOGIC_QUEUE", 0, 0, 0))):  # its log files: no CQ files
        out = get(capsys, root, topic, str(qid), "3", "--broker")
        assert (out["status"], out["nextBeginOffset"], out["minOffset"], out["maxOffset"]) == want
        assert out["compacted"] and out["messages"] == []
        both = get(capsys, root, topic, str(qid), "3", "--count", "2")
        assert both["compactedView"]["status"] == want[0]
        assert both["status"] == "FOUND" and [m["queueOffset"] for m in both["messages"]] == [3, 4]
    assert main(["get", str(root), "CompactB", "0", "0", "--broker"]) == 0
    assert "until the broker starts one" in capsys.readouterr().out
    assert main(["get", str(root), "CompactA", "1", "0", "--broker"]) == 0
    assert "one started less than 30 s ago answers NO_MATCHED_LOGIC_QUEUE" in capsys.readouterr().out
    out = get(capsys, root, "CompactA", "2", "0", "--broker")   # past writeQueueNums: no scan starts it
    assert (out["status"], out["minOffset"]) == ("NO_MATCHED_LOGIC_QUEUE", 0)
    # the other queues keep their compacted view
    want = [e["queueOffset"] for e in manifest("compaction_store")["messages"]
            if (e["topic"], e["queueId"]) == ("CompactA", 0)][:2]
    assert [m["queueOffset"] for m in get(capsys, root, "CompactA", "0", "0", "--broker", "--count", "2")["messages"]] \
        == want
    assert tree_hash(root) == before


def test_no_compaction_folder_at_all(fixture_copy, capsys):
    root = fixture_copy("compaction_store") / "store"
    shutil.rmtree(root / "compaction")
    # no policy anywhere: an ordinary topic, read from its ConsumeQueue
    assert get(capsys, root, "CompactA", "0", "0", "--broker")["status"] == "FOUND"
    with_policy(root, {"CompactA": "COMPACTION", "CompactB": "DELETE"})
    assert get(capsys, root, "CompactA", "0", "0", "--broker")["status"] == "NO_MESSAGE_IN_QUEUE"   # (after the scan)
    assert get(capsys, root, "CompactB", "0", "0", "--broker")["status"] == "FOUND"
