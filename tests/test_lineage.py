"""Lineage (engine/analysis/lineage.py, `rmqstore lineage`) against the `lineage` fixture written
by the real RocketMQ 4.9.7 store with the broker's send-back, dead-letter and end-transaction
rules (README_LINEAGE.md): every life cycle, asked from each of its records, gives the
manifest's records in order, roles, role fields, final state and per-group consumption; the
handles (msgId, UNIQ_KEY, key) find the same lives; v5_timer's delivered timers and v5_lmq's
dispatches are named; the store is not modified."""
from __future__ import annotations

import hashlib
import json
import os

import pytest

from conftest import manifest, unpack
from engine.analysis.lineage import Lineage, lineage
from engine.cli.app import main
from engine.store.message_store import MessageStore

ROLE_FIELDS = ("attempt", "group", "delayLevel", "txAction")


@pytest.fixture(scope="module")
def store():
    with MessageStore.open(unpack("lineage")) as st:
        yield st


@pytest.fixture(scope="module")
def doc():
    return manifest("lineage")


def same_life(got: dict, want: dict, records: dict) -> list:
    """What differs between an answered life and the manifest's (empty: none)."""
    errs = []
    offs = [r["commitLogOffset"] for r in got["records"]]
    if offs != want["records"]:
        return [("records", offs, want["records"])]
    if [r["role"] for r in got["records"]] != want["roles"]:
        errs.append(("roles", [r["role"] for r in got["records"]], want["roles"]))
    for k in ("kind", "finalState", "originalOffset"):
        if got[k] != want[k]:
            errs.append((k, got[k], want[k]))
    for k in ("group", "retries", "delayLevel", "producerGroup", "maxReconsumeTimes"):
        if k in want and want[k] != got.get(k) and not (k == "maxReconsumeTimes" and want["finalState"] != "dead-lettered"):
            errs.append((k, got.get(k), want[k]))
    for r in got["records"]:
        m = records[r["commitLogOffset"]]
        for k in ROLE_FIELDS:
            if k in m and m[k] != r.get(k) or k not in m and k != "delayLevel" and r.get(k) is not None:
                errs.append((r["commitLogOffset"], k, r.get(k), m.get(k)))
    if got["consumption"] != want["consumption"]:
        errs.append(("consumption", got["consumption"], want["consumption"]))
    return errs


def test_every_life_from_each_of_its_records(store, doc):
    records = {r["commitLogOffset"]: r for r in doc["records"]}
    lin = Lineage(store)
    asked = 0
    for name, want in doc["lifecycles"].items():
        for off in want["records"]:
            lives = lin.lives(lin.seeds(offset=off))
            assert len(lives) == 1, (name, off, len(lives))
            assert same_life(lives[0], want, records) == [], (name, off)
            asked += 1
    assert asked == len(doc["records"]) == 855
    assert len(doc["lifecycles"]) == 482


def test_counts_match_the_manifest(store, doc):
    lin = Lineage(store)
    states, roles = {}, {}
    for want in doc["lifecycles"].values():
        life = lin.lives(lin.seeds(offset=want["originalOffset"]))[0]
        states[life["finalState"]] = states.get(life["finalState"], 0) + 1
        for r in life["records"]:
            roles[r["role"]] = roles.get(r["role"], 0) + 1
    assert states == doc["counts"]["byFinalState"]
    assert roles == doc["counts"]["byRole"]


def test_pending_delays_say_when_they_are_due(store, doc):
    assert doc["config"]["messageDelayLevel"].split()[18] == "1h"  # the broker's table, not the store's default
    hour = 3_600_000  # due = the SCHEDULE_TOPIC_XXXX unit's tagsCode, which CommitLog computed with that table
    pending = [w for w in doc["lifecycles"].values() if w["finalState"] == "pending-delay"]
    assert len(pending) == 8
    records = {r["commitLogOffset"]: r for r in doc["records"]}
    for want in pending:
        life = lineage(store, offset=want["originalOffset"])[0]
        sched = records[want["originalOffset"]]
        assert life["delayLevel"] == 19 and life["dueTimestamp"] == sched["storeTimestamp"] + hour
        assert life["records"][0]["dueTimestamp"] == life["dueTimestamp"]


def test_op_messages_and_commits_lead_to_their_half(store, doc):
    records = {r["commitLogOffset"]: r for r in doc["records"]}
    ops = [r for r in doc["records"] if r["role"] == "tx-op"]
    assert len(ops) == 22 and all(r["uniqKey"] is None for r in ops)  # not in the index: found by queue offset
    for op in ops:
        life = lineage(store, offset=op["commitLogOffset"])[0]
        half = records[life["originalOffset"]]
        assert half["role"] == "tx-half" and life["records"][-1]["halfOffset"] == half["commitLogOffset"]


def test_handles_find_the_same_lives(store, doc):
    records = {r["commitLogOffset"]: r for r in doc["records"]}
    for want in list(doc["lifecycles"].values())[::7]:
        first = records[want["originalOffset"]]
        for handle in ({"msgid": first["offsetMsgId"]}, {"msgid": want["uniqKey"]}, {"uniq": want["uniqKey"]}):
            lives = lineage(store, **handle)
            assert [life["originalOffset"] for life in lives] == [want["originalOffset"]], handle
        key = want["keys"].split()[0]
        lives = lineage(store, key=key, topic=first["topic"])
        assert want["originalOffset"] in [life["originalOffset"] for life in lives]


def test_a_shared_key_gives_every_life(store, doc):
    topic, key = "PaymentTopic", "user-6"
    want = sorted(w["originalOffset"] for w in doc["lifecycles"].values()
                  if key in (w["keys"] or "").split() and records_topic(doc, w) == topic)
    got = [life["originalOffset"] for life in lineage(store, key=key, topic=topic)]
    assert len(want) > 1 and got == want


def records_topic(doc, want):
    return next(r["topic"] for r in doc["records"] if r["commitLogOffset"] == want["records"][0])


def test_v5_timer_delivered_timers():
    """Every timer whose delivered copy is in the store: its life runs from the wheel record(s) to
    the copy in REAL_TOPIC, delivered; a wheel record without a copy is a pending timer."""
    doc = manifest("v5_timer")
    wheel = [m for m in doc["messages"] if m["topic"] == "rmq_sys_wheel_timer"]
    delivered = {m["phyOffset"] for m in doc["messages"] if "TIMER_DEQUEUE_MS" in m["propertiesRaw"]
                 and m["topic"] != "rmq_sys_wheel_timer"}
    assert delivered
    with MessageStore.open(unpack("v5_timer")) as st:
        seen = set()
        for w in wheel:
            life = lineage(st, offset=w["phyOffset"])[0]
            roles = [r["role"] for r in life["records"]]
            assert roles[0] == "timer-scheduled" and set(roles[:-1]) <= {"timer-scheduled"}
            copies = [r["commitLogOffset"] for r in life["records"] if r["role"] == "timer-delivered"]
            if copies:
                assert copies[0] in delivered and roles[-1] == "timer-delivered"
                assert life["finalState"] == "delivered" and life["kind"] == "timer"
                life2 = lineage(st, offset=copies[0])[0]
                assert life2["records"] == life["records"]
                seen.add(copies[0])
            else:
                assert life["finalState"] == "pending-timer" and life["dueTimestamp"] > 0
        assert seen == delivered


def test_v5_lmq_dispatches_are_named():
    doc = manifest("v5_lmq")
    puts = [p for p in doc["generator"]["puts"] if p.get("dispatch")]
    assert puts
    with MessageStore.open(unpack("v5_lmq")) as st:
        for p in puts:
            rec = lineage(st, offset=p["wroteOffset"])[0]["records"][0]
            assert [q["queue"] for q in rec["lmq"]] == p["dispatch"].split(",")
            assert ",".join("" if q["queueOffset"] is None else str(q["queueOffset"]) for q in rec["lmq"]) == p["INNER_MULTI_QUEUE_OFFSET_after_put"]


def _digest(root) -> str:
    h = hashlib.sha256()
    for dirpath, _dirs, files in sorted(os.walk(root)):
        for f in sorted(files):
            p = os.path.join(dirpath, f)
            h.update(p.encode() + str(os.stat(p).st_mtime_ns).encode() + str(os.path.getsize(p)).encode())
    return h.hexdigest()


def test_cli_json_and_errors(capsys, doc):
    root = unpack("lineage")
    before = _digest(root)
    want = doc["lifecycles"]["retry-0019"]
    dlq = want["records"][-1]
    assert main(["lineage", str(root), "--offset", str(dlq), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    life = out["lifecycles"][0]
    assert [r["commitLogOffset"] for r in life["records"]] == want["records"]
    assert life["finalState"] == "dead-lettered" and life["records"][-1]["role"] == "dlq"
    assert main(["lineage", str(root), "--offset", str(dlq)]) == 0
    text = capsys.readouterr().out
    assert "dead-lettered" in text and "%DLQ%payment_consumer_group" in text
    assert main(["lineage", str(root), "--offset", "5"]) == 2
    assert "no message starts" in capsys.readouterr().err
    assert main(["lineage", str(root), "--key", "order-1"]) == 2
    assert "--topic" in capsys.readouterr().err
    assert main(["lineage", str(root), "--uniq-key", "00" * 16]) == 1
    assert _digest(root) == before  # read-only: not a byte, not an mtime


def test_cli_decodes_the_body_as_get_does(capsys, doc, tmp_path):
    """decodedBody: the life's first record's body, by the same pipeline and flags as `get`."""
    root = unpack("lineage")
    before = _digest(root)
    want = doc["lifecycles"]["retry-0019"]
    dlq = want["records"][-1]
    assert main(["lineage", str(root), "--offset", str(dlq), "--json"]) == 0
    life = json.loads(capsys.readouterr().out)["lifecycles"][0]
    with MessageStore.open(root) as st:
        first = st.look_message_by_offset(want["records"][0])
    assert life["decodedBody"]["format"] == "json"
    assert life["decodedBody"]["value"] == json.loads(first.body)   # the original's body, read from the DLQ copy
    assert main(["lineage", str(root), "--offset", str(dlq), "--json", "--body-format", "hex"]) == 0
    hexed = json.loads(capsys.readouterr().out)["lifecycles"][0]["decodedBody"]
    assert hexed["format"] == "hex" and hexed["value"] == {"$bytes": first.body.hex()}
    assert main(["lineage", str(root), "--offset", str(dlq), "--decoded"]) == 0
    text = capsys.readouterr().out
    assert "decoded bodies:" in text and json.dumps(json.loads(first.body)) in text
    assert main(["lineage", str(root), "--offset", str(dlq)]) == 0
    assert "decoded bodies:" not in capsys.readouterr().out
    bad = tmp_path / "bad.avsc"
    bad.write_text("{not json")
    assert main(["lineage", str(root), "--offset", str(dlq), "--json", "--avro-schema", str(bad)]) == 2
    assert "bad.avsc" in capsys.readouterr().err
    assert _digest(root) == before
