"""Ground truth beyond the `dledger` fixture (tests/fixtures/README_DLEDGER.md, "More DLedger
stores"): a DLedger store killed with SIGKILL mid-write, a mixed store (classic commitlog, then
DLedger on top) and a ledger with terms 1, 3 and 5, all written by the real RocketMQ 4.9.7 +
DLedger 0.3.1.2, read here read-only and compared with what the real store returned after
reopening each of them."""
import hashlib
import os

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.analysis.check import check_store
from engine.format import dledger_layout as L
from engine.store.index_file import LONG_MAX

NAMES = ["dledger_crashed", "dledger_mixed", "dledger_terms"]
LEDGER_FIELDS = ("ledgerBeginIndex", "ledgerEndIndex", "ledgerEndTerm", "committedIndex", "committedPos", "writePos",
                 "currTerm", "dividedCommitlogOffset")


@pytest.fixture(scope="module", params=NAMES)
def case(request):
    name = request.param
    s = MessageStore.open(unpack(name))
    yield name, s, manifest(name)
    s.close()


def test_bounds_and_ledger_state_after_recovery(case):
    """min/max as the real store reports them once it leads again; the DLedger state as its
    recovery (load()) left it: a crash's checkpoint lags, so committedIndex is the checkpoint's."""
    name, s, m = case
    mm = m["min_max_offsets"]
    assert (s.min_offset, s.max_offset) == (mm["minPhyOffset"], mm["maxPhyOffset"])
    d = s.info()["dledger"]
    real = m["reopen_states"]["after_load"]
    assert {k: d[k] for k in LEDGER_FIELDS} == {k: real[k] for k in LEDGER_FIELDS}
    led = m["reopen_states"]["after_leader_and_dispatch"]
    assert s.max_offset == led["rmqMaxPhyOffset"] == led["writePos"]
    assert [(f.path.name, f.wrote_position) for f in s.commitlog.data_files] == \
        [(f["name"], f["wrotePosition"]) for f in m["dledger_files"]["data"]]
    texts = m["before_reopen"]["dledger_text_files"]
    cp = L.LedgerCheckpoint.parse(texts["dledger-n0/checkpoint"])
    assert d["checkpoint"] == {"endIndex": cp.endIndex, "committedIndex": cp.committedIndex}


def test_every_message_with_its_entry_index_and_term(case):
    name, s, m = case
    mine = {x.commitLogOffset: x for x in s.iter_messages()}
    expected = m["messages"] + m["messages_not_in_consume_queue"]
    assert len(mine) == len(expected) == len(m["dledger_entries"]) + (260 if name == "dledger_mixed" else 0)
    # every acknowledged put, and (crash) the entries whose put had not returned when the process died
    assert len(expected) == m["summary"]["acknowledged"] + m["summary"]["entries_not_acknowledged"]
    terms = {e["rmqPhyOffset"]: e["term"] for e in m["dledger_entries"]}
    for e in expected:
        x = mine[e["commitLogOffset"]]
        for f in ("topic", "queueId", "queueOffset", "storeSize", "bodyCRC", "flag", "sysFlag", "bornTimestamp",
                  "storeTimestamp", "reconsumeTimes", "preparedTransactionOffset", "msgId", "keys", "tags",
                  "properties"):
            assert getattr(x, f) == e[f], (name, e["commitLogOffset"], f)
        assert len(x.body) == e["bodyLength"] and hashlib.sha256(x.body).hexdigest() == e["bodySha256"]
        entry = s.dledger_entry(x.commitLogOffset)
        if "dledgerIndex" in e:
            assert (entry["index"], entry["term"]) == (e["dledgerIndex"], terms[e["commitLogOffset"]])
        else:  # below dividedCommitlogOffset: an old commitlog record, no DLedger entry
            assert entry is None and x.commitLogOffset < m["reopen_states"]["after_load"]["dividedCommitlogOffset"]
    # every acknowledged put is there, at the offset and queue offset the writer was told
    for r in m["generator"]["records"]:
        x = mine[r["wroteOffset"]]
        assert (x.topic, x.queueId, x.queueOffset, x.msgId) == (r["topic"], r["queueId"], r["queueOffset"], r["msgId"])
        if r.get("term") is not None:
            assert s.dledger_entry(r["wroteOffset"])["term"] == r["term"]


def test_entries_and_index_records(case):
    name, s, m = case
    seen = [h for kind, _, h in s.commitlog.iter_entries() if kind == "entry"]
    assert [(h.index, h.term, h.pos, h.size, h.magic, h.channel, h.chainCrc, h.bodyCrc, h.bodySize) for h in seen] == \
        [(e["index"], e["term"], e["pos"], e["size"], e["magic"], e["channel"], e["chainCrc"], e["bodyCrc"],
          e["bodyLength"]) for e in m["dledger_entries"]]
    for e in m["dledger_entries"]:
        rec = s.commitlog.index_record(e["index"]).to_json()
        assert (rec["pos"], rec["size"], rec["index"], rec["term"]) == (e["pos"], e["size"], e["index"], e["term"])
        assert e["rmq"]["physicalOffsetField"] == e["rmqPhyOffset"]


def test_terms_above_zero():
    """Entries keep the term of the leader that appended them: 1, 3, 5 after two leadership
    round trips; the ledger end term and currterm say 5."""
    m = manifest("dledger_terms")
    with MessageStore.open(unpack("dledger_terms")) as s:
        terms = [h.term for kind, _, h in s.commitlog.iter_entries() if kind == "entry"]
        d = s.info()["dledger"]
    assert terms == [e["term"] for e in m["dledger_entries"]] == [1] * 150 + [3] * 150 + [5] * 150
    assert (d["ledgerEndTerm"], d["currTerm"], d["voteLeader"]) == (5, 5, "n0")
    assert m["summary"]["entriesByTerm"] == {"1": 150, "3": 150, "5": 150}


def _reput_units(s, m):
    """The units the real store's reput added when it restarted: one per entry at or past the
    end of the consume queues on disk (DLedger recovery never re-dispatches; reput resumes
    there). Nothing for a store shut down cleanly."""
    v = s.commitlog.restart
    return {e["rmqPhyOffset"] for e in m["dledger_entries"] if e["rmqPhyOffset"] >= v.reput_from}


def test_consume_queue_units(case):
    """Every unit as the restarted real store serves it, the ones its reput wrote at restart
    included (in the crashed store, the two entries whose put never returned: reput
    dispatches them, in memory here)."""
    name, s, m = case
    later = _reput_units(s, m)
    assert len(later) == (2 if name == "dledger_crashed" else 0)
    assert later == {e["rmqPhyOffset"] for e in m["generator"]["entries_not_acknowledged"]}
    assert s.commitlog.restart.dispatched == len(later)
    for q in m["consume_queues"]:
        cq = s.find_queue(q["topic"], q["queueId"])
        if cq is None:
            assert not q["units"]
            continue
        assert (cq.min_offset, cq.max_offset) == (q["minOffset"], q["maxOffset"]), (name, q["topic"])
        units = cq.units(cq.min_offset, cq.max_offset)
        got = [[q["minOffset"] + i, int(u["commitLogOffset"]), int(u["size"]), int(u["tagsCode"]),
                (s.dledger_entry(int(u["commitLogOffset"])) or {}).get("index")] for i, u in enumerate(units)]
        assert got == q["units"], (name, q["topic"], q["queueId"])


def test_get_message_pages_and_edges(case):
    """Every page and edge call exactly as the restarted real store answered."""
    name, s, m = case
    calls = m["get_message_calls"] + m["get_message_edge_calls"]
    for c in calls:
        r = s.get_message(c["topic"], c["queueId"], c["offset"], c["maxMsgNums"], broker=True)
        got = (r.status, r.nextBeginOffset, r.minOffset, r.maxOffset, len(r.messages))
        assert got == (c["status"], c["nextBeginOffset"], c["minOffset"], c["maxOffset"], c["messageCount"]), (name, c)
        assert [x.commitLogOffset for x in r.messages] == c["commitLogOffsets"], (name, c)
        assert [x.queueOffset for x in r.messages] == c["queueOffsets"], (name, c)
        assert r.bufferTotalSize == c["bufferTotalSize"], (name, c)
    assert len(calls) > 100


def test_key_queries(case):
    """The raw answer is the restarted real store's, for every (topic, key): after the crash
    its abnormal IndexService.load deleted the last index file (newer than the checkpoint's
    indexMsgTimestamp) and, DLedger recovery never re-dispatching, lost the keys only that
    file held; its reput indexed the entries past the consume queues' end. The exact answer
    adds the keys it lost, each marked indexLostByRocketMQ."""
    name, s, m = case
    deleted = {f["path"] for f in m["files_in_archive"] if f["path"].startswith("index/")} - \
        {f["path"] for f in m["files_after_reopen_and_clean_shutdown"] if f["path"].startswith("index/")}
    assert ["index/" + n for n in s.commitlog.restart.index_files_deleted] == sorted(deleted)
    assert bool(deleted) == (name == "dledger_crashed")
    gaps: dict = {}
    for g in m["key_query_gaps"]:
        gaps.setdefault((g["topic"], g["key"]), set()).add(g["commitLogOffset"])
    marked = 0
    for q in m["key_queries"]:
        real = q["commitLogOffsets"]
        r = s.query_message(q["topic"], q["key"], 0, LONG_MAX, q["maxNum"], raw=True)
        assert sorted(r.offsets) == real, (name, q["topic"], q["key"])  # the same entries, duplicates too
        if len(real) >= q["maxNum"]:
            continue
        x = s.query_message(q["topic"], q["key"], 0, LONG_MAX, 0)
        lost = gaps.get((q["topic"], q["key"]), set())
        assert set(x.offsets) == set(real) | lost and set(x.index_lost) == lost, (name, q["topic"], q["key"])
        hits = x.to_json(False)["messages"]
        assert {h["commitLogOffset"] for h in hits if h.get("indexLostByRocketMQ")} == lost
        marked += bool(lost)
    assert (marked > 100) == (name == "dledger_crashed")
    for e in m["messages"][::40]:
        kind, found = s.lookup_id(e["msgId"])
        assert kind == "offset" and [x.commitLogOffset for x in found] == [e["commitLogOffset"]]


def test_check_reports(case):
    name, s, m = case
    r = check_store(s)
    assert r["dledgerEntries"] == len(m["dledger_entries"])
    assert r["messages"] == len(m["messages"]) + len(m["messages_not_in_consume_queue"])
    kinds = {p["kind"] for p in r["problems"]}
    if name == "dledger_crashed":
        # damage a reader of the restarted broker sees: the keys of the index file RocketMQ
        # deletes at restart and never rebuilds. Pending, resolved by the restart (and already
        # served here): the abort file, entries past the lagging checkpoint's committedIndex,
        # the two entries reput dispatches
        assert "dledger-index-lost" in kinds and not r["ok"]
        assert kinds <= {"dledger-index-lost", "index-missing", "index-file-missing"}
        assert "cq-missing" not in kinds   # reput's units are served
        gone = next(p for p in r["problems"] if p["kind"] == "dledger-index-lost")
        assert gone["file"].endswith(s.commitlog.restart.index_files_deleted[0])
        assert min(g["commitLogOffset"] for g in m["key_query_gaps"]) >= gone["offset"]
        missing = {p["offset"] for p in r["problems"] if p["kind"] == "index-missing"}
        (f,) = s.index.lost_files
        assert missing and missing <= {int(o) for o in f.entries[1:f.header.indexCount]["commitLogOffset"]}
        pending = {p["kind"]: p for p in r.get("recoveryPending", [])}
        assert {"abort", "dledger-uncommitted", "dledger-reput"} <= set(pending)
        st = m["reopen_states"]["after_load"]
        assert f"{st['committedIndex'] + 1}..{st['ledgerEndIndex']}" in pending["dledger-uncommitted"]["detail"]
    else:
        assert r["ok"], r["problems"][:5]


def test_crashed_read_only_view_is_what_the_real_store_recovered():
    """After load() the real store's max offset is the checkpoint's committedPos (entry 510);
    once it leads again it commits to the ledger end (1505) and every entry is served, the two
    whose put never returned too. The read-only view serves the recovered ledger end, and
    names the lag."""
    m = manifest("dledger_crashed")
    st = m["reopen_states"]
    assert m["before_reopen"]["abort_exists"] and st["after_load"]["rmqMaxPhyOffset"] == st["after_load"]["committedPos"]
    assert st["after_load"]["committedIndex"] == 510 and st["after_leader_and_dispatch"]["committedIndex"] == 1505
    with MessageStore.open(unpack("dledger_crashed")) as s:
        d = s.info()["dledger"]
        assert (d["committedPos"], s.max_offset) == (st["after_load"]["committedPos"],
                                                     st["after_leader_and_dispatch"]["rmqMaxPhyOffset"])
        unacked = m["generator"]["entries_not_acknowledged"]
        assert [e["index"] for e in unacked] == [1504, 1505]
        for e in unacked:
            assert s.look_message_by_offset(e["rmqPhyOffset"]).commitLogOffset == e["rmqPhyOffset"]
            assert s.dledger_entry(e["rmqPhyOffset"])["index"] == e["index"]
        assert s.info()["abort"] is True


def test_mixed_store_reads_across_the_divide():
    m = manifest("dledger_mixed")
    div = m["reopen_states"]["after_load"]["dividedCommitlogOffset"]
    assert div == 131072 and [f["name"] for f in m["commitlog_files"]] == ["00000000000000000000",
                                                                          "00000000000000065536"]
    with MessageStore.open(unpack("dledger_mixed")) as s:
        d = s.info()["dledger"]
        assert d["oldCommitlogFiles"] == [f["name"] for f in m["commitlog_files"]]
        offs = [x.commitLogOffset for x in s.iter_messages()]
        below = [o for o in offs if o < div]
        assert len(below) == 260 and len(offs) == 520
        assert min(o for o in offs if o >= div) == div + L.ENTRY_BODY_OFFSET   # first DLedger entry at the divide
        # the old commitlog's last file was sealed by DLedgerCommitLog.recover with a RocketMQ blank
        ends = [off for off, r in s.walk() if r.status.value == "end-of-file"]
        assert any(65536 <= o < div for o in ends)


def _digest(root):
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            st = os.stat(p)
            with open(p, "rb") as fh:
                out[p] = (st.st_size, st.st_mtime_ns, hashlib.sha256(fh.read()).hexdigest())
    return out


@pytest.mark.parametrize("name", NAMES)
def test_read_only_open_changes_no_byte(fixture_copy, name):
    root = fixture_copy(name)
    before = _digest(root)
    with MessageStore.open(root) as s:
        check_store(s)
        s.get_message("TopicTest", 0, 0, 64)
        s.query_message("TopicTest", "order-dup-001", 0, LONG_MAX, 64)
    assert _digest(root) == before
