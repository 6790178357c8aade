"""A tier folder (RocketMQ 5.3.3 TieredMessageStore, POSIX provider) opened on its own: every
message and every key query of the tiered_store fixture against what the real
TieredMessageStore answered (README_TIERED.md), the CLI over it, other names and brokers,
and not one byte written."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import manifest, unpack
from engine.cli.app import main
from engine.errors import ConfigError, NotAStoreError
from engine.format import tiered_layout as L
from engine.store.tiered import TieredStore, is_tier_folder

FIELDS = ["topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "keys", "tags", "uniqKey", "msgId",
          "storeTimestamp", "bornTimestamp", "sysFlag", "bodyCRC"]


def tier() -> Path:
    return unpack("tiered_store") / "tiered"


def tree_hash(root: Path) -> dict:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for n in files:
            p = Path(dirpath) / n
            out[str(p.relative_to(root))] = (p.stat().st_size, p.stat().st_mtime_ns,
                                             hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def read_all(store, topic, qid, step=16, ends=("OFFSET_OVERFLOW_ONE",)):
    msgs, off = [], 0
    while True:
        r = store.get_message(topic, qid, off, step)
        if r.status != "FOUND":
            assert r.status in ends, (topic, qid, off, r.status)
            return msgs
        assert r.nextBeginOffset > off
        msgs.extend(r.messages)
        off = r.nextBeginOffset


def test_every_message_as_tiered_message_store_returned_it():
    m = manifest("tiered_store")
    with TieredStore.open(tier()) as store:
        assert (store.cluster, store.broker) == (m["cluster"], m["brokerName"])
        for q in m["queues"]:
            assert store.queue_bounds(q["topic"], q["queueId"]) == (
                "SimpleCQ", q["tieredConsumeQueueMinOffset"], q["tieredConsumeQueueCommitOffset"])
            tq = store.find_queue(q["topic"], q["queueId"])
            assert (tq.commitlog.min_offset, tq.commitlog.max_offset) == (
                q["tieredCommitLogMinOffset"], q["tieredCommitLogCommitOffset"])
            assert store.topic_id(q["topic"]) == q["tieredTopicId"]
        got = {}
        for t, qid in store.queues:
            for msg in read_all(store, t, qid):
                got[(t, qid, msg.queueOffset)] = msg
    assert len(got) == len(m["messages"]) == 300
    for e in m["messages"]:
        msg = got[(e["topic"], e["queueId"], e["queueOffset"])]
        assert [getattr(msg, f) for f in FIELDS] == [e[f] for f in FIELDS]
        assert msg.body.decode() == e["body"]
        assert msg.physicalOffsetField == e["commitLogOffset"]  # rewritten by the upload


def _hits(r) -> set[str]:
    return {f"{x.queueId}:{x.queueOffset}:{x.commitLogOffset}" for x in r.messages}


@pytest.mark.parametrize("raw", [False, True])
def test_every_key_query_as_tiered_message_store_answered(raw):
    m = manifest("tiered_store")
    expected = m["queryMessage_queueId:queueOffset:commitLogOffset"]
    keys = {k for per in expected.values() for k in per} | {e["uniqKey"] for e in m["messages"]}
    with TieredStore.open(tier()) as store:
        checked = 0
        for topic in store.topics():
            for key in sorted(keys):
                r = store.query_message(topic, key, 0, 2**63 - 1, 64, raw=raw)
                want = set(expected.get(topic, {}).get(key, []))
                if key.startswith("C0") and not want:  # UNIQ_KEY: the manifest's messages say where
                    want = {f"{e['queueId']}:{e['queueOffset']}:{e['commitLogOffset']}"
                            for e in m["messages"] if e["uniqKey"] == key and e["topic"] == topic}
                assert _hits(r) == want, (topic, key)
                checked += bool(want)
    assert checked == sum(len(v) for v in expected.values()) + 300


def test_keys_answer_without_the_metadata_file(tmp_path):
    """The tier alone (no store beside it): topic ids come from the index items themselves."""
    shutil.copytree(tier(), tmp_path / "tier")
    expected = manifest("tiered_store")["queryMessage_queueId:queueOffset:commitLogOffset"]
    with TieredStore.open(tmp_path / "tier") as store:
        assert store.metadata_path is None
        for raw in (False, True):
            for topic, per in expected.items():
                for key, hits in list(per.items())[:12]:
                    assert _hits(store.query_message(topic, key, raw=raw)) == set(hits), (topic, key, raw)
        assert store.query_message("TopicA", "no-such-key").messages == []


def test_get_status_table():
    with TieredStore.open(tier()) as store:
        assert store.get_message("TopicA", 0, 46).status == "OFFSET_OVERFLOW_ONE"
        r = store.get_message("TopicA", 0, 99)
        assert (r.status, r.nextBeginOffset) == ("OFFSET_OVERFLOW_BADLY", 46)
        assert store.get_message("NoSuchTopic", 0, 0).status == "NO_MATCHED_LOGIC_QUEUE"
        r = store.get_message("TopicA", 0, 10, 1000)  # across segments
        assert [x.queueOffset for x in r.messages] == list(range(10, 46))


def test_cli_over_the_tier_and_nothing_written(capsys):
    before = tree_hash(unpack("tiered_store"))
    for where in (tier(), next(tier().iterdir()), next(next(tier().iterdir()).iterdir())):
        assert main(["info", str(where), "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["kind"] == "tiered" and info["broker"] == "broker-fx" and len(info["queues"]) == 6
        assert sum(f["indexItemCount"] for f in info["indexFiles"]) == 660
    assert main(["get", str(tier()), "TopicB", "1", "44", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [x["queueOffset"] for x in out["messages"]] == [44, 45]
    assert main(["query-key", str(tier()), "TopicA", "ord-0", "--json"]) == 0
    hits = {f"{x['queueId']}:{x['queueOffset']}:{x['commitLogOffset']}"
            for x in json.loads(capsys.readouterr().out)["messages"]}
    assert hits == set(manifest("tiered_store")["queryMessage_queueId:queueOffset:commitLogOffset"]["TopicA"]["ord-0"])
    assert main(["check", str(tier())]) == 0
    assert capsys.readouterr().out.startswith("OK: 300 messages, 300 CQ units, 660 index items")
    assert main(["info", str(tier())]) == 0
    assert "TopicC" in capsys.readouterr().out
    t = manifest("tiered_store")["messages"][40]
    assert main(["time", str(tier()), t["topic"], str(t["queueId"]), str(t["storeTimestamp"]), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["offset"]
    with TieredStore.open(tier()) as store:
        assert store.get_message(t["topic"], t["queueId"], got, 1).messages[0].storeTimestamp == t["storeTimestamp"]
    assert main(["dump", str(tier())]) == 2
    assert "needs a store" in capsys.readouterr().err
    assert tree_hash(unpack("tiered_store")) == before


def test_several_brokers_and_other_names(tmp_path, capsys):
    """Other cluster and broker names are found from the folders; two brokers ask for brokerName."""
    src = next(tier().iterdir()) / "broker-fx"
    root = tmp_path / "nas"
    for cluster, broker in (("ProdCluster", "broker-a"), ("ProdCluster", "broker-b")):
        shutil.copytree(src, root / L.cluster_folder(cluster) / broker)
    (root / "not-a-cluster" / "x").mkdir(parents=True)
    assert is_tier_folder(root)
    with pytest.raises(ConfigError, match="brokerName="):
        TieredStore.open(root)
    assert main(["info", str(root)]) == 2
    assert "--set brokerName=" in capsys.readouterr().err
    assert main(["get", str(root), "TopicA", "0", "0", "--set", "brokerName=broker-b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["keys"] == "ord-6"
    with TieredStore.open(root, {"brokerName": "broker-a"}) as store:
        assert (store.cluster, store.broker) == ("ProdCluster", "broker-a")
        assert store.query_message("TopicB", "ord-1").messages
    with pytest.raises(ConfigError, match="no broker"):
        TieredStore.open(root, {"brokerName": "broker-z"})


def test_not_a_tier(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    assert not is_tier_folder(tmp_path)
    with pytest.raises(NotAStoreError):
        TieredStore.open(tmp_path)


def test_layout_rules():
    assert L.parse_segment_name("cfcd208400000000000000000000") == 0
    assert L.parse_segment_name("3e88384000000000000000007901") == 7901
    assert L.parse_segment_name("0000000000000000000000007901") is None  # the hash must match
    assert L.segment_name(7901) == "3e88384000000000000000007901"
    assert L.parse_cluster_folder("439aea23_FixtureCluster") == "FixtureCluster"
    assert L.parse_cluster_folder("439aea24_FixtureCluster") is None
    assert L.slot_count(12224, 399) == 128 and L.slot_count(12225, 399) is None
    assert L.slot_count(12224, 399, 28 + 8 * 256) == 256  # slot 0 says, even where the size would not
    assert L.load_fastjson('{\n\t"a":{\n\t\t0:{"x":1},\n\t\t7879:{"x":2}\n\t}\n}') == {"a": {"0": {"x": 1}, "7879": {"x": 2}}}
    head = (next(tier().iterdir()) / "broker-fx/rmq_sys_INDEX/0/INDEX/cfcd208400000000000000000000").read_bytes()[:4]
    assert int.from_bytes(head, "big", signed=True) == L.END_MAGIC


# ---- a store with its tier (tieredStoreFilePath given) ---------------------------------------
def _view(root: Path, level: str):
    from engine import MessageStore
    from engine.store.tiered_view import StoreWithTier
    return StoreWithTier(MessageStore.open(root / "store"), TieredStore.open(root / "tiered"), level)


def test_store_with_tier_reads_as_the_level_says():
    m = manifest("tiered_store")
    local = {(p["topic"], p["queueId"], p["queueOffset"]): p["localCommitLogOffset"] for p in m["puts"]}
    tier_off = {(e["topic"], e["queueId"], e["queueOffset"]): e["commitLogOffset"] for e in m["messages"]}
    for level, want in (("FORCE", tier_off), ("NOT_IN_DISK", local), ("DISABLE", local), ("3", tier_off)):
        with _view(unpack("tiered_store"), level) as v:
            got = {}
            for t, q in v.tier.queues:
                for msg in read_all(v, t, q):
                    got[(t, q, msg.queueOffset)] = msg.commitLogOffset
            assert got == want, level
            assert v.get_message("TopicA", 0, 0).source.startswith("tier" if want is tier_off else "local")
            hits = v.query_message("TopicB", "ord-1")
            assert {x.queueOffset for x in hits.messages} >= {
                int(h.split(":")[1]) for h in m["queryMessage_queueId:queueOffset:commitLogOffset"]["TopicB"]["ord-1"]}
            info = v.info()["tier"]
            assert info["tieredStorageLevel"] == {"3": "FORCE"}.get(level, level)
            assert all(q["readFromTier"] == ([q["tier"][0], q["tier"][1]] if want is tier_off else None)
                       for q in info["queues"])


def test_store_whose_commitlog_is_gone_reads_the_tier(fixture_copy, capsys):
    """Retention deleted the local commitlog: under NOT_IN_DISK (the default) every read goes
    to the tier, which still holds the messages."""
    root = fixture_copy("tiered_store")
    (root / "store" / "commitlog" / "00000000000000000000").unlink()
    before = tree_hash(root / "tiered")
    m = manifest("tiered_store")
    want = {(e["topic"], e["queueId"], e["queueOffset"]): e["commitLogOffset"] for e in m["messages"]}
    with _view(root, "NOT_IN_DISK") as v:
        # past the tier's commit offset the local store answers: its queues are empty now
        got = {(t, q, x.queueOffset): x.commitLogOffset for t, q in v.tier.queues
               for x in read_all(v, t, q, ends=("OFFSET_OVERFLOW_ONE", "NO_MESSAGE_IN_QUEUE"))}
        assert got == want
        assert v.get_message("TopicC", 1, 5).source == "tier (the local commitlog is empty)"
    conf = root / "broker.conf"
    conf.write_text(f"brokerName=broker-fx\nmessageStorePlugIn=org.apache.rocketmq.tieredstore.TieredMessageStore\n"
                    f"tieredStoreFilePath={root / 'tiered'}\n")
    assert main(["get", str(root / "store"), "TopicC", "1", "5", "--count", "1", "--config", str(conf), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["source"].startswith("tier") and out["messages"][0]["commitLogOffset"] == want[("TopicC", 1, 5)]
    assert main(["info", str(root / "store"), "--config", str(conf)]) == 0
    assert "READ FROM THE TIER" in capsys.readouterr().out
    assert tree_hash(root / "tiered") == before


def test_time_and_id_lookups():
    m = manifest("tiered_store")
    with TieredStore.open(tier()) as store:
        msgs = [e for e in m["messages"] if (e["topic"], e["queueId"]) == ("TopicB", 0)]
        for e in msgs[::7]:
            off = store.get_offset_in_queue_by_time("TopicB", 0, e["storeTimestamp"])
            assert msgs[off]["storeTimestamp"] == e["storeTimestamp"] and (
                off == 0 or msgs[off - 1]["storeTimestamp"] < e["storeTimestamp"])
            up = store.get_offset_in_queue_by_time("TopicB", 0, e["storeTimestamp"], "upper")
            assert msgs[up]["storeTimestamp"] == e["storeTimestamp"] and (
                up == len(msgs) - 1 or msgs[up + 1]["storeTimestamp"] > e["storeTimestamp"])
        assert store.get_offset_in_queue_by_time("TopicB", 0, 0) == 0
        assert store.get_offset_in_queue_by_time("TopicB", 0, 2**62) == len(msgs)
        e = m["messages"][77]
        kind, found = store.lookup_id(e["uniqKey"])
        assert kind == "uniq" and [(x.topic, x.queueOffset) for x in found] == [(e["topic"], e["queueOffset"])]
        kind, found = store.lookup_id(e["msgId"])
        assert kind == "offset" and (e["topic"], e["queueId"], e["queueOffset"]) in [
            (x.topic, x.queueId, x.queueOffset) for x in found]


def test_check_finds_a_damaged_tier(tmp_path, capsys):
    shutil.copytree(tier(), tmp_path / "tier")
    seg = next((tmp_path / "tier").glob("*/broker-fx/TopicB/1/COMMIT_LOG/cfcd*"))
    data = bytearray(seg.read_bytes())
    data[233 * 0 + 30] ^= 0x01        # the first record's PHYSICALOFFSET
    seg.write_bytes(bytes(data))
    idx = next((tmp_path / "tier").glob("*/broker-fx/rmq_sys_INDEX/0/INDEX/cfcd*"))
    data = bytearray(idx.read_bytes())
    data[len(data) - 28 + 3] ^= 0x40  # the last item's hash code
    idx.write_bytes(bytes(data))
    assert main(["check", str(tmp_path / "tier"), "--json"]) == 1
    kinds = {p["kind"] for p in json.loads(capsys.readouterr().out)["problems"]}
    assert {"physical-offset", "index-slot"} <= kinds
