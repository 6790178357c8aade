"""`check` finds each damage, says where, and exits 1; clean stores stay OK.

Every store here is a private copy of a RocketMQ-written conformance store, damaged on purpose."""
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import CLEAN, unpack
from engine import MessageStore

STORE_TS = 56  # TOTALSIZE MAGIC BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET SYSFLAG BORNTS BORNHOST(v4)


def check(store):
    p = subprocess.run([sys.executable, "-m", "engine", "check", str(store), "--json"], capture_output=True,
                       text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode in (0, 1), p.stderr
    report = json.loads(p.stdout)
    assert (p.returncode == 0) == report["ok"]
    return report


def kinds(report) -> set[str]:
    return {p["kind"] for p in report["problems"]}


def record(store, topic="TopicTest", queue=0, offset=3):
    with MessageStore.open(store) as st:
        m = st.get_message(topic, queue, offset, 1).messages[0]
        f = st.commitlog.queue.find(m.commitLogOffset)
        return m, f.path, m.commitLogOffset - f.file_from_offset


def patch(path, pos, data: bytes):
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


@pytest.mark.parametrize("name", CLEAN)
def test_clean_stores_are_ok(name):
    report = check(unpack(name))
    assert report["ok"] and not report["problems"], report["problems"][:5]


def test_store_timestamp_byte_breaks_the_whole_record_crc(fixture_copy):
    store = fixture_copy("v5")
    m, path, pos = record(store)
    with open(path, "rb") as fh:
        fh.seek(pos + STORE_TS + 7)
        b = fh.read(1)[0]
    patch(path, pos + STORE_TS + 7, bytes([b ^ 1]))
    report = check(store)
    hits = [p for p in report["problems"] if p["kind"] == "commitlog-crc" and p["offset"] == m.commitLogOffset]
    assert hits and "__CRC32#" in hits[0]["detail"] and hits[0]["file"].endswith(os.path.basename(path))


def test_tags_that_no_longer_hash_to_the_units_tags_code(fixture_copy):
    store = fixture_copy("small")
    m, path, pos = record(store)
    assert m.tags == "TagA"
    data = open(path, "rb").read()
    at = data.index(b"TAGS\x01TagA", pos)
    patch(path, at + 8, b"Z")  # TagA -> TagZ: same length, body CRC unchanged
    report = check(store)
    hits = [p for p in report["problems"] if p["kind"] == "cq-tags"]
    assert hits and "TopicTest/0 unit 3" in hits[0]["detail"]
    assert hits[0]["offset"] == 3 * 20 % (os.path.getsize(hits[0]["file"]))


def _index_files(store):
    return sorted((store / "index").iterdir())


def test_index_file_truncated_to_half(fixture_copy):
    store = fixture_copy("small")
    f = _index_files(store)[2]
    os.truncate(f, f.stat().st_size // 2)
    report = check(store)
    assert {"index-file", "index-missing"} <= kinds(report)
    assert any(f.name in p["detail"] or f.name in p["file"] for p in report["problems"] if p["kind"] == "index-file")


def test_index_file_deleted_from_the_middle(fixture_copy):
    store = fixture_copy("small")
    _index_files(store)[2].unlink()
    report = check(store)
    missing = [p for p in report["problems"] if p["kind"] == "index-missing"]
    assert missing and "has no index entry" in missing[0]["detail"]
    with MessageStore.open(store) as st:  # and it is real: the key named cannot be found
        off = missing[0]["offset"]
        m = st.commitlog.get_message(off)
        key = missing[0]["detail"].split("'")[1]
        assert off not in [x.commitLogOffset for x in st.query_message(m.topic, key, max_num=0).messages]


def test_index_chain_closed_into_a_cycle(fixture_copy):
    store = fixture_copy("small")
    path = _index_files(store)[0]
    with MessageStore.open(store) as st:
        f = st.index.files[0]
        slots, entries = f.slots.copy(), f.entries.copy()
    # a chain with at least two entries: its oldest entry now links to its newest
    for s in np.flatnonzero(slots > 0):
        head = int(slots[s])
        n = head
        while int(entries[n]["prevIndex"]) > 0:
            n = int(entries[n]["prevIndex"])
        if n != head:
            break
    base = 40 + 4 * len(slots)
    patch(path, base + 20 * n + 16, struct.pack(">i", head))
    report = check(store)
    hits = [p for p in report["problems"] if p["kind"] == "index-chain"]
    assert hits and f"entry {n} links to entry {head}" in hits[0]["detail"]
    assert hits[0]["offset"] == base + 20 * n + 16
    cycles = [p for p in report["problems"] if p["kind"] == "index-cycle"]
    assert len(cycles) == 1 and cycles[0]["offset"] == base + 20 * n + 16
    assert f"entries {head} -> " in cycles[0]["detail"] and f"slot {s}" in cycles[0]["detail"]


@pytest.mark.parametrize("name", ["small", "v5"])
def test_index_cycle_reached_from_a_longer_chain(fixture_copy, name):
    """A chain of three or more: its middle entry links back to the head, so the head and the
    middle loop, and the walk from the slot runs into the loop after one step. The index
    file's bytes are read with struct here, from STORE_FORMAT's layout, not the engine's."""
    store = fixture_copy(name)
    path = _index_files(store)[0]
    data = path.read_bytes()
    with MessageStore.open(store) as st:
        slot_num = st.index.files[0].slot_num
    base = 40 + 4 * slot_num
    prev = lambda e: struct.unpack_from(">i", data, base + 20 * e + 16)[0]   # noqa: E731
    for s in range(slot_num):
        head = struct.unpack_from(">i", data, 40 + 4 * s)[0]
        chain = [head] if head > 0 else []
        while chain and prev(chain[-1]) > 0:
            chain.append(prev(chain[-1]))
        if len(chain) >= 3:
            break
    else:
        pytest.skip("no chain of three entries")
    second, third = chain[1], chain[2]
    patch(path, base + 20 * third + 16, struct.pack(">i", second))    # third -> second -> third
    report = check(store)
    cycles = [p for p in report["problems"] if p["kind"] == "index-cycle"]
    assert len(cycles) == 1 and not report["ok"]
    assert cycles[0]["offset"] == base + 20 * third + 16 and cycles[0]["file"].endswith(path.name)
    assert f"entries {second} -> {third} -> {second}" in cycles[0]["detail"] and f"slot {s}" in cycles[0]["detail"]


def test_index_entry_in_the_wrong_slots_chain(fixture_copy):
    store = fixture_copy("small")
    path = _index_files(store)[0]
    with MessageStore.open(store) as st:
        f = st.index.files[0]
        slots = f.slots.copy()
    heads = np.flatnonzero(slots > 0)
    a, b = int(heads[0]), int(heads[1])
    patch(path, 40 + 4 * a, struct.pack(">i", int(slots[b])))  # slot a now names slot b's newest entry
    report = check(store)
    assert any(p["kind"] == "index-slot" and f"slot {a} names entry" in p["detail"] for p in report["problems"])


def test_cq_unit_past_the_log(fixture_copy):
    store = fixture_copy("small")
    cq = sorted((store / "consumequeue" / "TopicTest" / "1").iterdir())[0]
    patch(cq, 20 * 2, struct.pack(">q", 10 ** 12))
    report = check(store)
    assert any(p["kind"] == "cq-unit" and "past the end of the commitlog" in p["detail"] and p["offset"] == 40
               for p in report["problems"])


def test_oldest_commitlog_file_gone_is_expiry_and_check_says_so(fixture_copy):
    """The broker's cleanup deletes the oldest commitlog files: no damage, but `check` names it
    (a user who deleted one by hand must not read a bare OK) and counts the expired units."""
    store = fixture_copy("small")
    first, second = sorted((store / "commitlog").iterdir())[:2]
    start = int(second.name)
    with MessageStore.open(store) as s:
        units_before = {k: (cq.min_offset, cq.max_offset) for k, cq in s.queues.items()}
    first.unlink()
    report = check(store)
    assert report["ok"] and not report["problems"]
    notes = [n for n in report["notes"] if n["kind"] == "expired"]
    assert len(notes) == 1 and notes[0]["offset"] == start and f"begins at offset {start}," in notes[0]["detail"]
    with MessageStore.open(store) as s:
        skipped = sum(cq.min_offset - units_before[k][0] for k, cq in s.queues.items())
    assert skipped > 0 and f"the queues' {skipped} unit(s)" in notes[0]["detail"]


def test_consumer_offset_past_the_queue(fixture_copy):
    from engine.format.config_json import load_config_json, store_config_json
    store = fixture_copy("small")
    data = load_config_json(store / "config", "consumerOffset.json") or {"offsetTable": {}}
    data["offsetTable"]["TopicTest@cg_x"] = {"0": 10 ** 6}
    store_config_json(store / "config", "consumerOffset.json", data)
    report = check(store)
    assert any(p["kind"] == "config" and "cg_x" in p["detail"] for p in report["problems"])


def test_check_reports_progress_and_can_be_cancelled(fixture_copy):
    import threading
    from engine.analysis.check import CheckCancelled, check_store
    store = unpack("small")
    seen = []
    with MessageStore.open(store) as st:
        report = check_store(st, progress=lambda done, total, phase: seen.append((done, total, phase)))
        assert report["ok"] and len(seen) > 2 and seen[-1][0] == seen[-1][1]
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(CheckCancelled):
            check_store(st, cancel=cancel)


@pytest.mark.parametrize("which", ["commitlog/00000000000000131072", "consumequeue/TopicTest/1/00000000000000000000"])
def test_check_runs_on_a_store_other_commands_refuse(fixture_copy, which):
    """A file of the wrong size makes every other command refuse the store; check reports it."""
    store = fixture_copy("small")
    os.truncate(store / which, (store / which).stat().st_size // 2)
    p = subprocess.run([sys.executable, "-m", "engine", "info", str(store)], capture_output=True, text=True)
    assert p.returncode == 2
    report = check(store)
    files = [p for p in report["problems"] if p["kind"] == "file"]
    assert len(files) == 1 and which.split("/")[-1] in files[0]["detail"] and "bytes" in files[0]["detail"]
    assert not report["ok"] and report["messages"] > 1000


def test_check_task_yields_progress_and_stops_on_its_token():
    from engine.analysis.check import check_task, check_store
    from engine.tasks import Cancelled, CancelToken, Progress
    with MessageStore.open(unpack("small")) as st:
        task = check_task(st, max_problems=10)
        seen = []
        while True:
            try:
                seen.append(next(task))
            except StopIteration as stop:
                report = stop.value
                break
        assert all(isinstance(p, Progress) for p in seen) and len(seen) > 3
        assert [p.phase for p in seen[-3:]] == ["consume queues", "index", "checkpoint and config"]
        assert report == check_store(st, max_problems=10) and report["ok"]
        token = CancelToken()
        task = check_task(st, cancel=token)
        next(task)
        token.cancel()
        with pytest.raises(Cancelled):
            for _ in task:
                pass


# ---- findings a pending crash recovery resolves (abort + consume queues / index behind the log) ----
def _cut_rebuild(root, monkeypatch):
    """A store (small files: five index files, four of them full) whose rebuild was cancelled
    half-way through its re-dispatch, with every consumer group at its queue's old end: the
    queues and the index are behind the commitlog and `abort` stays."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "reliability"))
    from relsupport import build_store, cut_rebuild, small_cfg
    from engine.format.config_json import store_config_json
    build_store(root, n=600, seed=3)
    cfg = small_cfg()
    with MessageStore.open(root, cfg) as s:
        ends = {k: cq.max_offset for k, cq in s.queues.items() if cq.max_offset}
    store_config_json(root / "config", "consumerOffset.json",
                      {"offsetTable": {f"{t}@cg_all": {str(q): e} for (t, q), e in ends.items()}})
    cut_rebuild(root, cfg, monkeypatch)
    return cfg, ends


def _set_offset(root, topic, qid, offset, group="cg_x"):
    from engine.format.config_json import load_config_json, store_config_json
    data = load_config_json(root / "config", "consumerOffset.json")
    data["offsetTable"][f"{topic}@{group}"] = {str(qid): offset}
    store_config_json(root / "config", "consumerOffset.json", data)


def _offset_findings(items):
    return [p for p in items if p["kind"] == "config" and "past the queue's end" in p["detail"]]


def test_consumer_offsets_over_queues_recovery_regrows_are_pending(tmp_path, monkeypatch):
    root = tmp_path / "s"
    cfg, ends = _cut_rebuild(root, monkeypatch)
    report = check(root)
    ahead = _offset_findings(report["recoveryPending"])
    assert report["ok"] and not report["problems"], report["problems"]
    assert {"abort", "cq-behind", "index-behind"} <= {p["kind"] for p in report["recoveryPending"]}
    assert ahead and all("grows back to" in p["recovery"] for p in ahead)
    # one group beyond what the commitlog holds for its queue: that one is a problem
    (topic, qid), end = max(ends.items(), key=lambda kv: kv[1])
    _set_offset(root, topic, qid, end + 5)
    report = check(root)
    bad = _offset_findings(report["problems"])
    assert not report["ok"] and len(bad) == 1 and "cg_x" in bad[0]["detail"] and f"{topic}/{qid}" in bad[0]["detail"]
    assert report["problemCount"] == 1 and _offset_findings(report["recoveryPending"]) == ahead
    # without `abort` nothing is pending: every offset past its queue's end is a problem again
    (root / "abort").unlink()
    report = check(root)
    assert {p["detail"] for p in _offset_findings(report["problems"])} == \
        {p["detail"] for p in ahead} | {bad[0]["detail"]}
    assert not _offset_findings(report["recoveryPending"])


def test_consumer_offsets_are_inside_their_queues_once_recovery_ran(tmp_path, monkeypatch):
    root = tmp_path / "s"
    cfg, ends = _cut_rebuild(root, monkeypatch)
    with MessageStore.open(root, cfg, read_only=False):
        pass
    report = check(root)
    assert report["ok"] and not report["problems"] and not report["recoveryPending"], report
    with MessageStore.open(root, cfg) as s:
        assert {k: cq.max_offset for k, cq in s.queues.items() if cq.max_offset} == ends


def _newest_index_files_lost(root):
    """A store (small files) that lost its two newest index files, the checkpoint still naming
    the newest full one (indexMsgTimestamp after every entry left); and `abort`."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "reliability"))
    from relsupport import build_store, small_cfg
    build_store(root, n=600, seed=3)
    files = _index_files(root)
    assert len(files) >= 4
    for f in files[-2:]:
        f.unlink()
    (root / "abort").touch()
    return small_cfg()


def _index_ts_findings(items):
    return [p for p in items if p["kind"] == "checkpoint" and "after the newest index entry" in p["detail"]]


def test_index_timestamp_ahead_of_an_index_recovery_rebuilds_is_pending(tmp_path):
    from engine.store.checkpoint import Checkpoint
    root = tmp_path / "s"
    cfg = _newest_index_files_lost(root)
    report = check(root)
    pend = _index_ts_findings(report["recoveryPending"])
    assert report["ok"] and not report["problems"], report["problems"]
    assert len(pend) == 1 and pend[0]["offset"] == 16 and "re-indexes" in pend[0]["recovery"]
    assert "index-behind" in {p["kind"] for p in report["recoveryPending"]}
    # recovery re-indexes the lost files' records: the index reaches the checkpoint again
    with MessageStore.open(root, cfg, read_only=False):
        pass
    report = check(root)
    assert report["ok"] and not report["problems"] and not report["recoveryPending"], report
    cp, _ = Checkpoint.load(root / "checkpoint")
    with MessageStore.open(root, cfg) as s:
        assert cp.indexMsgTimestamp <= max(f.header.endTimestamp for f in s.index.files)


def test_index_timestamp_ahead_without_abort_or_beyond_the_log_is_a_problem(tmp_path):
    from engine.store.checkpoint import Checkpoint
    root = tmp_path / "s"
    _newest_index_files_lost(root)
    (root / "abort").unlink()   # a clean shutdown: no recovery will re-index anything
    report = check(root)
    assert len(_index_ts_findings(report["problems"])) == 1 and not report["ok"]
    assert not _index_ts_findings(report["recoveryPending"])
    (root / "abort").touch()    # pending, but no record the index lacks is stored that late
    cp, _ = Checkpoint.load(root / "checkpoint")
    cp.indexMsgTimestamp = cp.physicMsgTimestamp + 10 ** 6
    cp.store(root / "checkpoint")
    report = check(root)
    bad = _index_ts_findings(report["problems"])
    assert len(bad) == 1 and "index files are missing" in bad[0]["detail"] and not report["ok"]
    assert not _index_ts_findings(report["recoveryPending"])


# ---- damage a crash recovery does not mend (abort present) --------------------------------------
def _crashed_copy(tmp_path):
    import shutil
    root = tmp_path / "s"
    shutil.copytree(unpack("crashed"), root)
    assert (root / "abort").exists() and len(list((root / "commitlog").iterdir())) > 2
    return root


def _check_json(root):
    cp = subprocess.run([sys.executable, "-m", "engine", "check", str(root), "--json"], capture_output=True,
                        text=True)
    return cp.returncode, json.loads(cp.stdout)


def test_whole_files_of_records_past_a_crashed_logs_end_are_a_problem(tmp_path):
    """A zeroed first commitlog file in a crashed store: recovery finds the log's end at 0 and
    would delete the later files with their records. Not a torn tail: a problem."""
    root = _crashed_copy(tmp_path)
    first = sorted((root / "commitlog").iterdir())[0]
    first.write_bytes(bytes(first.stat().st_size))
    rc, j = _check_json(root)
    lost = [p for p in j["problems"] if p["kind"] == "commitlog-lost"]
    assert rc == 1 and not j["ok"] and len(lost) == 1, j["problems"]
    assert lost[0]["offset"] == int(sorted((root / "commitlog").iterdir())[1].name)


def test_keys_of_a_lost_index_file_are_missing_even_with_recovery_pending(tmp_path):
    """RocketMQ's re-dispatch indexes only records past the newest kept index file's end: the
    keys the deleted oldest file held are never indexed again, so they are problems, and a
    query after the recovery cannot find them."""
    root = _crashed_copy(tmp_path)
    sorted((root / "index").iterdir())[0].unlink()
    rc, j = _check_json(root)
    kinds = {p["kind"] for p in j["problems"]}
    assert rc == 1 and "index-missing" in kinds, j["problems"]
    with MessageStore.open(root, read_only=False) as s:   # the recovery: they stay lost
        missing = [p for p in j["problems"] if p["kind"] == "index-missing"]
        assert missing
        for p in missing[:5]:
            key = p["detail"].split("'")[1]
            topic = s.commitlog.read_record(p["offset"]).message.topic
            assert p["offset"] not in s.query_message(topic, key, max_num=64).offsets


def test_a_missing_checkpoint_is_a_note(tmp_path):
    """No answer a reader gets depends on the checkpoint: without one check says so in a note,
    as it does for a zeroed one, and stays OK on a clean store."""
    import shutil
    root = tmp_path / "s"
    shutil.copytree(unpack("small"), root)
    (root / "checkpoint").unlink()
    rc, j = _check_json(root)
    assert rc == 0 and j["ok"] and any(n["kind"] == "checkpoint" for n in j["notes"]), j
