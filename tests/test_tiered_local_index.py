"""The broker's local, unsealed tiered index (`<storePathRootDir>/tiered_index_file/<begin>`,
32-byte items chained by index; README_TIERED.md, IndexStoreFile.putKey): key queries find the
keys it holds beside the INDEX segments. The fixture's broker compacted and deleted its local
file at shutdown, so the file here is written by the documented layout from the manifest, as
MessageStoreDispatcherImpl.constructIndexFile0 would put each message's keys."""
from __future__ import annotations

import json
import shutil
import struct

from conftest import manifest
from engine.cli.app import main
from engine.store.tiered import TieredStore

BEGIN_MAGIC = (0xCCDDEEFF ^ (1880681586 + 4)) - (1 << 32)   # IndexStoreFile.BEGIN_MAGIC_CODE as an int


def java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def write_local_index(path, begin: int, slots: int, items_max: int, messages, topic_ids: dict) -> int:
    """IndexStoreFile.putKey for every key of every message: the slot holds the newest item's
    number, each item the number of the one before it in the slot. Written sparse, as a fresh
    mapped file is (a default-sized file is 680 MB of mostly holes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    heads: dict[int, int] = {}
    count = 0
    end = begin
    with open(path, "wb") as f:
        f.truncate(28 + 8 * slots + 32 * items_max)
        for e in messages:
            for key in sorted({e["uniqKey"]} | set(e["keys"].split(" "))):
                h = abs(java_string_hash(f"{e['topic']}#{key}"))
                prev = heads.get(h % slots, 0)
                count += 1
                f.seek(28 + 8 * slots + 32 * count)
                f.write(struct.pack(">iiiqiii", h, topic_ids[e["topic"]], e["queueId"], e["commitLogOffset"],
                                    e["storeSize"], (e["storeTimestamp"] - begin) // 1000, prev))
                heads[h % slots] = count
                end = max(end, e["storeTimestamp"])
        for slot, item in heads.items():
            f.seek(28 + 8 * slot)
            f.write(struct.pack(">i", item))
        f.seek(0)
        f.write(struct.pack(">iqqii", BEGIN_MAGIC, begin, end, len(heads), count))
    return count


def hits(r) -> set[str]:
    return {f"{x.queueId}:{x.queueOffset}:{x.commitLogOffset}" for x in r.messages}


def expected_hits(m) -> dict:
    want = {(t, k): set(h) for t, per in m["queryMessage_queueId:queueOffset:commitLogOffset"].items()
            for k, h in per.items()}
    for e in m["messages"]:
        want[(e["topic"], e["uniqKey"])] = {f"{e['queueId']}:{e['queueOffset']}:{e['commitLogOffset']}"}
    return want


def local_only_copy(fixture_copy):
    """The fixture with its INDEX segments gone: only a local index can answer keys."""
    root = fixture_copy("tiered_store")
    for index in (root / "tiered").glob("*/*/rmq_sys_INDEX"):
        shutil.rmtree(index)
    return root


def test_keys_are_found_in_the_local_unsealed_index(fixture_copy, capsys):
    m = manifest("tiered_store")
    root = local_only_copy(fixture_copy)
    want = expected_hits(m)
    with TieredStore.open(root / "tiered") as t:   # nothing answers keys yet
        assert all(not hits(t.query_message(topic, key)) for topic, key in list(want)[:20])
    begin = min(e["storeTimestamp"] for e in m["messages"]) - 1500
    ids = {q["topic"]: q["tieredTopicId"] for q in m["queues"]}
    local = root / "store" / "tiered_index_file" / str(begin)
    count = write_local_index(local, begin, 64, 1000, m["messages"], ids)
    before = local.read_bytes()
    # the slot count is neither stored nor the default: found from the file's chains
    with TieredStore.open(root / "tiered") as t:
        assert [f.slots for f in t.local_index] == [64] and t.local_index[0].item_count == count
        for (topic, key), expect in want.items():
            for raw in (False, True):
                assert hits(t.query_message(topic, key, raw=raw)) == expect, (topic, key, raw)
        assert t.query_message("TopicA", "ord-1", begin=begin + 10**9).messages == []   # the file's times bound it
        assert t.info()["localIndexFiles"][0]["indexItemCount"] == count
    # the broker's settings name the geometry: taken as given when the size fits
    with TieredStore.open(root / "tiered", {"tieredStoreIndexFileMaxHashSlotNum": "64",
                                            "tieredStoreIndexFileMaxIndexNum": "1000"}) as t:
        assert t.local_index[0].slots == 64
        assert hits(t.query_message("TopicB", "ord-1")) == want[("TopicB", "ord-1")]
    assert main(["info", str(root / "tiered")]) == 0   # listed beside the INDEX segments
    assert f"local {begin}" in capsys.readouterr().out
    assert main(["query-key", str(root / "tiered"), "TopicA", "ord-3", "--json"]) == 0
    assert {f"{x['queueId']}:{x['queueOffset']}:{x['commitLogOffset']}" for x in json.loads(
        capsys.readouterr().out)["messages"]} == want[("TopicA", "ord-3")]
    assert local.read_bytes() == before


def test_a_store_with_its_tier_reads_its_own_local_index(fixture_copy):
    from engine import MessageStore
    from engine.store.tiered_view import StoreWithTier
    m = manifest("tiered_store")
    root = local_only_copy(fixture_copy)
    (root / "store" / "config" / "tieredStoreMetadata.json").rename(root / "metadata.json")   # not found beside
    begin = min(e["storeTimestamp"] for e in m["messages"]) - 1500
    ids = {q["topic"]: q["tieredTopicId"] for q in m["queues"]}
    write_local_index(root / "store" / "tiered_index_file" / str(begin), begin, 64, 1000, m["messages"], ids)
    with StoreWithTier(MessageStore.open(root / "store"), TieredStore.open(root / "tiered"), "FORCE") as v:
        assert len(v.tier.local_index) == 1
        assert hits(v.query_message("TopicC", "ord-2")) == expected_hits(m)[("TopicC", "ord-2")]


def test_an_unreadable_local_index_is_a_warning(fixture_copy):
    root = local_only_copy(fixture_copy)
    folder = root / "store" / "tiered_index_file"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "1795883520000").write_bytes(b"\0" * 40)                      # no magic
    bad = bytearray(28 + 8 * 16 + 32 * 8)
    struct.pack_into(">iqqii", bad, 0, BEGIN_MAGIC, 1, 1, 1, 5)              # claims 5 items, holds none
    (folder / "1795883530000").write_bytes(bytes(bad))
    with TieredStore.open(root / "tiered") as t:
        assert any("magic" in w for w in t.warnings)
        assert any("not searched" in w for w in t.warnings)
        assert t.query_message("TopicA", "ord-1").messages == []


def test_a_default_sized_local_index_is_read_by_the_default_geometry(fixture_copy):
    """tieredStoreIndexFileMaxHashSlotNum / MaxIndexNum at their defaults (5,000,000 / 20,000,000):
    the file's size says so and its newest items sit in their chains."""
    m = manifest("tiered_store")
    root = local_only_copy(fixture_copy)
    begin = min(e["storeTimestamp"] for e in m["messages"])
    ids = {q["topic"]: q["tieredTopicId"] for q in m["queues"]}
    some = [e for e in m["messages"] if e["topic"] == "TopicC"][:40]
    write_local_index(root / "store" / "tiered_index_file" / str(begin), begin, 5_000_000, 20_000_000, some, ids)
    with TieredStore.open(root / "tiered") as t:
        assert [f.slots for f in t.local_index] == [5_000_000]
        e = some[7]
        want = {f"{e['queueId']}:{e['queueOffset']}:{e['commitLogOffset']}"}
        assert hits(t.query_message("TopicC", e["uniqKey"])) == want
