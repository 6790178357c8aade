"""A crashed DLedger store as the restarted broker serves it (RocketMQ 4.9.7 + DLedger 0.3.1.2):
the reput that resumes at the consume queues' end and the index files IndexService.load(false)
deletes, built in memory on a read-only open (engine/store/dledger_reput.py, engine/store/memory_files.py).

The `dledger` fixture, which RocketMQ shut down cleanly, is made into crashes a kill leaves:
- the consume-queue units of the last messages not yet written (reput had not reached them);
- the same with `abort`, so that the index file newer than the checkpoint's
  indexMsgTimestamp is deleted at restart;
- the last message's entry zeroed (a torn tail).
Each expected answer comes from RocketMQ's rules applied to what the real store returned for
the clean store (its manifest), not from our reader. The `dledger_crashed` fixture, a real
SIGKILL, is compared in tests/test_dledger_real.py; here its key answers go through the CLI
and the GUI's search model."""
import collections
import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.analysis.check import check_store
from engine.store.memory_files import MemoryFile
from engine.store.index_file import LONG_MAX

NAME = "dledger"
CUT = 5          # the last CUT messages of the log lose their consume-queue units
CQ_FILE = 1000   # the fixture's mappedFileSizeConsumeQueue


@pytest.fixture(scope="module")
def m():
    return manifest(NAME)


def _tree(root):
    """Every file's name, size and content hash: a read-only open must leave all of it."""
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = (os.path.getsize(p), hashlib.sha256(fh.read()).hexdigest())
    return out


def _last_units(m, n):
    """The n units with the highest commitlog offsets: the tails of their queues."""
    units = sorted((u[1], q["topic"], q["queueId"], u[0]) for q in m["consume_queues"] for u in q["units"])
    return units[-n:]


def _unwrite_units(root, units):
    """The units as a kill before reput leaves them: not yet written (zeros)."""
    for _, topic, qid, qo in units:
        at = qo * 20
        p = root / "consumequeue" / topic / str(qid) / f"{at - at % CQ_FILE:020d}"
        with open(p, "r+b") as fh:
            fh.seek(at % CQ_FILE)
            fh.write(bytes(20))


def _reput_from(m, units):
    """DefaultMessageStore.start: the largest maxPhysicOffset (unit offset + size) of what
    the consume queues still hold."""
    cut = {(t, q, qo) for _, t, q, qo in units}
    return max(u[1] + u[2] for q in m["consume_queues"] for u in q["units"]
               if (q["topic"], q["queueId"], u[0]) not in cut)


def _keys_of(msg):
    """The index keys RocketMQ's buildIndex adds for a message (UNIQ_KEY, then each KEYS token)."""
    keys = [msg["properties"]["UNIQ_KEY"]] if msg["properties"].get("UNIQ_KEY") else []
    return keys + [k for k in (msg["keys"] or "").split(" ") if k]


def _messages(m):
    return {x["commitLogOffset"]: x for x in m["messages"] + m["messages_not_in_consume_queue"]}


def _assert_queues_as_served(s, m):
    for q in m["consume_queues"]:
        cq = s.find_queue(q["topic"], q["queueId"])
        if cq is None:  # a queue the real store made in memory only (SCHEDULE_TOPIC_XXXX): no files
            assert not q["units"]
            continue
        assert (cq.min_offset, cq.max_offset) == (q["minOffset"], q["maxOffset"]), (q["topic"], q["queueId"])
        units = cq.units(cq.min_offset, cq.max_offset)
        assert [[q["minOffset"] + i, int(u["commitLogOffset"]), int(u["size"]), int(u["tagsCode"])]
                for i, u in enumerate(units)] == [u[:4] for u in q["units"]]


def test_units_reput_had_not_written_are_served(fixture_copy, m):
    """A kill before reput dispatched the last messages (a clean checkpoint, no abort): the
    restart's reput starts at the queues' largest maxPhysicOffset and writes their units, so
    every queue's max offset is the real store's (the last one would be one short), and its
    buildIndex appends to the last index file (not full): a record at that file's
    endPhyOffset is not below it, so its keys are indexed twice, as RocketMQ does."""
    root = fixture_copy(NAME)
    units = _last_units(m, CUT)
    _unwrite_units(root, units)
    before = _tree(root)
    start = _reput_from(m, units)
    last_index = m["index_files"][-1]
    assert not last_index["isWriteFull"]
    with MessageStore.open(root) as s:
        v = s.commitlog.restart
        assert (v.abnormal, v.reput_from, v.reput_to) == (False, start, m["min_max_offsets"]["maxPhyOffset"])
        assert v.index_files_deleted == [] and v.index_files_created == []
        assert sum(v.units.values()) == CUT
        _assert_queues_as_served(s, m)
        for phy, topic, qid, qo in units:  # the last message of each queue, by queue offset
            r = s.get_message(topic, qid, qo, 1, broker=True)
            assert r.status == "FOUND" and [x.commitLogOffset for x in r.messages] == [phy]
        # the last index file, copied in memory, got the records at or past its endPhyOffset again
        assert isinstance(s.index.files[-1].file, MemoryFile) and s.index.files[-1].name == \
            last_index["name"].rsplit("/", 1)[1]
        msgs = _messages(m)
        again = {o for o in msgs if o >= max(start, last_index["endPhyOffset"]) and msgs[o]["sysFlag"] & 0x0C != 0x0C}
        assert again
        queries = {(q["topic"], q["key"]): q for q in m["key_queries"]}
        checked = 0
        for o in again:
            for k in _keys_of(msgs[o]):
                q = queries[(msgs[o]["topic"], k)]
                r = s.query_message(q["topic"], k, 0, LONG_MAX, 1 << 20, raw=True, cap=0)
                assert collections.Counter(r.offsets) == collections.Counter(q["commitLogOffsets"]) + \
                    collections.Counter({o: 1}), (q["topic"], k)
                checked += 1
        assert checked
        r = check_store(s)
        pending = {p["kind"] for p in r.get("recoveryPending", [])}
        assert "dledger-reput" in pending and "cq-missing" not in {p["kind"] for p in r["problems"]}
    assert _tree(root) == before


def test_crash_loses_the_deleted_index_files_keys_and_reindexes_reputs(fixture_copy, m):
    """The same kill with `abort` left: IndexService.load(false) deletes the last index file
    (newer than the checkpoint's indexMsgTimestamp). DLedger never re-dispatches, so the keys
    only that file held are gone from RocketMQ's answers, except those of the records reput
    dispatches, which go into a new file inheriting the full file's end. The raw answer is
    exactly that; the exact answer adds the lost hits, marked."""
    root = fixture_copy(NAME)
    units = _last_units(m, CUT)
    _unwrite_units(root, units)
    (root / "abort").touch()
    before = _tree(root)
    start = _reput_from(m, units)
    ts = m["before_reopen"]["rmq_checkpoint"]["indexMsgTimestamp"]
    gone = [f for f in m["index_files"] if f["endTimestamp"] > ts]
    kept_end = max(f["endPhyOffset"] for f in m["index_files"] if f["endTimestamp"] <= ts)
    assert len(gone) == 1 and gone[0]["beginPhyOffset"] > kept_end
    lo = gone[0]["beginPhyOffset"]
    msgs = _messages(m)
    with MessageStore.open(root) as s, MessageStore.open(unpack(NAME)) as clean:
        v = s.commitlog.restart
        assert v.abnormal and v.reput_from == start
        assert v.index_files_deleted == [gone[0]["name"].rsplit("/", 1)[1]] and len(v.index_files_created) == 1
        new = s.index.files[-1]
        assert isinstance(new.file, MemoryFile) and not (root / "index" / new.name).exists()
        assert new.header.beginTimestamp >= m["index_files"][-2]["endTimestamp"]
        _assert_queues_as_served(s, m)
        compared = lost_pairs = 0
        for q in m["key_queries"]:
            real = q["commitLogOffsets"]
            if len(real) >= q["maxNum"]:
                continue
            served = [o for o in real if o < lo or o >= start]   # RocketMQ's answer after this restart
            r = s.query_message(q["topic"], q["key"], 0, LONG_MAX, q["maxNum"], raw=True)
            assert sorted(r.offsets) == sorted(served), (q["topic"], q["key"])
            x = s.query_message(q["topic"], q["key"], 0, LONG_MAX, 0)
            lost = set(real) - set(served)
            # the exact answer: the clean store's, the hits RocketMQ lost marked
            assert x.offsets == clean.query_message(q["topic"], q["key"], 0, LONG_MAX, 0).offsets
            assert set(x.index_lost) == lost & set(x.offsets), (q["topic"], q["key"])
            compared += 1
            lost_pairs += bool(lost)
        assert compared > 1800 and lost_pairs > 50
        # the last message of a cut queue: reached by queue offset and by its keys
        phy, topic, qid, qo = units[-1]
        assert [x.commitLogOffset for x in s.get_message(topic, qid, qo, 1).messages] == [phy]
        for k in _keys_of(msgs[phy]):
            assert phy in s.query_message(topic, k, 0, LONG_MAX, 64, raw=True).offsets
        r = check_store(s)
        kinds = {p["kind"] for p in r["problems"]}
        assert "dledger-index-lost" in kinds and "cq-missing" not in kinds and not r["ok"]
        assert {"abort", "dledger-reput"} <= {p["kind"] for p in r["recoveryPending"]}
    assert _tree(root) == before and not (root / "index" / v.index_files_created[0]).exists()


def test_torn_last_entry_is_not_served(fixture_copy, m):
    """The last message's entry zeroed, as a kill mid-copy leaves it: DLedger's recovery ends
    the ledger before it, DLedgerCommitLog.recover cuts its unit (truncateDirtyLogicFiles at
    the write position), so its queue is one short and neither its queue offset nor its keys
    reach it (RocketMQ's getData refuses offsets at or past committedPos)."""
    root = fixture_copy(NAME)
    phy, topic, qid, qo = _last_units(m, 1)[0]
    entry = next(e for e in m["dledger_entries"] if e["rmqPhyOffset"] == phy)
    data = max((d for d in m["dledger_files"]["data"] if d["fileFromOffset"] <= entry["pos"]),
               key=lambda d: d["fileFromOffset"])
    with open(root / "dledger-n0" / "data" / data["name"], "r+b") as fh:
        fh.seek(entry["pos"] - data["fileFromOffset"])
        fh.write(bytes(entry["size"]))
    (root / "abort").touch()
    before = _tree(root)
    q = next(x for x in m["consume_queues"] if (x["topic"], x["queueId"]) == (topic, qid))
    with MessageStore.open(root) as s:
        assert s.max_offset == entry["pos"]
        cq = s.find_queue(topic, qid)
        assert cq.max_offset == q["maxOffset"] - 1 == qo
        assert s.get_message(topic, qid, qo, 1, broker=True).status == "OFFSET_OVERFLOW_ONE"
        for k in _keys_of(_messages(m)[phy]):
            r = s.query_message(topic, k, 0, LONG_MAX, 64, raw=True)
            assert phy not in [x.commitLogOffset for x in r.messages]
    assert _tree(root) == before


def _cli(*args):
    env = dict(os.environ, PYTHONPATH=str(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    p = subprocess.run([sys.executable, "-m", "engine", *args], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout, p.stderr


def test_cli_and_gui_mark_what_rocketmq_lost():
    """On the real SIGKILLed store: query-key's exact answer marks the hits RocketMQ's index
    lost (JSON field and a word in the table), --raw answers as RocketMQ; the GUI's key search
    marks them too."""
    from gui.models.search import key_search
    m = manifest("dledger_crashed")
    root = unpack("dledger_crashed")
    gaps = collections.defaultdict(set)
    for g in m["key_query_gaps"]:
        gaps[(g["topic"], g["key"])].add(g["commitLogOffset"])
    (topic, key), lost = max(gaps.items(), key=lambda kv: len(kv[1]))
    real = next(q["commitLogOffsets"] for q in m["key_queries"] if (q["topic"], q["key"]) == (topic, key))
    rc, out, err = _cli("query-key", "--json", str(root), topic, key, "--max", "0")
    assert rc == 0, err
    hits = json.loads(out)["messages"]
    assert {h["commitLogOffset"] for h in hits} == set(real) | lost
    assert {h["commitLogOffset"] for h in hits if h.get("indexLostByRocketMQ")} == lost
    rc, out, err = _cli("query-key", "--json", "--raw", str(root), topic, key, "--max", "0")
    assert rc == 0 and sorted(json.loads(out)["offsets"]) == real
    assert not any("indexLostByRocketMQ" in h for h in json.loads(out)["messages"])
    rc, out, err = _cli("query-key", str(root), topic, key, "--max", "0")
    assert rc == 0 and "INDEX LOST BY ROCKETMQ" in out and all(str(o) in out.split("INDEX LOST")[1] for o in lost)
    with MessageStore.open(root) as s:
        res = key_search(s, topic, key, max_num=0)
        assert {h.message.commitLogOffset for h in res.hits if h.index_lost} == lost
        assert all(h.match_text == "exact, INDEX LOST BY ROCKETMQ" for h in res.hits if h.index_lost)
        assert f"{len(lost)} only in an index file RocketMQ's restart deletes" in res.summary()
        raw = key_search(s, topic, key, max_num=0, raw=True)
        assert sorted(raw.index_offsets) == real and not any(h.index_lost for h in raw.hits)
