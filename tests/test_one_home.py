"""Concepts written once (issue 31, item 4), tested at their one home and where it is used:
the index slot of a keyHash (RocketMQ's rule for a negative one), time formatting, the Java
string hash (compiled against Python), and the reserved property names the put refuses."""
import json
import struct
from pathlib import Path

import numpy as np
import pytest

from engine import MessageStore, StoreConfig
from engine.analysis import check_index, check_records
from engine.analysis.check import check_store
from engine.errors import MessageRejectedError
from engine.format.index_layout import NO_SLOT, entry_pos, slot_of, slots_of
from engine.scan.consistency import index_chain_problems

SMALL = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 97,
         "maxIndexNum": 400}


# ---- the slot of a keyHash -------------------------------------------------------------------
def test_slot_of_is_rocketmqs_rule():
    """slotPos = keyHash % hashSlotNum for the non-negative hashes indexKeyHashMethod gives;
    a negative stored keyHash is in no slot (Java's % would give a negative slot)."""
    assert slot_of(0, 97) == 0
    assert slot_of(96, 97) == 96
    assert slot_of(97 * 5 + 3, 97) == 3
    assert slot_of(0x7FFFFFFF, 97) == 0x7FFFFFFF % 97
    for h in (-1, -3, -97, -(1 << 31)):
        assert slot_of(h, 97) == NO_SLOT
    arr = np.array([0, 5, 97 * 3 + 1, -1, -(1 << 31), 0x7FFFFFFF], dtype=np.int32)
    assert slots_of(arr, 97).tolist() == [0, 5, 1, NO_SLOT, NO_SLOT, 0x7FFFFFFF % 97]


def _both_checks(store) -> tuple[dict, dict]:
    a = check_store(store)
    saved = check_records._K, check_index._K
    check_records._K = check_index._K = None
    try:
        b = check_store(store)
    finally:
        check_records._K, check_index._K = saved
    return a, b


def test_negative_hashes_belong_to_no_slot_in_check_and_scan(tmp_path):
    """Two stored keyHashes made negative (a slot's head, and an entry linking to an older one):
    check (compiled and pure) and the scan's chain consistency now say the same thing -- each
    is in no slot, so the chain holding it is wrong. (The scan once took abs(hash) % slots and
    called the head fine; check took Python's floor % and named another slot.)"""
    root = tmp_path / "s"
    s = MessageStore.create(root, StoreConfig.from_mapping(SMALL))
    for i in range(300):
        s.put_message("T", b"b%d" % i, i % 4, None, [f"key-{i}"])
    s.close()
    with MessageStore.open(root, read_only=True) as st:
        f = st.index.files[0]
        S, path = f.slot_num, Path(f.path)
        slots = f.slots.astype(np.int64)
        hashes = f.entries["keyHash"].astype(np.int64)
        prev = f.entries["prevIndex"].astype(np.int64)
        count = f.header.indexCount
    # a head whose negated hash would land elsewhere by floor %, and a linking entry in another slot
    head_slot = next(j for j in range(S) if slots[j] > 0 and hashes[slots[j]] % S not in (0, (-hashes[slots[j]]) % S))
    head = int(slots[head_slot])
    linker = next(k for k in range(count - 1, 0, -1) if prev[k] > 0 and k != head and hashes[k] % S != head_slot)
    older = int(prev[linker])
    with open(path, "r+b") as fh:
        for k in (head, linker):
            fh.seek(entry_pos(S, k))
            fh.write(struct.pack(">i", -int(hashes[k])))

    with MessageStore.open(root, read_only=True) as st:
        a, b = _both_checks(st)
        scan_rows = index_chain_problems(st, 0)
    assert a == b   # the kernel and its twin by the same rule
    details = [p["detail"] for p in a["problems"]]
    assert f"entry {head} has a negative key hash" in details
    assert f"entry {linker} has a negative key hash" in details
    assert f"slot {head_slot} names entry {head}, whose key hashes to no slot (a negative key hash)" in details
    assert (f"entry {older} in the chain of no slot (a negative key hash) hashes to slot {hashes[older] % S}"
            in details)
    wrong = {r["actual"]["index"] for r in scan_rows if r["problem"] == "entry chained from the wrong slot"}
    assert {head, linker} <= wrong
    assert all(r["actual"]["keyHash"] < 0 for r in scan_rows if r["problem"] == "entry chained from the wrong slot")


# ---- reserved property names -------------------------------------------------------------------
def test_reserved_names_are_rocketmqs():
    """STRING_HASH_SET of 4.9.7 (31 names) inside 5.3.3's (51); the GUI uses the engine's set."""
    from engine.format.properties import RESERVED_PROPERTIES, RESERVED_PROPERTIES_4, RESERVED_PROPERTIES_5
    from gui import send_logic
    assert len(RESERVED_PROPERTIES_4) == 31 and len(RESERVED_PROPERTIES_5) == 51
    assert RESERVED_PROPERTIES_4 < RESERVED_PROPERTIES_5 == RESERVED_PROPERTIES
    assert {"KEYS", "TAGS", "UNIQ_KEY", "DELAY", "WAIT", "CLUSTER", "TIMER_DELIVER_MS", "__CRC32#"} <= RESERVED_PROPERTIES
    assert send_logic.RESERVED_PROPERTIES is RESERVED_PROPERTIES
    with pytest.raises(ValueError, match=r"line 2: the Property<TIMER_DELIVER_MS> is used by system"):
        send_logic.parse_properties("a=1\nTIMER_DELIVER_MS=5")


def test_engine_put_refuses_a_reserved_user_property(tmp_path):
    """Message.putUserProperty's refusal in the engine's put (one and batch), naming the
    property, before a byte is written; system properties given as properties still pass."""
    s = MessageStore.create(tmp_path / "s", StoreConfig.from_mapping(SMALL))
    try:
        s.put_message("T", b"first", 0, None, None)
        end = s.max_offset
        for name in ("KEYS", "UNIQ_KEY", "REAL_TOPIC", "TIMER_DELIVER_MS"):
            with pytest.raises(MessageRejectedError, match=rf"Property<{name}> is used by system"):
                s.put_message("T", b"x", 0, None, None, user_properties={"color": "red", name: "v"})
            with pytest.raises(MessageRejectedError, match=rf"Property<{name}>"):
                s.put_messages("T", [b"a", b"b"], 0, None, None, user_properties={name: "v"})
        with pytest.raises(MessageRejectedError, match="blank"):
            s.put_message("T", b"x", 0, None, None, user_properties={"color": " "})
        assert s.max_offset == end
        r = s.put_message("T", b"x", 0, None, None, user_properties={"color": "red"})
        b = s.put_messages("T", [b"a", b"b"], 0, None, None, user_properties={"size": "L"})
        sysp = s.put_message("T", b"y", 0, None, None, properties={"UNIQ_KEY": "U-1", "KEYS": "k"})
        assert s.commitlog.get_message(r.commitLogOffset).properties["color"] == "red"
        assert all(s.commitlog.get_message(x.commitLogOffset).properties["size"] == "L" for x in b)
        assert s.commitlog.get_message(sysp.commitLogOffset).properties["UNIQ_KEY"] == "U-1"
    finally:
        s.close()


def _cli(capsys, *argv):
    """The CLI in this process: exit code, stdout, stderr."""
    from engine.cli import app
    capsys.readouterr()
    try:
        rc = app.main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def _tree(root: Path) -> dict:
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(root.rglob("*")) if p.is_file()}


def test_cli_send_prop_refuses_a_reserved_name(fixture_copy, capsys):
    store = fixture_copy("small")
    before = _tree(store)
    for argv in (["--prop", "TAGS=x"], ["--prop", "ok=1", "--prop", "DELAY=3", "--batch", "--count", "2"]):
        rc, out, err = _cli(capsys, "send", store, "TopicTest", "--body", "x", *argv)
        assert rc == 2, (out, err)
        name = argv[1].split("=")[0] if "TAGS" in argv[1] else "DELAY"
        assert err.startswith("rmqstore: error:") and f"Property<{name}> is used by system" in err, err
        assert "Traceback" not in err
    assert _tree(store) == before
    rc, out, err = _cli(capsys, "send", store, "TopicTest", "--body", "x", "--prop", "color=red", "--json")
    assert rc == 0, err
    with MessageStore.open(store) as st:
        assert st.commitlog.get_message(json.loads(out)["commitLogOffset"]).properties["color"] == "red"


# ---- time formatting ---------------------------------------------------------------------------
JAN, JUL = 1768478400007, 1784116800042     # 2026-01-15 and 2026-07-15, 12:00 UTC
END_OF_TIME = 253402300799999                # 9999-12-31 23:59:59.999 UTC, datetime's last millisecond


@pytest.fixture
def zone(monkeypatch):
    """Set the process's TZ (POSIX rules, no tz database needed) for one test, then restore it."""
    import time

    def set_tz(tz: str) -> None:
        monkeypatch.setenv("TZ", tz)
        time.tzset()
    yield set_tz
    monkeypatch.undo()
    time.tzset()


def test_time_golden_strings_utc():
    from engine.format.timefmt import UTC, format_iso, format_time
    assert format_time(0, UTC) == "1970-01-01 00:00:00.000 +00:00"
    assert format_iso(0, UTC) == "1970-01-01T00:00:00.000+00:00"
    assert format_time(-1, UTC) == "1969-12-31 23:59:59.999 +00:00"
    assert format_time(-62135596800000, UTC) == "0001-01-01 00:00:00.000 +00:00"
    assert format_time(1732500000123, UTC) == "2024-11-25 02:00:00.123 +00:00"
    assert format_iso(1732500000123, UTC) == "2024-11-25T02:00:00.123+00:00"
    assert format_time(END_OF_TIME, UTC) == "9999-12-31 23:59:59.999 +00:00"
    for ms in (END_OF_TIME + 1, (1 << 63) - 1, -(1 << 63), -62135596800001):
        assert format_time(ms, UTC) is None and format_iso(ms, UTC) is None


def test_time_local_zone_from_tz(zone):
    """LOCAL is the zone at each instant (summer time has its own offset); offsets are numeric."""
    from engine.format.timefmt import LOCAL, format_time, local_zone, offset_text
    zone("IST-5:30")
    assert format_time(0) == format_time(0, LOCAL) == "1970-01-01 05:30:00.000 +05:30"
    assert format_time(-1) == "1970-01-01 05:29:59.999 +05:30"
    assert local_zone().tzname(None) == "+05:30"
    zone("NST+3:30")
    assert format_time(JAN) == "2026-01-15 08:30:00.007 -03:30"
    zone("CET-1CEST,M3.5.0,M10.5.0/3")
    assert format_time(JAN) == "2026-01-15 13:00:00.007 +01:00"
    assert format_time(JUL) == "2026-07-15 14:00:00.042 +02:00"
    assert offset_text(None) == "+00:00"


def test_cli_scan_and_gui_times_come_from_the_one_home(zone):
    from engine.cli.output import fmt_time
    from engine.scan.table import format_cell
    from gui import timefmt
    zone("CET-1CEST,M3.5.0,M10.5.0/3")
    assert fmt_time(JUL) == "2026-07-15 14:00:00.042 +02:00"          # the CLI: local, each instant's offset
    assert fmt_time(None) == fmt_time(-1) == "-"
    assert fmt_time((1 << 63) - 1) == str((1 << 63) - 1)
    assert format_cell("storeTimestamp", JUL) == "2026-07-15 12:00:00.042 +00:00"   # the scan: UTC
    assert format_cell("storeTimestamp", END_OF_TIME + 1) == str(END_OF_TIME + 1)   # no traceback
    assert format_cell("storeTimestamp", 0) == "0"
    zone("IST-5:30")                                                   # the GUI: the chosen zone
    assert timefmt.format_ms_readable(JAN) == "2026-01-15 17:30:00.007 +05:30"
    assert timefmt.format_ms_readable(JAN, utc=True) == "2026-01-15 12:00:00.007 +00:00"
    assert timefmt.format_ms(JAN, utc=True) == "2026-01-15T12:00:00.007+00:00"
    assert timefmt.format_ms(JAN) == "2026-01-15T17:30:00.007+05:30"
    assert timefmt.format_ms_readable(-1) == timefmt.format_ms(None) == "\u2014"
    assert timefmt.format_ms(END_OF_TIME + 1) == f"{END_OF_TIME + 1} ms (out of range)"
    assert timefmt.zone_label(False) == "local +05:30"


# ---- the Java string hash: the compiled home (engine/accel/_javahash.pxd) against the Python one ----
def _strings() -> list[str]:
    import random
    rnd = random.Random(31)
    fixed = ["", "a", "TopicTest", "TopicTest#order-1", "polygenelubricants",   # hashCode Integer.MIN_VALUE
             "\u00e9t\u00e9", "\u00ff" * 9, "\u043a\u043b\u044e\u0447", "\u4e2d\u6587\u4e3b\u9898", "\U0001F600",
             "a\U0001F600b\U00010000", "\ud7ff\ue000\uffff", "x" * 5000, "\u00e9" * 4097, "\u4e2d" * 3001]
    pools = ["abcXYZ019#- ", "abc\u00e9\u00ff", "ab\u4e2d\u6587", "a\U0001F600\u00e9\u4e2d"]
    rand = ["".join(rnd.choice(pool) for _ in range(rnd.randrange(0, 70))) for pool in pools for _ in range(300)]
    return fixed + rand


def test_compiled_java_hash_is_the_python_one():
    from engine import accel
    from engine.format.javahash import index_key_hash, java_hash
    append, query, check = accel.load("_append"), accel.load("_query"), accel.load("_check")
    if append is None or query is None or check is None:
        pytest.skip("kernels not built (or RMQSTORE_PURE_PYTHON=1)")
    assert java_hash("polygenelubricants") == -(1 << 31) and index_key_hash("polygenelubricants") == 0
    for s in _strings():
        assert append.java_hash(s) == java_hash(s), s[:40]
        for topic in ("T", "\u4e3b\u9898"):
            assert query.key_hash(topic, s) == index_key_hash(f"{topic}#{s}"), s[:40]
        if all(ord(c) < 256 for c in s):     # check's byte path: one-byte units, bit 7 tells non-ASCII
            b = s.encode("latin-1")
            assert check.java_hash_bytes(b) == (java_hash(s), not s.isascii()), s[:40]
