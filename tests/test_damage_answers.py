"""Answers on damaged stores, as RocketMQ 4.9.7 gives them once it has opened the store (a
differential run against the real DefaultMessageStore found each of these; its figures are in
docs/reliability.md): a ConsumeQueue file missing in the middle of a queue, a time lookup after
a recovery cut the log, check on a queue gap with an abort file, offset 0 with the first
commitlog file deleted, a body CRC damaged in the last three files after a clean shutdown, and
the last index file cut short by a crash. Every read-only open here leaves the store's bytes as
they were."""
from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import pytest

from conftest import CRASHED, key_answers, manifest, tolerant_check, unpack
from engine import MessageStore
from engine.analysis import check_store
from engine.format.cq_unit import CQ_UNIT_SIZE, roll_next_file
from engine.store import recovery
from engine.store.index_file import LONG_MAX
from reliability.relsupport import tree_digest

CQ_FILE = 1000   # the `small` fixture's mappedFileSizeConsumeQueue: 50 units a file


def _queue_with_files(store, n: int):
    return next((k, cq) for k, cq in sorted(store.queues.items()) if len(cq.queue.files) >= n)


@pytest.mark.parametrize("broker", [True, False])
def test_a_missing_middle_cq_file_is_passed_over_to_the_next(fixture_copy, broker):
    """getMessage where no CQ file holds the offset: OFFSET_FOUND_NULL and nextBeginOffset at the
    next file's first unit (ConsumeQueue.rollNextFile), so a consumer moves past the gap."""
    root = fixture_copy("small")
    with MessageStore.open(root) as s:
        (topic, qid), cq = _queue_with_files(s, 3)
        gone = cq.queue.files[1]
    gone.path.unlink()
    before = tree_digest(root)
    with MessageStore.open(root) as s:
        first = gone.file_from_offset // CQ_UNIT_SIZE
        for off in (first, first + 7):
            r = s.get_message(topic, qid, off, 32, broker=broker)
            assert (r.status, r.nextBeginOffset) == ("OFFSET_FOUND_NULL", first + CQ_FILE // CQ_UNIT_SIZE)
            assert r.nextBeginOffset == roll_next_file(off, CQ_FILE)
        r = s.get_message(topic, qid, first + CQ_FILE // CQ_UNIT_SIZE, 32, broker=broker)
        assert r.status == "FOUND" and r.messages
    assert tree_digest(root) == before


def test_check_calls_a_queue_gap_a_problem_even_after_a_crash(fixture_copy):
    """Crash recovery gives a record a unit only at its queue's end ("build consume queue
    repeatedly" below it): the units of a deleted middle file never come back, abort or not."""
    root = fixture_copy("small")
    with MessageStore.open(root) as s:
        (topic, qid), cq = _queue_with_files(s, 3)
        gone = cq.queue.files[1]
    gone.path.unlink()
    (root / "abort").write_bytes(b"")
    with MessageStore.open(root) as s:
        rep = check_store(s)
    assert not rep["ok"]
    assert any(p["kind"] == "cq-missing" for p in rep["problems"])
    assert not any(p["kind"] == "cq-behind" for p in rep["recoveryPending"])


def test_offset_zero_with_the_first_commitlog_file_deleted(fixture_copy):
    """lookMessageByOffset(0): CommitLog.getMessage asks findMappedFileByOffset(0, true), which
    returns the first file when none holds 0, and reads at 0 % mappedFileSize."""
    root = fixture_copy("small")
    (root / "commitlog" / ("0" * 20)).unlink()
    with MessageStore.open(root) as s:
        m = s.look_message_by_offset(0)
        assert m is not None and m.commitLogOffset == s.commitlog.files[0].file_from_offset == 65536
        assert s.look_message_by_offset(7) is None


def test_time_lookups_stay_inside_queues_a_crash_recovery_cut():
    """crashed_badcrc: recovery drops the damaged record and the ten after it; a time lookup
    (4.9: the file by modification time, then the nearest unit) never answers past the end."""
    with MessageStore.open(unpack("crashed_badcrc")) as s:
        assert s.max_offset == manifest("crashed_badcrc")["recovery_result"]["recovered_commitlog_max_offset"]
        for (topic, qid), cq in s.queues.items():
            if cq.max_offset > cq.min_offset:
                for t in (0, LONG_MAX):
                    assert cq.min_offset <= s.get_offset_in_queue_by_time(topic, qid, t) < cq.max_offset


def _flip_bodies(root, *msgs) -> None:
    for m in msgs:
        with MessageStore.open(root, served_view=False) as s:
            f = s.commitlog.queue.find(m.commitLogOffset)
        data = bytearray(f.path.read_bytes())
        data[data.index(m.body, m.commitLogOffset - f.file_from_offset)] ^= 0x5A   # its body CRC fails
        f.path.write_bytes(bytes(data))


def test_a_body_crc_damaged_near_the_end_is_where_the_restart_cuts(fixture_copy):
    """After a clean shutdown RocketMQ's normal recovery CRC-checks the last three files
    (checkCRCOnRecover) and ends the log at the first record that fails: a read-only open of a
    log that small (recovery.VERIFY_SPAN) does the same; the queues end there too, and time
    lookups stay inside them."""
    root = fixture_copy("small")
    with MessageStore.open(root) as s:
        files = s.commitlog.files
        victim = next(m for m in s.iter_messages(files[len(files) - 3].file_from_offset + 1, None) if m.body)
        end_before = s.max_offset
    _flip_bodies(root, victim)
    before = tree_digest(root)
    with MessageStore.open(root) as s:
        assert s.max_offset == victim.commitLogOffset < end_before
        for (topic, qid), cq in s.queues.items():
            if cq.max_offset > cq.min_offset:
                last = s.get_message(topic, qid, cq.max_offset - 1, 1)
                assert last.messages and last.messages[0].commitLogOffset < victim.commitLogOffset
                for t in (0, victim.storeTimestamp, LONG_MAX):
                    assert cq.min_offset <= s.get_offset_in_queue_by_time(topic, qid, t) < cq.max_offset
    assert tree_digest(root) == before


def test_check_says_where_the_next_start_cuts_a_big_clean_store(fixture_copy, monkeypatch):
    """Past VERIFY_SPAN the read-only open does not read the last three files, so it serves the
    records after a damaged one: check says where the broker's next start ends the log. A
    damaged record in an older file: no such note."""
    monkeypatch.setattr(recovery, "VERIFY_SPAN", -1)
    root = fixture_copy("small")
    with MessageStore.open(root) as s:
        files = s.commitlog.files
        victim = next(m for m in s.iter_messages(files[len(files) - 3].file_from_offset + 1, None) if m.body)
        older = next(m for m in s.iter_messages(files[1].file_from_offset + 1, None) if m.body)
    _flip_bodies(root, victim, older)
    with MessageStore.open(root) as s:
        assert s.max_offset > victim.commitLogOffset
        rep = check_store(s)
    crc = sorted(p["offset"] for p in rep["problems"] if p["kind"] == "commitlog-crc")
    assert crc == [older.commitLogOffset, victim.commitLogOffset]
    cuts = [n for n in rep["notes"] if n["kind"] == "restart-cut"]
    assert [n["offset"] for n in cuts] == [victim.commitLogOffset] and "dropped" in cuts[0]["detail"]


def _cut_last_index_file(root):
    f = sorted((root / "index").iterdir())[-1]
    os.truncate(f, f.stat().st_size // 2)   # its 40-byte header stays
    return f


@pytest.mark.parametrize("name", CRASHED)
def test_the_last_index_file_cut_short_by_a_crash_is_recovery_pending(fixture_copy, name):
    """RocketMQ's IndexService.load(false) maps a short index file (the map gives it its full
    size), then deletes it as its endTimestamp is past the checkpoint's indexMsgTimestamp, and
    crash recovery re-indexes its records: recovery pending, not an index-file problem, and
    the read-only view answers every key as for the store before the cut."""
    whole = tolerant_check(unpack(name))
    root = fixture_copy(name)
    cut = _cut_last_index_file(root)
    before = tree_digest(root)
    rep = tolerant_check(root)
    # (a flipped byte's loss is the stores' own problem, crashed_badcrc's and v5_crashed's: the same before and after the cut)
    assert [p["kind"] for p in rep["problems"]] == [p["kind"] for p in whole["problems"]]
    assert {p["kind"] for p in rep["problems"]} <= {"commitlog-records-lost"}
    assert not [p for p in rep["problems"] if p["kind"] == "index-file"]
    said = [p for p in rep["recoveryPending"] if p["file"] == str(cut)]
    assert [p["kind"] for p in said] == ["index-after-checkpoint"], rep["recoveryPending"]
    assert cut.name in said[0]["detail"] and "deletes it and re-indexes" in said[0]["recovery"]
    kinds = {p["kind"] for p in rep["recoveryPending"]}
    assert {p["kind"] for p in whole["recoveryPending"]} - {"index-past-end"} <= kinds   # (entries of the cut file)
    if name == "crashed":   # and the CLI says the same
        cli = subprocess.run([sys.executable, "-m", "engine", "check", str(root), "--json"], capture_output=True,
                             text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert cli.returncode == 0, cli.stderr
        report = json.loads(cli.stdout)
        assert (report["ok"], report["problems"], report["recoveryPending"]) == (True, [], rep["recoveryPending"])
    assert key_answers(name, root) == key_answers(name, unpack(name))
    assert tree_digest(root) == before, "check or a read-only open changed the store"


@pytest.mark.parametrize("how", ["no abort", "checkpoint at its end", "no whole header"])
def test_a_cut_index_file_the_broker_keeps_is_a_problem(fixture_copy, how):
    """Without abort (a clean shutdown keeps every index file), with a checkpoint whose
    indexMsgTimestamp reaches the file's endTimestamp (kept after a crash too), or with no whole
    header left: RocketMQ keeps the file with a zero tail, so its entries are lost."""
    root = fixture_copy("crashed")
    cut = _cut_last_index_file(root)
    if how == "no abort":
        (root / "abort").unlink()
    elif how == "checkpoint at its end":
        with MessageStore.open(unpack("crashed"), served_view=False) as s:
            end = s.index.files[-1].header.endTimestamp
        with open(root / "checkpoint", "r+b") as fh:
            fh.seek(16)   # indexMsgTimestamp
            fh.write(struct.pack(">q", end))
    else:
        os.truncate(cut, 20)
    before = tree_digest(root)
    rep = tolerant_check(root)
    assert not rep["ok"]
    assert [p for p in rep["problems"] if p["kind"] == "index-file" and cut.name in p["detail"]]
    assert not [p for p in rep["recoveryPending"] if p["file"] == str(cut)]
    assert tree_digest(root) == before
