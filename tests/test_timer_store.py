"""The 5.x timer store against the `v5_timer` manifest (what RocketMQ 5.3.3's TimerCheckpoint,
TimerLog and TimerWheel classes read from the archived files, and the per-message status the
fixture tool derived): `rmqstore timers` in its three modes and the engine's TimerStore.

The same store is then rewritten with timerlog files of another size (positions, prevPos and
the wheel's firstPos/lastPos remapped here with struct, from the manifest, never with the
engine's code), and damaged, to show the reader follows the files, not this fixture."""
from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import pytest

from conftest import manifest, unpack
from engine import MessageStore
from engine.cli.app import main as cli_main

T = manifest("v5_timer")["timer"]
STATUS = [m for m in T["message_status"] if m["status"] in ("pending", "delivered")]
UNIT_FIELDS = ["size", "prevPos", "magic", "currWriteTimeMs", "delayTime", "delayedTimeMs", "offsetPy", "sizePy",
               "realTopicHash", "reserved"]


def cli(capsys, *args, rc=0):
    capsys.readouterr()
    got = cli_main([*map(str, args)])
    out = capsys.readouterr()
    assert got == rc, out.err
    return out


def cli_json(capsys, *args):
    return json.loads(cli(capsys, *args, "--json").out)


def expected_message(m: dict, pos_map=lambda p: p) -> dict:
    return {"uniqKey": m["uniqKey"], "realTopic": m["realTopic"], "realQueueId": int(m["realQueueId"]),
            "fireTime": int(m["TIMER_OUT_MS"]), "status": m["status"], "rollTimes": m["rollTimes"],
            "wheelCommitLogOffsets": m["wheelTopicRecords_phyOffsets"],
            "deliveredCommitLogOffset": m["deliveredRecords"][0]["phyOffset"] if m["deliveredRecords"] else None,
            "delivered": [[d["phyOffset"], d["topic"], d["queueId"], d["queueOffset"]] for d in m["deliveredRecords"]],
            "units": [[pos_map(u["timerlogPos"]), u["magic"], u["delayedTimeMs"], u["forRecordAt"]]
                      for u in m["timerlogUnits"]]}


def got_message(o: dict) -> dict:
    return {"uniqKey": o["uniqKey"], "realTopic": o["realTopic"], "realQueueId": o["realQueueId"],
            "fireTime": o["fireTime"], "status": o["status"], "rollTimes": o["rollTimes"],
            "wheelCommitLogOffsets": o["wheelCommitLogOffsets"], "deliveredCommitLogOffset": o["deliveredCommitLogOffset"],
            "delivered": [[d["commitLogOffset"], d["topic"], d["queueId"], d["queueOffset"]]
                          for d in o["deliveredRecords"]],
            "units": [[u["timerlogPos"], u["magic"], u["delayedTimeMs"], u["commitLogOffset"]]
                      for u in o["timerlogUnits"]]}


def check_messages(out: list[dict], pos_map=lambda p: p) -> None:
    want = {m["uniqKey"]: expected_message(m, pos_map) for m in STATUS}
    got = {o["uniqKey"]: got_message(o) for o in out}
    assert set(got) == set(want)
    for k in want:
        assert got[k] == want[k], k
    counts = {s: sum(o["status"] == s for o in out) for s in ("pending", "delivered")}
    assert counts == {s: T["counts"][s] for s in counts}


# ---- the fixture as RocketMQ wrote it ---------------------------------------------------------------
def test_every_timer_message_as_the_manifest_says(capsys):
    out = cli_json(capsys, "timers", unpack("v5_timer"))
    check_messages(out)
    fires = [o["fireTime"] for o in out]
    assert fires == sorted(fires)                            # by fire time
    for o in out:                                            # where each one is
        assert o["wheelRecords"][0]["commitLogOffset"] == o["wheelCommitLogOffsets"][0]
        assert all(r["queueId"] == 0 for r in o["wheelRecords"])
        newest = [u for u in o["timerlogUnits"] if u["commitLogOffset"] == o["wheelCommitLogOffsets"][-1]][-1]
        assert o["slotTimeMs"] == newest["delayedTimeMs"]
        assert o["wheelSlot"] == (newest["delayedTimeMs"] // 1000) % 1209600
        assert o["stage"] == ("delivered" if o["status"] == "delivered" else "inWheel")
        assert o["timerlogPositions"] == [u["timerlogPos"] for u in o["timerlogUnits"]]


def test_the_past_message_is_not_a_timer_message(capsys):
    past = [m for m in T["message_status"] if m["status"] not in ("pending", "delivered")]
    assert len(past) == 1
    out = cli_json(capsys, "timers", unpack("v5_timer"))
    assert past[0]["uniqKey"] not in {o["uniqKey"] for o in out}


def test_fire_time_and_status_filters(capsys):
    root = unpack("v5_timer")
    lo, hi = 1795530757000, 1795531650000
    out = cli_json(capsys, "timers", root, "--from", lo, "--to", hi, "--status", "pending")
    want = {m["uniqKey"] for m in STATUS if m["status"] == "pending" and lo <= int(m["TIMER_OUT_MS"]) <= hi}
    assert {o["uniqKey"] for o in out} == want and want
    iso = cli_json(capsys, "timers", root, "--from", "2026-11-24T14:32:37+00:00", "--to", "2026-11-24T14:47:30Z",
                   "--status", "pending")
    assert iso == out
    delivered = cli_json(capsys, "timers", root, "--status", "delivered")
    assert {o["uniqKey"] for o in delivered} == {m["uniqKey"] for m in STATUS if m["status"] == "delivered"}


def test_timerlog_units_and_blanks(capsys):
    out = cli_json(capsys, "timers", unpack("v5_timer"), "--units")
    assert len(out) == len(T["timerlog_units"])
    for got, want in zip(out, T["timerlog_units"]):
        assert got["timerlogPos"] == want["pos"]
        if want.get("blank"):
            assert got["blank"] and got["size"] == want["size"]
        else:
            assert {k: got[k] for k in UNIT_FIELDS} == {k: want[k] for k in UNIT_FIELDS}


def test_timerlog_files_and_timercheck():
    with MessageStore.open(unpack("v5_timer")) as s:
        summary = s.info()["timerStore"]
    assert [(f["name"], f["fileFromOffset"], f["fileSize"]) for f in summary["timerlogFiles"]] == \
        [(f["name"], f["fileFromOffset"], f["fileSize"]) for f in T["timerlog_files"]]
    cp, want = summary["timercheck"], T["timercheck"]
    for k in ("lastReadTimeMs", "lastTimerLogFlushPos", "lastTimerQueueOffset", "masterTimerQueueOffset"):
        assert cp[k] == want[k]
    assert cp["dataVersion"] == {"stateVersion": want["dataVersion_stateVersion"],
                                 "timestamp": want["dataVersion_timestamp"], "counter": want["dataVersion_counter"]}
    assert cp["fileSize"] == want["file_size"]
    assert summary["precisionMs"] == 1000 and summary["precisionSource"] == "files"
    assert summary["timerlogFileSize"] == 4096 and summary["wheelOccupiedSlots"] == len(T["wheel_raw_nonzero"])


def test_wheel_raw_slots_and_get_slot(capsys):
    root = unpack("v5_timer")
    slots = cli_json(capsys, "timers", root, "--wheel")
    assert [[s["slot"], s["time"], s["timeMs"], s["firstPos"], s["lastPos"], s["num"], s["magic"]] for s in slots] \
        == T["wheel_raw_nonzero"]
    for s in slots:  # each chain is its units: lastPos back through prevPos, num of them
        assert len(s["chain"]) == s["num"] and s["chain"][0] == s["lastPos"] and s["chain"][-1] == s["firstPos"]
        assert s["processed"] == (s["timeMs"] <= T["timercheck"]["lastReadTimeMs"]) and s["current"]
    for q, idx, *slot in T["wheel_getSlot"]:
        got = cli_json(capsys, "timers", root, "--wheel", "--at", q)
        assert [got["queriedTimeMs"], got["slot"], got["timeMs"], got["firstPos"], got["lastPos"], got["num"],
                got["magic"]] == [q, idx, *slot]
    # a stale lap and an untouched slot both read as empty (TimerWheel.getSlot)
    lap = 1209600 * 1000
    for q in (T["wheel_getSlot"][0][0] + lap, T["wheel_getSlot"][0][0] + 1000 * 3600):
        got = cli_json(capsys, "timers", root, "--wheel", "--at", q)
        assert (got["timeMs"], got["firstPos"], got["lastPos"]) == (-1, -1, -1)


def test_human_output_and_no_timer_store(capsys):
    root = unpack("v5_timer")
    text = cli(capsys, "timers", root).out
    assert "69 timer messages: 36 pending, 33 delivered" in text
    assert STATUS[0]["uniqKey"] in text                      # keys are never clipped
    assert "484411" in cli(capsys, "timers", root, "--wheel").out
    assert "blank" in cli(capsys, "timers", root, "--units").out
    err = cli(capsys, "timers", unpack("v5"), rc=2).err
    assert err.count("\n") == 1 and "no timer store" in err
    with MessageStore.open(unpack("v5")) as s:
        assert s.timer is None and s.info()["timerStore"] is None


def _hashes(root: Path) -> dict:
    out = {}
    for dirpath, _, files in os.walk(root):
        for n in files:
            p = Path(dirpath) / n
            st = p.stat()
            out[str(p)] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_size)
    return out


def test_reading_the_timer_store_changes_nothing(capsys, fixture_copy):
    root = fixture_copy("v5_timer")
    before = _hashes(root)
    for extra in ([], ["--wheel"], ["--units"], ["--wheel", "--at", "1795530811000"]):
        cli(capsys, "timers", root, *extra)
        cli(capsys, "timers", root, *extra, "--json")
    assert _hashes(root) == before


# ---- other shapes: another timerlog file size, damage, no timercheck ---------------------------------
def resplit(root: Path, file_size: int) -> dict:
    """Rewrite timerlog/ as TimerLog.append would have with `file_size`-byte files: a unit goes
    in only while 52 + 16 bytes are left, else a blank (remaining, 0, -875286124) ends the file.
    prevPos, the wheel's firstPos/lastPos and timercheck's flush position follow. Returns old -> new."""
    units = [u for u in T["timerlog_units"] if not u.get("blank")]
    for f in (root / "timerlog").iterdir():
        f.unlink()
    pos_map, files, cur, used = {}, [], None, 0
    for u in units:
        if cur is None or 52 + 16 > file_size - used:
            if cur is not None:
                struct.pack_into(">iqi", cur, used, file_size - used, 0, -875286124)
            cur, used = bytearray(file_size), 0
            files.append(cur)
        pos_map[u["pos"]] = (len(files) - 1) * file_size + used
        used += 52
    for u in units:
        f = files[pos_map[u["pos"]] // file_size]
        prev = pos_map.get(u["prevPos"], -1)
        struct.pack_into(">iqiqiqiiq", f, pos_map[u["pos"]] % file_size, 52, prev, u["magic"], u["currWriteTimeMs"],
                         u["delayTime"], u["offsetPy"], u["sizePy"], u["realTopicHash"], u["reserved"])
    for i, f in enumerate(files):
        (root / "timerlog" / f"{i * file_size:020d}").write_bytes(bytes(f))
    with open(root / "timerwheel", "r+b") as fh:
        for idx, _, _, first, last, _, _ in T["wheel_raw_nonzero"]:
            fh.seek(idx * 32 + 8)
            fh.write(struct.pack(">qq", pos_map[first], pos_map[last]))
    return pos_map


def test_another_timerlog_file_size_is_read_from_the_files(capsys, fixture_copy):
    root = fixture_copy("v5_timer")
    pos_map = resplit(root, 1000)          # 18 units and a 64-byte blank per file, 8 files
    check_messages(cli_json(capsys, "timers", root), pos_map.__getitem__)
    units = cli_json(capsys, "timers", root, "--units")
    blanks = [u for u in units if u.get("blank")]
    assert len(blanks) == 7 and all(b["size"] == 64 and b["timerlogPos"] % 1000 == 936 for b in blanks)
    assert [u["timerlogPos"] for u in units if not u.get("blank")] == sorted(pos_map.values())
    slots = cli_json(capsys, "timers", root, "--wheel")
    assert all(len(s["chain"]) == s["num"] for s in slots)
    with MessageStore.open(root) as s:
        assert s.timer.summary()["timerlogFileSize"] == 1000 and len(s.timer.timerlog.files) == 8


def test_a_damaged_unit_ends_its_file_with_a_warning(capsys, fixture_copy):
    root = fixture_copy("v5_timer")
    with open(root / "timerlog" / "00000000000000000000", "r+b") as fh:
        fh.seek(52 * 70)
        fh.write(struct.pack(">i", 12345))
    with MessageStore.open(root) as s:
        assert s.timer.summary()["timerlogUnits"] == 133  # the quick look at the ends sees a full file
        assert len(s.timer.timerlog.units) == 133 - 8     # reading them: units 70..77 are passed over
        assert any("damaged" in w and "3640" in w for w in s.timer.summary()["warnings"])
        assert s.timer.summary()["timerlogFiles"][0]["stop"] == "damaged"
    out = cli_json(capsys, "timers", root)
    assert len(out) == len(STATUS)                        # the records are still found through the CQ


def test_without_timercheck_status_still_follows_the_delivered_copies(capsys, fixture_copy):
    root = fixture_copy("v5_timer")
    (root / "config" / "timercheck").unlink()
    with MessageStore.open(root) as s:
        assert s.timer is not None and s.timer.checkpoint is None
        assert any("timercheck" in w for w in s.warnings)
    out = cli_json(capsys, "timers", root)
    assert {o["uniqKey"]: o["status"] for o in out} == {m["uniqKey"]: m["status"] for m in STATUS}


@pytest.mark.parametrize("setting", ["timerPrecisionMs=1000", "mappedFileSizeTimerLog=4096"])
def test_settings_given_are_used(capsys, setting):
    out = cli_json(capsys, "timers", unpack("v5_timer"), "--set", setting)
    check_messages(out)


def test_timermetrics_when_a_broker_wrote_it(capsys, fixture_copy):
    root = fixture_copy("v5_timer")
    assert (root / "config" / "timermetrics").stat().st_size == 0        # the fixture's, as made
    info = cli_json(capsys, "info", root)
    assert info["timerStore"]["timerMetrics"] is None
    (root / "config" / "timermetrics").write_text(
        '{"dataVersion":{"counter":3,"timestamp":1795530797142},"timingCount":{"TimerTopic":{"count":12}}}')
    info = cli_json(capsys, "info", root)
    assert info["timerStore"]["timerMetrics"]["timingCount"] == {"TimerTopic": {"count": 12}}


def test_another_precision_is_read_from_the_wheel(capsys, fixture_copy):
    """The same slots written as a 500 ms wheel would hold them (stored time = timeMs / 500, at
    slot (timeMs / 500) % 1209600): the precision, slot indexes and getSlot follow."""
    root = fixture_copy("v5_timer")
    wheel = root / "timerwheel"
    wheel.unlink()
    with open(wheel, "wb") as fh:
        fh.truncate(38_707_200)
        for _, _, ms, first, last, num, magic in T["wheel_raw_nonzero"]:
            fh.seek((ms // 500) % 1_209_600 * 32)
            fh.write(struct.pack(">qqqii", ms // 500, first, last, num, magic))
    with MessageStore.open(root) as s:
        assert (s.timer.precision_ms, s.timer.precision_source) == (500, "files")
    out = cli_json(capsys, "timers", root)
    check_messages(out)
    assert all(o["wheelSlot"] == (o["slotTimeMs"] // 500) % 1_209_600 for o in out)
    slots = cli_json(capsys, "timers", root, "--wheel")
    assert [(s["slot"], s["timeMs"], s["lastPos"]) for s in slots] == \
        [((w[2] // 500) % 1_209_600, w[2], w[4]) for w in T["wheel_raw_nonzero"]]
    q = T["wheel_getSlot"][5][0]
    got = cli_json(capsys, "timers", root, "--wheel", "--at", q + 499)      # the same 500 ms slot
    assert (got["slot"], got["timeMs"]) == ((q // 500) % 1_209_600, q)
    got = cli_json(capsys, "timers", root, "--wheel", "--at", q + 500)      # the next one: empty
    assert got["timeMs"] == -1


def _short_timercheck(root):
    (root / "config" / "timercheck").write_bytes(b"\0" * 20)


def _fifo_timercheck(root):
    (root / "config" / "timercheck").unlink()
    os.mkfifo(root / "config" / "timercheck")


def _garbage_timerlog(root):
    (root / "timerlog" / "00000000000000000000").write_bytes(os.urandom(4096))


def _empty_wheel(root):
    (root / "timerwheel").write_bytes(b"")


def _odd_wheel(root):
    with open(root / "timerwheel", "r+b") as fh:
        fh.truncate(38_707_200 - 7)


def _stray_timerlog_files(root):
    (root / "timerlog" / "00000000000000000100").write_bytes(b"\0" * 4096)   # not a multiple of the size
    (root / "timerlog" / "notes.txt").write_text("hello")


@pytest.mark.parametrize("damage,says", [(_short_timercheck, "timercheck holds 20 bytes"),
                                         (_fifo_timercheck, "not a regular file"),
                                         (_garbage_timerlog, "damaged"), (_empty_wheel, "timerwheel is 0 bytes"),
                                         (_odd_wheel, "reading it as 1209599 slots"),
                                         (_stray_timerlog_files, "not a multiple")])
def test_damaged_timer_files_are_warnings_never_a_hang(capsys, fixture_copy, damage, says):
    root = fixture_copy("v5_timer")
    damage(root)
    with MessageStore.open(root) as s:
        assert s.timer is not None
        s.timer.timerlog and s.timer.timerlog.units
        assert any(says in w for w in s.warnings + s.timer.warnings), s.warnings
    for extra in ([], ["--wheel"], ["--units"]):
        out = cli_json(capsys, "timers", root, *extra)
        assert isinstance(out, list)
    out = cli_json(capsys, "timers", root)
    assert {o["uniqKey"] for o in out} == set(u["uniqKey"] for u in STATUS)
