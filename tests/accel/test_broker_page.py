"""The broker's page (get_message(broker=True)) reads no record, as DefaultMessageStore.getMessage
hands out commitLog.getMessage(offset, size) slices unread: a unit whose bytes lie inside the
written part of its commitlog file is a message of the page, and any other unit is null
(MESSAGE_WAS_REMOVING before the first message, then the rest of that commitlog file passed
over: rollNextFile). A record is checked when the page is first read there; one that is not a
message of the unit's size raises CorruptDataError naming the file and offset. The default
(checked) page keeps skipping it. The compiled loop and the reference loop answer alike."""
from __future__ import annotations

import struct

import pytest

from engine.store import recovery
from engine import MessageStore, StoreConfig
from engine.errors import CorruptDataError
from engine.format.cq_unit import WHY_INVALID
from engine.store import page as PG
from engine.store import page_reader as PR

CFG = dict(mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20 * 100, maxHashSlotNum=64, maxIndexNum=256)
UNIT = struct.Struct(">qiq")


@pytest.fixture(params=["compiled", "reference"])
def kernel(request, monkeypatch):
    if request.param == "compiled" and PG.KERNEL is None:
        pytest.skip("engine.accel._page not built or RMQSTORE_PURE_PYTHON=1")
    if request.param == "reference":
        monkeypatch.setattr(PG, "KERNEL", None)
        monkeypatch.setattr(MessageStore, "get_message", PR.get_message_reference)
    return request.param


@pytest.fixture(autouse=True)
def _open_as_a_big_store(monkeypatch):
    """The damage here is what a running broker hands out unread: the opens take the log as a big
    store's is taken (no CRC scan of the last three files, which would end the log at it)."""
    monkeypatch.setattr(recovery, "VERIFY_SPAN", -1)


def store_of(root, n=10):
    with MessageStore.create(root, StoreConfig.from_mapping(CFG)) as s:
        for i in range(n):
            s.put_message("T", b"body %d" % i, 0, tags="TagA", keys=f"k{i}")
    cq = root / "consumequeue" / "T" / "0" / f"{0:020d}"
    return [UNIT.unpack_from(cq.read_bytes(), 20 * i) for i in range(n)], cq


def read(root, broker, n=32):
    with MessageStore.open(root, StoreConfig.from_mapping(CFG)) as s:
        kernel_pages = s.pages_compiled and PG.KERNEL is not None
        r = s.get_message("T", 0, 0, n, broker=broker) if kernel_pages or PG.KERNEL is None else \
            s._get_message_py("T", 0, 0, n, broker)
        out = []
        for i in range(len(r.messages)):
            try:
                out.append(r.messages[i].commitLogOffset)
            except CorruptDataError as e:
                assert e.path and e.path.endswith(f"{0:020d}") and e.offset is not None
                out.append(("corrupt", e.offset))
        return r, out


def test_a_damaged_record_is_handed_out_and_found_when_read(tmp_path, kernel):
    root = tmp_path / "s"
    units, _ = store_of(root)
    log = root / "commitlog" / f"{0:020d}"
    data = bytearray(log.read_bytes())
    data[units[3][0] + 4:units[3][0] + 8] = b"\0\0\0\0"       # MAGICCODE of the fourth record
    log.write_bytes(bytes(data))
    r, got = read(root, broker=True)
    assert (r.status, r.nextBeginOffset, r.bufferTotalSize) == ("FOUND", 10, sum(u[1] for u in units))
    assert list(r.skipped) == []
    assert got == [u[0] for u in units[:3]] + [("corrupt", units[3][0])] + [u[0] for u in units[4:]]
    with pytest.raises(CorruptDataError):
        r.messages.columns
    r, got = read(root, broker=False)                          # the checked page passes over it
    assert got == [u[0] for k, u in enumerate(units) if k != 3] and list(r.skipped) == [(3, WHY_INVALID)]


def test_a_unit_past_the_written_bytes_is_null_and_rolls_to_the_next_file(tmp_path, kernel):
    root = tmp_path / "s"
    units, cq = store_of(root)
    data = bytearray(cq.read_bytes())
    struct.pack_into(">i", data, 20 * 5 + 8, 100_000)          # unit 5 reaches past the write position
    cq.write_bytes(bytes(data))
    r, got = read(root, broker=True)
    # getMessage(offset, size) is null there: rollNextFile passes over every later unit in that file
    assert (r.status, r.nextBeginOffset) == ("FOUND", 10)
    assert got == [u[0] for u in units[:5]] and list(r.skipped) == [(5, WHY_INVALID)]
    r, got = read(root, broker=False)
    assert got == [u[0] for k, u in enumerate(units) if k != 5]


def test_the_broker_page_reads_no_record_until_asked(tmp_path, kernel):
    """Records are read when the page is read: a record damaged after the page was made is
    found then (compiled and reference pages alike)."""
    root = tmp_path / "s"
    units, _ = store_of(root, 4)
    with MessageStore.open(root, StoreConfig.from_mapping(CFG), read_only=False) as s:
        r = s.get_message("T", 0, 0, 32, broker=True)
        f = s.commitlog.queue.find(units[1][0])
        f.buf[units[1][0] + 4:units[1][0] + 8] = b"\0\0\0\0"
        assert r.messages[0].body == b"body 0"
        with pytest.raises(CorruptDataError):
            r.messages[1]
        assert [m.body for m in (r.messages[2], r.messages[3])] == [b"body 2", b"body 3"]


def test_get_broker_sets_a_damaged_record_aside_at_its_queue_offset(tmp_path, kernel):
    """`rmqstore get --broker` reads the page through: the item whose record does not decode is
    set aside (in `skipped` at its queue offset, as the checked page says, and in `damaged` with
    its commitlog offset), the other messages are shown, and the answer is still the broker's."""
    from engine.store.page_reader import set_aside_damage
    root = tmp_path / "s"
    units, cq = store_of(root)
    assert units[0][1] == units[2][1]                            # records 0 and 2 differ in one digit
    data = bytearray(cq.read_bytes())
    struct.pack_into(">q", data, 20 * 2, units[0][0])           # unit 2 points at record 0 again
    cq.write_bytes(bytes(data))
    log = root / "commitlog" / f"{0:020d}"
    raw = bytearray(log.read_bytes())
    raw[units[6][0] + 4:units[6][0] + 8] = b"\0\0\0\0"          # MAGICCODE of the seventh record
    log.write_bytes(bytes(raw))
    with MessageStore.open(root, StoreConfig.from_mapping(CFG)) as s:
        kernel_pages = s.pages_compiled and PG.KERNEL is not None
        r = s.get_message("T", 0, 1, 32, broker=True) if kernel_pages or PG.KERNEL is None else \
            s._get_message_py("T", 0, 1, 32, True)
        r = set_aside_damage(r, s.find_queue("T", 0), 1)
        assert (r.status, r.nextBeginOffset) == ("FOUND", 10)
        assert [m.commitLogOffset for m in r.messages] == [units[1][0], units[0][0]] + [u[0] for u in units[3:6]] \
            + [u[0] for u in units[7:]]
        assert list(r.skipped) == [(6, WHY_INVALID)]
        assert r.damaged == [{"queueOffset": 6, "commitLogOffset": units[6][0], "size": units[6][1],
                              "reason": r.damaged[0]["reason"]}] and "commitlog offset" in r.damaged[0]["reason"]
        assert r.to_json()["damaged"][0]["queueOffset"] == 6


def test_cli_get_broker_on_a_damaged_record_exits_0_and_names_it(tmp_path, capsys):
    import json
    from engine.cli.app import main
    root = tmp_path / "s"
    units, _ = store_of(root)
    log = root / "commitlog" / f"{0:020d}"
    raw = bytearray(log.read_bytes())
    raw[units[3][0] + 4:units[3][0] + 8] = b"\0\0\0\0"
    log.write_bytes(bytes(raw))
    before = log.read_bytes()
    assert main(["get", str(root), "T", "0", "0", "--broker", "--json"]) == 0   # (in process: the fixture's open)
    j = json.loads(capsys.readouterr().out)
    assert j["status"] == "FOUND" and j["messageCount"] == 9 and j["skipped"] == [{"queueOffset": 3, "reason": WHY_INVALID}]
    assert [d["commitLogOffset"] for d in j["damaged"]] == [units[3][0]]
    assert main(["get", str(root), "T", "0", "0", "--broker"]) == 0
    out = capsys.readouterr().out
    assert "damaged" in out and f"commitlog offset {units[3][0]}" in out
    assert log.read_bytes() == before


def test_a_unit_near_the_end_of_int64_rolls_past_every_offset(tmp_path, kernel):
    """A unit whose commitlog offset lies in the last file int64 can name: the broker's
    rollNextFile goes past 2**63 - 1 (Java's long wraps there); every later unit lies below it,
    so the rest of the page is passed over -- both loops, no OverflowError (a fuzz seed found
    the compiled loop converting it to int64)."""
    root = tmp_path / "s"
    units, cq = store_of(root)
    data = bytearray(cq.read_bytes())
    struct.pack_into(">q", data, 0, 9_223_372_036_854_710_272)   # unit 0
    cq.write_bytes(bytes(data))
    r, got = read(root, broker=True)
    assert (r.status, r.nextBeginOffset, got, r.bufferTotalSize) == ("MESSAGE_WAS_REMOVING", 10, [], 0)
    assert [q for q, _ in r.skipped] == [0]
