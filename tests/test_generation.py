"""Which generation wrote a store: every conformance fixture (the manifests name the RocketMQ
that wrote it), stores our writer makes, the defaults that follow the answer (time-lookup rule,
__CRC32# tails, V2 records) and that deciding it writes nothing."""
import hashlib
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ALL_FIXTURES, manifest, unpack
from engine import MessageStore, StoreConfig
from engine.errors import MessageRejectedError
from engine.format.generation import has_crc_tail, props_end_with_separator
from engine.store.generation import MAX_FILES, RECORDS_PER_FILE, _spread, detect

CLI = [sys.executable, "-m", "engine"]


def cli(capsys, *argv):
    """The CLI in this process, as a finished child would answer: returncode, stdout, stderr
    (a child costs ~1 s of start-up; test_a_send_the_generation_refuses_changes_nothing keeps one)."""
    from types import SimpleNamespace

    from engine.cli.app import main
    capsys.readouterr()
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:   # argparse's refusals
        code = e.code
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)
SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 1000, "maxHashSlotNum": 64,
         "maxIndexNum": 256}


def written_by(name: str) -> str:
    v = manifest(name)["rocketmq_version"]
    return "5.x" if v.startswith("5.") else "4.x" if v.startswith("4.") else "?"


def tree_digest(root: Path) -> dict:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            st = p.stat()
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            out[str(p)] = (st.st_size, st.st_mtime_ns, h.hexdigest())
    return out


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_every_fixture_names_the_generation_that_wrote_it(name):
    want = written_by(name)
    g = detect(unpack(name))
    assert g.version == want, [e.to_json() for e in g.evidence]
    deciding = [e for e in g.evidence if e.points == want]
    assert deciding and not g.mixed
    # the records themselves speak on every fixture (the DLedger one through its entries)
    assert any(e.kind == "property-separator" and e.points == want for e in g.evidence)
    assert 0 < g.sampled_records <= MAX_FILES * RECORDS_PER_FILE * 2
    js = g.to_json()
    assert js["defaults"]["timeLookup"] == ("5.x" if want == "5.x" else "4.9")
    assert all(set(e) == {"kind", "detail", "points"} for e in js["evidence"])


@pytest.mark.parametrize("name,trailing", [("v5", True), ("default", False), ("small", False)])
def test_the_separator_rule_holds_on_every_record(name, trailing):
    """The rule the sample applies, checked on every record of the fixture (format notes §3.5)."""
    with MessageStore.open(unpack(name)) as st:
        seen = [props_end_with_separator(m.propertiesRaw) for m in st.iter_messages()]
        tails = [has_crc_tail(m.propertiesRaw) for m in st.iter_messages()]
    seen = [s for s in seen if s is not None]
    assert len(seen) > 300
    if trailing:
        assert all(seen)
    else:  # the 4.9.7 fixtures hold one "foreign client" record ending in 0x02 (conformance README)
        assert seen.count(True) == 1
    assert all(tails) if name == "v5" else not any(tails)  # v5 was made with enabledAppendPropCRC=true


def test_folder_and_checkpoint_evidence():
    g = detect(unpack("v5_timer"))
    folders = {e.detail.split(":")[0] for e in g.evidence if e.kind == "folder"}
    assert {"timerlog", "timerwheel", "config/timercheck"} <= folders
    assert "consumequeue/CURRENT" in {e.detail.split(":")[0] for e in detect(unpack("v5_rocksdb_cq")).evidence}
    assert "batchconsumequeue" in {e.detail.split(":")[0] for e in detect(unpack("v5_batchcq")).evidence}
    dl = detect(unpack("dledger"))
    assert any(e.detail.startswith("dledger-n0") and e.points == "either" for e in dl.evidence)
    assert any(e.kind == "v2-magic" for e in detect(unpack("v5")).evidence)
    assert any(e.kind == "abort" and e.points == "5.x" for e in detect(unpack("v5_crashed")).evidence)
    assert any(e.kind == "abort" and e.points == "4.x" for e in detect(unpack("crashed")).evidence)


def test_checkpoint_fields_and_pid_alone_decide(tmp_path):
    root = tmp_path / "s"
    (root / "commitlog").mkdir(parents=True)
    (root / "checkpoint").write_bytes(struct.pack(">5q", 1, 2, 3, 0, 0).ljust(4096, b"\0"))
    assert detect(root).version == "unknown"
    (root / "checkpoint").write_bytes(struct.pack(">5q", 1, 2, 3, 0, 4711).ljust(4096, b"\0"))
    g = detect(root)
    assert g.version == "5.x" and g.evidence[0].kind == "checkpoint" and "4711" in g.evidence[0].detail
    (root / "checkpoint").unlink()
    (root / "abort").write_bytes(b"12345")
    assert detect(root).version == "5.x"


def test_sample_is_bounded_and_keeps_the_newest():
    files = [Path(f"{i * 65536:020d}") for i in range(1000)]
    s = _spread(files, MAX_FILES)
    assert len(s) == MAX_FILES and s[0] == files[0] and s[-1] == files[-1]


def test_info_and_detection_write_nothing(capsys):
    for name in ("v5", "crashed", "dledger", "v5_rocksdb_cq", "v5_timer"):
        root = unpack(name)
        before = tree_digest(root)
        detect(root)
        out = cli(capsys, "info", root, "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["generation"]["version"] == written_by(name)
        text = cli(capsys, "info", root).stdout
        assert f"generation {written_by(name)}  (" in text
        assert tree_digest(root) == before


def test_our_writer_writes_the_4x_form_unless_told(tmp_path):
    empty = tmp_path / "empty"
    MessageStore.create(empty, StoreConfig.from_mapping(SMALL)).close()
    assert detect(empty).version == "unknown"
    plain = tmp_path / "plain"
    with MessageStore.create(plain, StoreConfig.from_mapping(SMALL)) as st:
        for i in range(20):
            st.put_message("TopicTest", f"m{i}".encode(), tags="A", keys=f"k{i}")
    g = detect(plain)
    assert g.version == "4.x" and not g.prop_crc
    crc = tmp_path / "crc"
    with MessageStore.create(crc, StoreConfig.from_mapping({**SMALL, "enabledAppendPropCRC": True})) as st:
        for i in range(20):
            st.put_message("TopicTest", f"m{i}".encode(), tags="A")
    g = detect(crc)
    assert g.version == "5.x" and g.prop_crc
    assert {e.kind for e in g.evidence} >= {"property-separator", "crc32-tail"}


def test_appends_follow_the_generation(fixture_copy):
    v5 = fixture_copy("v5")
    with MessageStore.open(v5, read_only=False) as st:  # no setting given: the store's form
        assert st.cfg.enabledAppendPropCRC
        r = st.put_message("TopicTest", b"appended", tags="A")
    with MessageStore.open(v5) as st:
        m = st.commitlog.get_message(r.commitLogOffset)
        assert has_crc_tail(m.propertiesRaw) and props_end_with_separator(m.propertiesRaw)
        from engine.analysis.check import check_store
        rep = check_store(st)
        assert rep["ok"], rep["problems"][:3]
        assert rep["crcRule"].startswith("body CRC and __CRC32#")
    small = fixture_copy("small")
    with MessageStore.open(small, read_only=False) as st:
        assert not st.cfg.autoMessageVersionOnTopicLen and not st.cfg.enabledAppendPropCRC
        with pytest.raises(MessageRejectedError, match="limit is 127"):
            st.put_message("%RETRY%" + "g" * 130, b"x")  # 4.9 recovery would cut the log at a V2 record
    explicit = StoreConfig.from_mapping({"autoMessageVersionOnTopicLen": True})
    with MessageStore.open(small, config=explicit, read_only=False) as st:
        assert st.put_message("%RETRY%" + "g" * 130, b"x").status == "PUT_OK"  # the setting wins


def test_newest_records_decide_a_mixed_store(fixture_copy):
    """A 4.9 store a 5.x-form writer went on writing: 5.x, with both signs shown."""
    small = fixture_copy("small")
    with MessageStore.open(small, config=StoreConfig.from_mapping({"enabledAppendPropCRC": True}),
                           read_only=False) as st:
        last = st.commitlog.files[-1].file_from_offset
        while st.max_offset < last + 65536:  # fill into a file of its own
            st.put_messages("TopicTest", [b"x" * 2000] * 8, queue_id=0, tags="B")
    g = detect(small)
    assert g.version == "5.x" and g.mixed
    sep = next(e for e in g.evidence if e.kind == "property-separator")
    assert sep.points == "5.x" and "newest" in sep.detail


def _time(capsys, root, *extra):
    out = cli(capsys, "time", root, *extra, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_time_rule_follows_the_generation_and_flags_win(capsys):
    v5, small = unpack("v5"), unpack("small")
    with MessageStore.open(v5) as st:
        cq = st.find_queue("TopicTest", 0)
        t = st.store_time_at("TopicTest", 0, (cq.min_offset + cq.max_offset) // 2) + 1
        lower = st.get_offset_in_queue_by_time("TopicTest", 0, t, "lower")
        upper = st.get_offset_in_queue_by_time("TopicTest", 0, t, "upper")
        old = st.get_offset_in_queue_by_time("TopicTest", 0, t, None)
    assert lower == upper + 1  # t falls between two messages: the rules must differ
    assert _time(capsys, v5, "TopicTest", "0", str(t)) == {"offset": lower, "timestamp": t, "rule": "5.x-lower",
                                                   "ruleSource": "generation"}
    got = _time(capsys, v5, "TopicTest", "0", str(t), "--boundary", "upper")
    assert (got["offset"], got["rule"], got["ruleSource"]) == (upper, "5.x-upper", "flag")
    got = _time(capsys, v5, "TopicTest", "0", str(t), "--rule", "4.9")
    assert (got["offset"], got["rule"]) == (old, "4.9")
    with MessageStore.open(small) as st:
        t = st.store_time_at("TopicTest", 1, 10) + 1
        want = st.get_offset_in_queue_by_time("TopicTest", 1, t, None)
    got = _time(capsys, small, "TopicTest", "1", str(t))
    assert (got["offset"], got["rule"], got["ruleSource"]) == (want, "4.9", "generation")
    text = cli(capsys, "time", small, "TopicTest", "1", t)
    assert "rule       4.9 (the store's generation, 4.x)" in text.stdout
    bad = cli(capsys, "time", small, "TopicTest", "1", t, "--rule", "4.9", "--boundary", "lower")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "5.x rule" in bad.stderr


def test_a_send_the_generation_refuses_changes_nothing(fixture_copy):
    small = fixture_copy("small")
    before = tree_digest(small)
    out = subprocess.run(CLI + ["send", str(small), "%RETRY%" + "g" * 130, "--body", "x"], capture_output=True,
                         text=True)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "limit is 127" in out.stderr
    assert tree_digest(small) == before


def test_a_store_followed_live_is_sampled_again(tmp_path):
    root = tmp_path / "live"
    writer = MessageStore.create(root, StoreConfig.from_mapping(SMALL))
    try:
        with MessageStore.open(root, config=StoreConfig.from_mapping(SMALL)) as reader:
            first = reader.generation()  # only the running writer's empty abort file speaks yet
            assert first.version == "4.x" and [e.kind for e in first.evidence] == ["abort"]
            writer.put_message("TopicTest", b"first", tags="A")
            writer.flush()
            reader.refresh()
            assert "property-separator" in [e.kind for e in reader.generation().evidence]
    finally:
        writer.close()


def test_appends_to_a_5x_store_without_tails_take_the_5x_form(fixture_copy):
    """v5_lmq was written with enabledAppendPropCRC=false: 0x02 ends every record, no tail."""
    root = fixture_copy("v5_lmq")
    with MessageStore.open(root, read_only=False) as st:
        assert not st.cfg.enabledAppendPropCRC and st.writer.props_trailing
        plain = st.put_message("LmqParent", b"plain", tags="A")                     # the compiled put loop
        batch = st.put_messages("LmqParent", [b"b1", b"b2"], queue_id=1, tags="B")
        props = st.put_message("LmqParent", b"p", properties={"k": "v"})           # the Python encoder
    with MessageStore.open(root) as st:
        for r in [plain, *batch, props]:
            raw = st.commitlog.get_message(r.commitLogOffset).propertiesRaw
            assert props_end_with_separator(raw) and not has_crc_tail(raw), raw
    g = detect(root)
    assert g.version == "5.x" and not g.mixed


def test_hostile_files_never_break_the_detection(tmp_path):
    import random
    rnd = random.Random(7)
    root = tmp_path / "junk"
    (root / "commitlog").mkdir(parents=True)
    (root / "dledger-x" / "data").mkdir(parents=True)
    for i in range(3):
        (root / "commitlog" / f"{i * 4096:020d}").write_bytes(rnd.randbytes(4096))
        (root / "dledger-x" / "data" / f"{i * 4096:020d}").write_bytes(rnd.randbytes(4096))
    (root / "commitlog" / f"{3 * 4096:020d}").mkdir()          # a folder with a data file's name
    os.mkfifo(root / "commitlog" / f"{4 * 4096:020d}")          # a FIFO would block a reader
    os.mkfifo(root / "abort")
    (root / "checkpoint").write_bytes(b"\xff" * 7)
    g = detect(root)
    assert g.version == "unknown" and g.sampled_records == 0  # DLedger folder and zero checkpoint: "either"
