"""The broker's answers where the broker answers (issue 33, part 5): getMessage on a queue the
store never created, and queues whose first ConsumeQueue units are fillers (an LMQ whose first
dispatch RocketMQ 5.3.3 skipped), with their min offsets as a broker computes them on load.

The expected answers are derived here from the unit bytes by RocketMQ's rules (DefaultMessageStore
.getMessage, ConsumeQueue.correctMinOffset, CommitLog.getMessage/rollNextFile of 4.9.7 and 5.3.3),
not taken from the engine."""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import pytest

from engine import MessageStore, StoreConfig

FILLER = struct.pack(">qiq", 0, 0x7FFFFFFF, 0)   # fillPreBlank's unit
UNIT = struct.Struct(">qiq")
CAP_UNITS = 16000 // 20                          # maxFilterMessageSize / unit size, maxMsgNums 32


def run_cli(*args):
    p = subprocess.run([sys.executable, "-m", "engine", *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def tree(root):
    return {str(p.relative_to(root)): (p.stat().st_size, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def units_of(path):
    data = path.read_bytes()
    out = []
    for at in range(0, len(data), 20):
        phy, size, tags = UNIT.unpack_from(data, at)
        if phy < 0 or size <= 0:
            break
        out.append((phy, size))
    return out


def skip_first_lmq_dispatch(root, name="%LMQ%c"):
    """The ConsumeQueue RocketMQ 5.3.3 leaves when the first record for `name` was not dispatched
    (the "[bug]" length mismatch of "%LMQ%c,plainName": INNER_MULTI_QUEUE_OFFSET "0,") while the
    LMQ counter advanced, so the next record carried offset 1: putMessagePositionInfo creates the
    queue's first file for it, fillPreBlank writes one filler at 0 and the unit goes to 1, the later
    ones after it. Made from the real file by putting the filler where the first unit was."""
    path = root / "consumequeue" / name / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[0:20] = FILLER
    path.write_bytes(bytes(data))
    return path


def broker_answer(units, offset, cl_file_size, max_count=32):
    """getMessage's status and nextBeginOffset from `offset` over one CQ file's units (no message
    filter, every readable unit a message): a filler reads as null (MESSAGE_WAS_REMOVING) and the
    units into the rest of that commitlog file are passed over (rollNextFile)."""
    status, nfs, found = "NO_MATCHED_MESSAGE", None, 0
    q = offset
    for phy, size in units[offset:offset + max(CAP_UNITS, max_count)]:
        if found >= max_count:
            break
        q += 1
        if nfs is not None and phy < nfs:
            continue
        if phy == 0 and size == 0x7FFFFFFF:
            status = status if found else "MESSAGE_WAS_REMOVING"
            nfs = cl_file_size
            continue
        found += 1
        status, nfs = "FOUND", None
    return status, q, found


# ---- a queue the store never created ---------------------------------------------------------------
@pytest.mark.parametrize("topic,queue", [("NoSuchTopic", 0), ("LmqParent", 9), ("%LMQ%never", 0)])
def test_broker_answers_no_message_in_queue_for_an_absent_queue(fixture_copy, topic, queue):
    root = fixture_copy("v5_lmq")
    before = tree(root)
    rc, out, err = run_cli("get", root, topic, queue, 7, "--broker", "--json")
    assert rc == 0, err
    j = json.loads(out)
    # findConsumeQueue creates the queue: maxOffset 0 -> NO_MESSAGE_IN_QUEUE, nextOffsetCorrection(7, 0)
    assert (j["status"], j["nextBeginOffset"], j["minOffset"], j["maxOffset"]) == ("NO_MESSAGE_IN_QUEUE", 0, 0, 0)
    assert j["messages"] == [] and j["messageCount"] == 0
    rc, out, err = run_cli("get", root, topic, queue, 7, "--broker")
    assert rc == 0 and "status NO_MESSAGE_IN_QUEUE  next 0" in out and "has no queue" in out
    rc, out, err = run_cli("get", root, topic, queue, 7)          # the reader still says it is absent
    assert rc == 2 and ("no topic" in err or "has no queue" in err) and "Traceback" not in err
    assert tree(root) == before                                   # read-only: no queue created on disk



@pytest.mark.parametrize("fixture,topic,queue", [("v5_lmq", "NoSuchTopic", 0), ("small", "TopicTest", 9)])
def test_time_broker_answers_zero_for_an_absent_queue(fixture_copy, fixture, topic, queue):
    """getOffsetInQueueByTime: findConsumeQueue creates the queue empty, and an empty queue's
    lookup answers 0 (ConsumeQueue.getOffsetInQueueByTime finds no file)."""
    root = fixture_copy(fixture)
    before = tree(root)
    rc, out, err = run_cli("time", root, topic, queue, 1795310730000, "--broker", "--json")
    assert rc == 0, err
    assert json.loads(out)["offset"] == 0
    rc, out, err = run_cli("time", root, topic, queue, 1795310730000)   # the reader says it is absent
    assert rc == 2 and ("no topic" in err or "has no queue" in err) and "Traceback" not in err
    assert tree(root) == before


def test_a_topic_that_begins_with_a_dash_is_an_operand(tmp_path):
    """RocketMQ topics match [%|a-zA-Z0-9_-]+, so '-Orders' is a topic; the CLI reads it (and a
    key like it) as an operand, with or without '--', while a mistyped --option is still refused."""
    root = tmp_path / "s"
    with MessageStore.create(root, StoreConfig()) as s:
        s.put_message("-Orders", b"x" * 10, 0, "t", ["-k1"])
        s.put_message("-Orders", b"y" * 10, 0, "t", ["k2"])
    for args in (("get", root, "-Orders", 0, 0, "--json"), ("get", "--json", "--", root, "-Orders", 0, 0)):
        rc, out, err = run_cli(*args)
        assert rc == 0, err
        assert [m["queueOffset"] for m in json.loads(out)["messages"]] == [0, 1]
    rc, out, err = run_cli("query-key", "--json", root, "-Orders", "-k1")
    assert rc == 0, err
    assert [m["queueOffset"] for m in json.loads(out)["messages"]] == [0]
    rc, out, err = run_cli("time", "--json", root, "-Orders", 0, 0)
    assert rc == 0 and json.loads(out)["offset"] == 0, err
    rc, out, err = run_cli("get", "--jsn", root, "-Orders", 0, 0)
    assert rc == 2 and "unrecognized arguments: --jsn" in err and "Traceback" not in err
    rc, out, err = run_cli("get", root, "-Orders", "-1", 0)       # a negative number stays a number
    assert rc == 2 and "must not be negative" in err

# ---- an LMQ whose first dispatch was skipped ----------------------------------------------------------
def test_lmq_with_a_skipped_first_unit_answers_as_rocketmq(fixture_copy):
    root = fixture_copy("v5_lmq")
    path = skip_first_lmq_dispatch(root)
    units = units_of(path)
    cl_size = (root / "commitlog" / f"{0:020d}").stat().st_size
    with MessageStore.open(root) as s:
        cq = s.find_queue("%LMQ%c", 0)
        # correctMinOffset on load: the first unit at or past the commitlog min (0): the filler
        assert (cq.min_offset, cq.max_offset) == (0, len(units))
        r = s.get_message("%LMQ%c", 0, 0, 32, broker=True)
        want_status, want_next, want_found = broker_answer(units, 0, cl_size)
        assert (r.status, r.nextBeginOffset, r.minOffset, r.maxOffset) == (want_status, want_next, 0, len(units))
        assert len(r.messages) == want_found
        assert want_next > 1                                      # past the gap, not OFFSET_TOO_SMALL's 1
        if r.messages:     # the page resumes in the next commitlog file; its LMQ positions are the units'
            assert r.messages[0].commitLogOffset >= cl_size
            assert [units[q][0] for q in r.messageQueueOffset] == [m.commitLogOffset for m in r.messages]
        # the reader (no --broker) passes over the filler only and says so
        r = s.get_message("%LMQ%c", 0, 0, 4)
        assert r.status == "FOUND" and r.skipped[0] == (0, "filler unit")
        assert [m.commitLogOffset for m in r.messages] == [u[0] for u in units[1:5]]
        assert r.messageQueueOffset == [1, 2, 3, 4]
        # the other LMQs are untouched: min 0, FOUND at 0
        r = s.get_message("%LMQ%a", 0, 0, 32, broker=True)
        assert r.status == "FOUND" and r.minOffset == 0
    rc, out, err = run_cli("get", root, "%LMQ%c", 0, 0, "--broker", "--json")
    assert rc == 0, err
    j = json.loads(out)
    assert (j["status"], j["nextBeginOffset"], j["minOffset"]) == (want_status, want_next, 0)


def test_filler_falls_below_the_min_once_the_first_commitlog_file_is_gone(fixture_copy):
    root = fixture_copy("v5_lmq")
    first = root / "commitlog" / f"{0:020d}"
    cl_min = first.stat().st_size
    want = {}
    for name in ("%LMQ%a", "%LMQ%c"):      # %LMQ%a goes on in the second commitlog file, %LMQ%c does not
        units = []
        for f in sorted((root / "consumequeue" / name / "0").iterdir()):
            units += units_of(f) if f.name != f"{0:020d}" else units_of(skip_first_lmq_dispatch(root, name))
        # correctMinOffset: the first unit at or past the commitlog min; none: min = max (5.3.3)
        want[name] = next((q for q, (phy, _) in enumerate(units) if phy >= cl_min), len(units)), len(units)
    assert want["%LMQ%a"][0] < want["%LMQ%a"][1] and want["%LMQ%c"][0] == want["%LMQ%c"][1]
    first.unlink()                    # retention deleted it: the filler's 0 is below the commitlog min
    with MessageStore.open(root) as s:
        for name, (live, mx) in want.items():
            cq = s.find_queue(name, 0)
            assert (cq.min_offset, cq.max_offset) == (live, mx)
            r = s.get_message(name, 0, 0, 32, broker=True)
            assert (r.status, r.nextBeginOffset, r.minOffset) == ("OFFSET_TOO_SMALL", live, live)


def test_a_leading_filler_reads_the_same_in_any_queue(fixture_copy):
    """The rule is ConsumeQueue's, not the LMQ's: a plain queue starting with fillers (a late first
    unit) answers the same, through the compiled page loop as through the reference."""
    root = fixture_copy("v5_lmq")
    path = root / "consumequeue" / "LmqParent" / "0" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    data[0:40] = FILLER * 2
    path.write_bytes(bytes(data))
    units = units_of(path)
    cl_size = (root / "commitlog" / f"{0:020d}").stat().st_size
    with MessageStore.open(root) as s:
        assert s.find_queue("LmqParent", 0).min_offset == 0
        for off in (0, 1):
            r = s.get_message("LmqParent", 0, off, 32, broker=True)
            want_status, want_next, want_found = broker_answer(units, off, cl_size)
            assert (r.status, r.nextBeginOffset, len(r.messages)) == (want_status, want_next, want_found)
            ref = s._get_message_py("LmqParent", 0, off, 32, True)
            assert (ref.status, ref.nextBeginOffset, len(ref.messages)) == (want_status, want_next, want_found)
        r = s.get_message("LmqParent", 0, 0, 3)
        assert r.status == "FOUND" and r.skipped[:2] == [(0, "filler unit"), (1, "filler unit")]
        assert [m.commitLogOffset for m in r.messages] == [u[0] for u in units[2:5]]


def test_a_broker_page_examines_at_most_800_units(tmp_path):
    """getMessage stops after max(16000, maxMsgNums * 20) bytes of units even when it passed over
    every one: with a filler first, the units into the first commitlog file are all passed over."""
    root = tmp_path / "s"
    cfg = StoreConfig.from_mapping(dict(mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20000,
                                        maxHashSlotNum=64, maxIndexNum=256))
    with MessageStore.create(root, cfg) as w:
        for _ in range(900):
            w.put_message("T", b"x", queue_id=0)
    path = root / "consumequeue" / "T" / "0" / f"{0:020d}"
    units = units_of(path)
    assert len(units) == 900 and units[-1][0] < 1 << 20    # one CQ file, one commitlog file
    data = bytearray(path.read_bytes())
    data[0:20] = FILLER
    path.write_bytes(bytes(data))
    with MessageStore.open(root, cfg) as s:
        for n in (32, 1000):                                # the cap is max(800, maxMsgNums)
            r = s.get_message("T", 0, 0, n, broker=True)
            want = broker_answer(units_of(path), 0, 1 << 20, n)
            assert (r.status, r.nextBeginOffset, len(r.messages)) == want
            assert want[:2] == ("MESSAGE_WAS_REMOVING", max(CAP_UNITS, n) if n < 900 else 900)
