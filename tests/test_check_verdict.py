"""check's verdict is what a reader gets (issue 33): index completeness judged against the
commitlog (not against the index files that survived), a compressed flag that must
decompress, and a crash's leftovers as their own verdict (recovery pending, exit 0) --
on RocketMQ's own stores, damaged here the way the outside probe damaged them."""
import contextlib
import io
import json
import struct
import zlib

import pytest

from conftest import manifest, unpack
from engine.analysis.check import check_store
from engine.cli.app import main
from engine.config import StoreConfig
from engine.store.message_store import MessageStore
from test_live_and_cli import tree_digest


def run(*argv, timeout=None):
    """The CLI in this process: (exit code, stdout, stderr, 0), what test_trust's `run` gives
    from a child (~1 s of start-up each; the compressed-body test keeps one, for its
    pure-Python environment)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([str(a) for a in argv])
        except SystemExit as e:   # argparse's refusals
            code = e.code
    return code, out.getvalue(), err.getvalue(), 0


def check_json(root, *extra):
    rc, out, err, _ = run("check", "--json", root, *extra, timeout=120)
    assert rc in (0, 1), err
    return rc, json.loads(out)


def kinds(report, key="problems"):
    return {p["kind"] for p in report[key]}


def key_queries_answer(root, key, topic) -> int:
    rc, out, err, _ = run("query-key", "--json", root, topic, key)
    assert rc in (0, 1), err
    return len(json.loads(out).get("messages", json.loads(out).get("hits", [])))


# ---- index completeness against the commitlog ---------------------------------------------
@pytest.mark.parametrize("name", ["small", "default", "v5", "v5_timer", "v5_lmq", "dledger"])
def test_every_index_file_deleted_is_damage(fixture_copy, name):
    root = fixture_copy(name)
    rc, r = check_json(root)
    assert rc == 0 and r["ok"], r["problems"][:3]
    for f in (root / "index").iterdir():
        f.unlink()
    rc, r = check_json(root)
    assert rc == 1 and not r["ok"]
    gone = [p for p in r["problems"] if p["kind"] == "index-file-missing"]
    assert gone and "there is no index file" in gone[0]["detail"]
    assert "index-missing" in kinds(r)
    assert r["problemCount"] > 100   # every key counted, the first 100 worded


def _index_files(root):
    return sorted(p for p in (root / "index").iterdir())


def _header(path):
    """(beginPhyOffset, endPhyOffset, indexCount) of an index file's header."""
    b = path.read_bytes()[:40]
    _, _, begin, end, _, count = struct.unpack(">qqqqii", b)
    return begin, end, count


@pytest.mark.parametrize("how", ["delete", "zero"])
def test_oldest_index_file_deleted_or_zeroed(fixture_copy, how):
    """RocketMQ deletes an index file only once the commitlog no longer holds its records: a
    missing oldest file is damage however many files remain (the old rule took its range
    from the files that were left, so it shrank with every deletion)."""
    if True:
        root = fixture_copy("small")
        oldest = _index_files(root)[0]
        begin, end, count = _header(oldest)
        assert count > 1
        if how == "delete":
            oldest.unlink()
        else:
            oldest.write_bytes(bytes(oldest.stat().st_size))
        rc, r = check_json(root)
        assert rc == 1
        (gap,) = [p for p in r["problems"] if p["kind"] == "index-file-missing"]
        assert "before the oldest index file" in gap["detail"]
        assert gap["offset"] == begin == 0
        missing = [p for p in r["problems"] if p["kind"] == "index-missing"]
        assert missing and all(p["offset"] <= end for p in missing)


def test_middle_and_newest_index_files_deleted(fixture_copy):
    root = fixture_copy("small")
    files = _index_files(root)
    files[len(files) // 2].unlink()
    files[-1].unlink()
    rc, r = check_json(root)
    assert rc == 1
    words = [p["detail"] for p in r["problems"] if p["kind"] == "index-file-missing"]
    assert len(words) == 2
    assert any("between index files" in w for w in words) and any("after the newest" in w for w in words)


def test_retention_is_not_a_missing_index(fixture_copy):
    """Retention: commitlog files deleted from the front, and with them every index file whose
    endPhyOffset is below the new min offset (IndexService.deleteExpiredFile): nothing a
    reader can ask for is missing."""
    root = fixture_copy("small")
    logs = sorted((root / "commitlog").iterdir())
    for f in logs[:3]:
        f.unlink()
    new_min = int(logs[3].name)
    for f in _index_files(root)[:-1]:
        if _header(f)[1] < new_min:
            f.unlink()
    with MessageStore.open(root, read_only=True) as st:
        r = check_store(st)
    assert not {"index-missing", "index-file-missing"} & kinds(r), r["problems"][:3]


def test_index_disabled_needs_no_index(fixture_copy):
    root = fixture_copy("small")
    for f in _index_files(root):
        f.unlink()
    rc, r = check_json(root, "--set", "messageIndexEnable=false")
    assert not {"index-missing", "index-file-missing"} & kinds(r), r["problems"][:3]


# ---- flags a reader acts on ---------------------------------------------------------------
SYSFLAG_POS = 36


def _set_sysflag(root, offset, bits):
    path = root / "commitlog" / f"{0:020d}"
    with open(path, "r+b") as f:
        f.seek(offset + SYSFLAG_POS)
        v = struct.unpack(">i", f.read(4))[0]
        f.seek(offset + SYSFLAG_POS)
        f.write(struct.pack(">i", v | bits))


@pytest.mark.parametrize("pure", [False, True])
def test_compressed_flag_on_a_plain_body(fixture_copy, pure, monkeypatch):
    root = fixture_copy("small")
    _set_sysflag(root, 0, 0x1)  # the first record: a plain text body
    env = {"RMQSTORE_PURE_PYTHON": "1"} if pure else {}
    import os
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-m", "engine", "check", "--json", str(root)], capture_output=True,
                       text=True, env={**os.environ, **env}, timeout=120)
    r = json.loads(p.stdout)
    assert p.returncode == 1
    (bad,) = [x for x in r["problems"] if x["kind"] == "commitlog-body"]
    assert bad["offset"] == 0 and "does not decompress" in bad["detail"]


def test_compressed_bodies_that_decompress_pass_and_truncated_ones_fail(tmp_path):
    cfg = StoreConfig.from_mapping({"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 6000,
                                    "maxHashSlotNum": 64, "maxIndexNum": 256})
    root = tmp_path / "s"
    body = b"hello compressed world " * 40
    with MessageStore.create(root, cfg) as st:
        good = st.put_message("T", zlib.compress(body), 0, None, None, {"KEYS": "k1"}, sys_flag=0x1)
        torn = st.put_message("T", zlib.compress(body)[:-9], 0, None, None, {"KEYS": "k2"}, sys_flag=0x1)
    with MessageStore.open(root, read_only=True) as st:
        assert st.look_message_by_offset(good.commitLogOffset).body_decompressed() == body
        r = check_store(st)
    (bad,) = r["problems"]
    assert bad["kind"] == "commitlog-body" and bad["offset"] == torn.commitLogOffset
    assert "ends early" in bad["detail"]


# ---- a crash's leftovers: their own verdict -----------------------------------------------
@pytest.mark.parametrize("name", ["crashed", "crashed_torn", "crashed_badcrc", "crashed_live", "v5_crashed"])
def test_crashed_stores_are_ok_with_recovery_pending(fixture_copy, name):
    """A killed writer's leftovers are recovery pending; a byte flipped inside the last file
    (crashed_badcrc, v5_crashed) is damage: the cut drops the whole records after it too."""
    root = fixture_copy(name)
    before = tree_digest(root)
    flipped = name in ("crashed_badcrc", "v5_crashed")
    rc, out, err, _ = run("check", root)
    assert rc == (1 if flipped else 0), out
    assert out.startswith("PROBLEMS (recovery pending: " if flipped else "OK (recovery pending: ")
    rc, r = check_json(root)
    if flipped:
        (lost,) = r["problems"]
        assert lost["kind"] == "commitlog-records-lost" and rc == 1 and not r["ok"]
        c = manifest(name)["corruption"]   # what the real store's recovery dropped
        assert lost["offset"] == c["damagedMessagePhyOffset"] and lost["file"].endswith(c["file"])
        assert f"{c['validMessagesAfterDamagedOneInFile']} whole record(s) follow it" in lost["detail"]
    else:
        assert rc == 0 and r["ok"] and not r["problems"]
    pend = {p["kind"]: p for p in r["recoveryPending"]}
    assert "abort" in pend
    assert all(p["recovery"] and p["file"] for p in r["recoveryPending"])
    assert tree_digest(root) == before   # check writes nothing
    # recover does what the pending list says; the store is then what a clean shutdown leaves
    rc, out, err, _ = run("recover", root, timeout=120)
    assert rc == 0, err
    rc, r = check_json(root)
    assert rc == 0 and r["ok"] and not r["recoveryPending"], (r["problems"][:3], r["recoveryPending"][:3])
    assert not r["notes"], r["notes"]   # the checkpoint rewritten as RocketMQ's shutdown writes it


def test_torn_tail_lists_what_recovery_cuts(fixture_copy):
    root = fixture_copy("crashed_torn")
    rc, r = check_json(root)
    pend = {p["kind"]: p for p in r["recoveryPending"]}
    assert {"abort", "commitlog-tail", "index-past-end", "cq-past-end"} <= set(pend)
    assert "recovery cuts the log there" in pend["commitlog-tail"]["recovery"]
    assert pend["index-past-end"]["file"].startswith(str(root / "index"))


def test_the_same_leftovers_without_abort_are_damage(fixture_copy):
    """Data past the valid end and index entries naming records past it, in a store that says
    it was shut down cleanly: readers lost those messages, so check fails."""
    root = fixture_copy("crashed_torn")
    (root / "abort").unlink()
    rc, r = check_json(root)
    assert rc == 1
    assert {"commitlog-tail", "index-entry"} <= kinds(r)
    assert not r["recoveryPending"]


def test_damage_on_a_crashed_store_still_fails(fixture_copy):
    root = fixture_copy("crashed")
    _set_sysflag(root, 0, 0x1)
    rc, out, err, _ = run("check", root)
    assert rc == 1 and out.startswith("PROBLEMS (recovery pending: ")


def test_send_says_which_recovery_it_ran_and_what_it_cut(fixture_copy):
    root = fixture_copy("crashed_torn")
    rc, out, err, _ = run("send", root, "TopicTest", "--body", "after the crash")
    assert rc == 0 and out.startswith("PUT_OK")
    assert err.startswith("recovery: abnormal recovery (abort file present): commitlog cut at ")
    assert "the data after it zeroed" in err and "re-dispatched" in err
    rc, out, err, _ = run("send", root, "TopicTest", "--body", "again")
    assert rc == 0 and err == ""          # a clean start that changed nothing says nothing
    rc, out, err, _ = run("check", root)
    assert rc == 0 and out.startswith("OK: ")


# ---- a broker's own messageDelayLevel (lineage: 1s x 18, then 1h; README_LINEAGE.md) ------------
def _delay_unit(root, qid: int, unit: int):
    return root / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / str(qid) / "00000000000000000000", unit * 20 + 12


def test_a_brokers_own_delay_levels_are_a_note_not_damage():
    rc, report = check_json(unpack("lineage"))
    assert rc == 0 and report["ok"], report["problems"][:3]
    notes = [n for n in report["notes"] if n["kind"] == "delay-level"]
    assert len(notes) == 1
    assert "messageDelayLevel='" + " ".join(["1s"] * 18 + ["1h"]) + "' reproduces them" in notes[0]["detail"]
    rc, given = check_json(unpack("lineage"), "--set", "messageDelayLevel=" + " ".join(["1s"] * 18 + ["1h"]))
    assert rc == 0 and not [n for n in given["notes"] if n["kind"] == "delay-level"]


def _tags_code(path, pos) -> int:
    with open(path, "rb") as fh:
        fh.seek(pos)
        return struct.unpack(">q", fh.read(8))[0]


def _put_tags_code(path, pos, value: int) -> None:
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(struct.pack(">q", value))


def test_one_delivery_time_off_among_agreeing_units_is_damage(fixture_copy):
    """Level 2's units agree once the broker's table is given: one moved by a whole 7 s is
    damage, not another table (the others still agree)."""
    root = fixture_copy("lineage")
    path, pos = _delay_unit(root, 1, 0)
    _put_tags_code(path, pos, _tags_code(path, pos) + 7000)
    rc, report = check_json(root, "--set", "messageDelayLevel=" + " ".join(["1s"] * 18 + ["1h"]))
    assert rc == 1 and any(p["kind"] == "cq-tags" and "SCHEDULE_TOPIC_XXXX/1 unit 0" in p["detail"]
                           for p in report["problems"])


def test_delivery_times_that_no_table_gives_are_damage(fixture_copy):
    """Every unit of a level moved by the same 1234 ms: no messageDelayLevel gives that (whole
    seconds), so it is damage, unit by unit, even though they agree with each other."""
    root = fixture_copy("lineage")
    path, _ = _delay_unit(root, 2, 0)
    units = path.stat().st_size // 20
    moved = 0
    for u in range(units):
        p = _delay_unit(root, 2, u)[1]
        t = _tags_code(path, p)
        if t == 0:
            break
        _put_tags_code(path, p, t + 1234)
        moved += 1
    assert moved > 1
    rc, report = check_json(root)
    assert rc == 1
    assert sum(p["kind"] == "cq-tags" and "SCHEDULE_TOPIC_XXXX/2 " in p["detail"] for p in report["problems"]) == moved


# ---- LMQ queues: no record names their units, their files must show a loss -------------------
@pytest.mark.parametrize("damage", ["delete", "zero"])
def test_an_lmq_queues_first_file_lost_is_damage(fixture_copy, damage):
    root = fixture_copy("v5_lmq")
    rc, clean = check_json(root)
    assert rc == 0 and clean["ok"]
    queue = next(p for p in sorted((root / "consumequeue").iterdir()) if p.name.startswith("%LMQ%")) / "0"
    files = sorted(queue.iterdir())
    assert len(files) > 1   # (the fixture's LMQ queues span two files)
    if damage == "delete":
        files[0].unlink()
    else:
        size = files[0].stat().st_size
        with open(files[0], "r+b") as fh:
            fh.write(bytes(size))
    rc, report = check_json(root)
    assert rc == 1 and [p["kind"] for p in report["problems"]] == ["cq-missing"]
    assert report["problems"][0]["detail"].startswith(f"{queue.parent.name}/0")


def test_a_queue_made_late_begins_with_fillers_and_is_no_loss(fixture_copy):
    """RocketMQ makes a queue's first file where its first unit falls and fills the units before
    it with blanks (fillPreBlank): an LMQ queue whose first file is not at 0 but begins with
    fillers lost nothing."""
    root = fixture_copy("v5_lmq")
    queue = next(p for p in sorted((root / "consumequeue").iterdir()) if p.name.startswith("%LMQ%")) / "0"
    first, second = sorted(queue.iterdir())[:2]
    first.unlink()
    with open(second, "r+b") as fh:
        fh.write(struct.pack(">qiq", 0, 0x7FFFFFFF, 0))
    rc, report = check_json(root)
    assert not [p for p in report["problems"] if "begins at unit" in p["detail"]]


def test_the_suggested_delay_levels_cover_every_level():
    """Only level 2 differs from the given table: the suggested setting still lists all 19."""
    given = ["1s", "5s"] + ["1s"] * 16 + ["1h"]
    rc, report = check_json(unpack("lineage"), "--set", "messageDelayLevel=" + " ".join(given))
    assert rc == 0
    (note,) = [n for n in report["notes"] if n["kind"] == "delay-level"]
    assert "level 2 1s (" in note["detail"]
    assert "messageDelayLevel='" + " ".join(["1s"] * 18 + ["1h"]) + "' reproduces them" in note["detail"]
