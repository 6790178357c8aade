"""A crashed classic store opened read-only answers key queries as RocketMQ does once restarted
(engine/store/crash_view.py): the index files its crash recovery deletes are set aside, the
records it re-dispatches are indexed again in memory (the boundary record twice, as the real
store does), and not one byte of the store changes. check and the scans still judge the files.
The manifests of the crashed fixtures hold what RocketMQ 4.9.7 / 5.3.3 answered after its own
recovery of a copy."""
from __future__ import annotations

import struct

import pytest

from conftest import CRASHED, manifest, unpack
from engine import MessageStore
from engine.analysis import check_store
from engine.store import crash_view
from engine.store.index_file import LONG_MAX
from reliability.relsupport import tree_digest


@pytest.mark.parametrize("name", CRASHED)
def test_read_only_key_queries_equal_rocketmq_after_its_recovery(name):
    m = manifest(name)
    root = unpack(name)
    before = tree_digest(root)
    with MessageStore.open(root) as store:
        assert isinstance(store.index, crash_view.CrashIndexService)
        deleted = {f.name for f in store.index.lost_files}
        kept = {f["name"] for f in m["index_files"]}
        assert deleted and not deleted & kept   # RocketMQ's restart deleted them: its index no longer has them
        assert any("crash recovery" in w and "deleted" in w for w in store.warnings)
        for c in m["key_queries"]["cases"]:
            offs = store.index.query_offset(c["topic"], c["key"], c["maxNum"], c["begin"], c["end"])[0]
            assert offs == c["queryOffset_phyOffsets"], c["label"]
            raw = store.query_message(c["topic"], c["key"], c["begin"], c["end"], c["maxNum"], raw=True)
            assert [x.commitLogOffset for x in raw.messages] == c["queryMessage_phyOffsets"], c["label"]
        for topic, key, _src, expected in m["key_queries"]["all_pairs"]:
            assert store.index.query_offset(topic, key, 64, 0, LONG_MAX)[0] == expected, (topic, key)
    assert tree_digest(root) == before, "a read-only open changed the store"


def test_the_boundary_record_is_indexed_twice_as_rocketmq_does():
    """README: 'the message at the boundary where the deleted index file began is indexed
    again, so some keys return the same offset twice. Look for 122722.'"""
    cases = [c for c in manifest("crashed")["key_queries"]["cases"] if 122722 in c["queryOffset_phyOffsets"]]
    assert cases

    def counts(store):
        return [store.index.query_offset(c["topic"], c["key"], c["maxNum"], c["begin"], c["end"])[0].count(122722)
                for c in cases]
    with MessageStore.open(unpack("crashed")) as store:
        served = counts(store)
    with MessageStore.open(unpack("crashed"), served_view=False) as files:   # the files as they are
        on_disk = counts(files)
    assert served == [c["queryOffset_phyOffsets"].count(122722) for c in cases]
    assert all(a > b for a, b in zip(served, on_disk)), (served, on_disk)


def test_check_and_the_scans_judge_the_files():
    with MessageStore.open(unpack("crashed")) as store:
        rep = check_store(store)
        assert rep["ok"]
        assert any(p["kind"] == "index-after-checkpoint" for p in rep["recoveryPending"])
        assert crash_view.disk_index(store) is store.index.disk
        assert {f.name for f in store.index.lost_files} <= {f.name for f in crash_view.disk_index(store).files}


def test_a_long_re_dispatch_keeps_the_files_and_says_so(monkeypatch):
    monkeypatch.setattr(crash_view, "LIMIT", 10)
    with MessageStore.open(unpack("crashed")) as store:
        assert not isinstance(store.index, crash_view.CrashIndexService)
        assert any("more than this view makes: 10 records" in w for w in store.warnings)
        assert store.query_message("TopicTest", "order-dup-001").messages   # the files answer


def test_keys_recovery_never_indexes_again_are_marked_lost(fixture_copy):
    """A checkpoint whose times point past the commitlog file where the deleted index file
    began: the crash recovery scans from the next file on, so the keys the deleted index file held for older records are gone from the
    broker's index. The raw answer no longer has them; the exact one finds them and marks them."""
    root = fixture_copy("crashed")
    with MessageStore.open(root, served_view=False) as s:
        begin = s.index.files[-1].header.beginPhyOffset   # the file the recovery deletes
        start = next(f for f in s.commitlog.files if f.file_from_offset > begin).file_from_offset
        first_ts = next(iter(s.iter_messages(start, None))).storeTimestamp
        victim = next(m for m in s.iter_messages(begin, start)   # (the record at `begin` the kept file has too)
                      if m.commitLogOffset > begin and m.keys and m.sysFlag & 0xC == 0)
    with open(root / "checkpoint", "r+b") as f:   # physicMsgTimestamp, logicsMsgTimestamp
        f.write(struct.pack(">qq", first_ts + 5000, first_ts + 5000))
    before = tree_digest(root)
    with MessageStore.open(root) as store:
        key = victim.key_list[0]
        raw = store.query_message(victim.topic, key, raw=True)
        assert victim.commitLogOffset not in raw.offsets
        exact = store.query_message(victim.topic, key)
        assert victim.commitLogOffset in exact.index_lost
        assert victim.commitLogOffset in [m.commitLogOffset for m in exact.messages]
        assert any("never indexed again" in w for w in store.warnings)
    assert tree_digest(root) == before


def test_a_long_commitlog_span_is_not_even_begun(monkeypatch):
    monkeypatch.setattr(crash_view, "LIMIT_BYTES", 1000)
    with MessageStore.open(unpack("crashed")) as store:
        assert not isinstance(store.index, crash_view.CrashIndexService)
        assert any("bytes of commitlog" in w for w in store.warnings)


def _zero_last_units(root, start: int) -> int:
    """Zero each consume queue's last unit when it names a record the crash recovery re-dispatches
    (at or past `start`): the queues behind the log, the index not. Returns how many."""
    n = 0
    for qdir in sorted(p for p in (root / "consumequeue").glob("*/*") if p.is_dir()):
        files = sorted(f for f in qdir.iterdir() if f.stat().st_size)
        data = bytearray(files[-1].read_bytes()) if files else b""
        used = [i for i in range(0, len(data) - 19, 20) if any(data[i:i + 20])]
        if used and struct.unpack_from(">q", data, used[-1])[0] >= start:
            data[used[-1]:used[-1] + 20] = bytes(20)
            files[-1].write_bytes(bytes(data))
            n += 1
    return n


def test_queues_behind_the_log_get_the_units_its_recovery_writes(fixture_copy, monkeypatch):
    """recoverAbnormally dispatches every record from its start file on, so a queue that lacks
    units of those records has them again after RocketMQ's restart: the read-only view adds
    them in memory (and the index is not given the last records twice: reput then resumes at
    the queues' end, which is the log's)."""
    m = manifest("crashed")
    root = fixture_copy("crashed")
    with MessageStore.open(root, served_view=False) as s:
        start = s.commitlog.files[s.recovery_plan.start_index].file_from_offset
    assert _zero_last_units(root, start) >= 5
    expected = {(q["topic"], q["queueId"]): q["maxOffset"] for q in m["recovery_result"]["consume_queue_max_offsets"]
                if q["maxOffset"]}   # (the schedule queues RocketMQ's ScheduleMessageService names, empty)
    before = tree_digest(root)
    with MessageStore.open(root) as store:
        assert {k: cq.max_offset for k, cq in store.queues.items() if k in expected} == expected
        for c in m["key_queries"]["cases"]:
            offs = store.index.query_offset(c["topic"], c["key"], c["maxNum"], c["begin"], c["end"])[0]
            assert offs == c["queryOffset_phyOffsets"], c["label"]
        for g in m["get_message"][:20]:
            r = store.get_message(g["topic"], g["queueId"], g["offset"], g["maxMsgNums"], broker=True)
            assert (r.status, r.nextBeginOffset, r.maxOffset) == (g["status"], g["nextBeginOffset"], g["maxOffset"]), g
    assert tree_digest(root) == before, "a read-only open changed the store"
    with MessageStore.open(root, served_view=False) as files:
        as_files = {k: (cq.max_offset, cq.max_physic_offset, cq.min_offset) for k, cq in files.queues.items()}
    monkeypatch.setattr(crash_view, "LIMIT", 10)   # a view given up: the queues as their files are
    with MessageStore.open(root) as store:
        assert {k: (cq.max_offset, cq.max_physic_offset, cq.min_offset) for k, cq in store.queues.items()} == as_files
        assert {k: v[0] for k, v in as_files.items() if k in expected} != expected
        assert not any(type(cq.queue).__name__ == "MemoryFileQueue" for cq in store.queues.values())


def test_a_queue_file_the_view_makes_answers_time_lookups(fixture_copy):
    """A crashed store whose queue lost its only file: the view makes the file in memory (the
    restarted broker makes it anew), and a 4.9 time lookup reads its time as the time it was
    made instead of stat-ing a file that is not there (an untyped FileNotFoundError once)."""
    root = fixture_copy("crashed_torn")
    (root / "consumequeue" / "TopicTx" / "0" / f"{0:020d}").unlink()
    with MessageStore.open(root) as store:
        cq = store.queues[("TopicTx", 0)]
        assert cq.max_offset > 0 and type(cq.queue.files[0]).__name__ == "MemoryFile"
        for t in (0, 2 ** 62):
            assert 0 <= store.get_offset_in_queue_by_time("TopicTx", 0, t) <= cq.max_offset
