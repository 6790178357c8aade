"""check's commitlog walk on two cores (engine.analysis.check_records: a second walker from a
record boundary near the middle): the report -- problems, their order, the counts -- is the
one-walker report, with the split at a file start, inside a file, at a damaged record, at a
place that is no record boundary, with damage in either half, and on a tiny store that must
not split. Progress stays monotonic and Cancel stops both walkers."""
import threading
from pathlib import Path

import pytest

from engine import MessageStore, StoreConfig
from engine.analysis import check_records as CR
from engine.analysis.check import CheckCancelled, check_store, check_task
from engine.store import recovery

K = CR._K
pytestmark = pytest.mark.skipif(K is None, reason="engine.accel._check not built (or RMQSTORE_PURE_PYTHON=1)")

SMALL = {"mappedFileSizeCommitLog": 1 << 20, "mappedFileSizeConsumeQueue": 6000, "maxHashSlotNum": 1000,
         "maxIndexNum": 40000}


def make_store(root: Path, n: int = 6000) -> list[int]:
    """~4.5 files of 1 MiB; returns each message's commitlog offset."""
    s = MessageStore.create(root, StoreConfig.from_mapping(SMALL))
    offs = []
    for i in range(n):
        offs.append(s.max_offset)
        s.put_message(f"T{i % 3}", bytes([i % 251]) * (500 + i % 400), i % 4, f"Tag{i % 5}", [f"k{i}", f"u{i % 70}"])
    s.close()
    return offs


def at(root: Path, off: int) -> tuple[Path, int]:
    files = sorted((root / "commitlog").iterdir())
    f = [p for p in files if int(p.name) <= off][-1]
    return f, off - int(f.name)


def patch(root: Path, off: int, data: bytes) -> None:
    f, pos = at(root, off)
    with open(f, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)


def flip(root: Path, off: int) -> None:
    f, pos = at(root, off)
    b = f.read_bytes()[pos]
    patch(root, off, bytes([b ^ 0xFF]))


def reports(root: Path, monkeypatch, split) -> tuple[dict, dict, int]:
    """(two-walker report with the log cut at `split` -- an offset, a list of them, or None for
    split_points' own choice --, the one-walker report, how many pieces' rows were joined)."""
    merged = []
    real_append = CR._Builder.append

    def append(self, o):
        merged.append(o.n)
        return real_append(self, o)

    # the opens take the log as a big store's is taken (to its last referenced record, no CRC
    # scan of the last three files, which would cut the log at the damage): check walks it all
    monkeypatch.setattr(recovery, "VERIFY_SPAN", -1)
    with monkeypatch.context() as m:
        m.setattr(CR, "SPLIT_MIN", 0)
        m.setattr(CR, "cores", lambda: 2)
        m.setattr(CR._Builder, "append", append)
        if split is not None:
            cuts = [split] if isinstance(split, int) else list(split)
            m.setattr(CR, "split_points", lambda cl, options, pieces: cuts)
        with MessageStore.open(root, read_only=True) as st:
            two = check_store(st)
    with monkeypatch.context() as m:
        m.setattr(CR, "split_points", lambda cl, options, pieces: [])
        with MessageStore.open(root, read_only=True) as st:
            one = check_store(st)
    return two, one, len(merged)


def test_split_at_a_file_start_and_inside_a_file(tmp_path, monkeypatch):
    root = tmp_path / "s"
    offs = make_store(root)
    assert len(list((root / "commitlog").iterdir())) >= 4
    for split in (1 << 20, 2 << 20, offs[len(offs) // 2], offs[len(offs) // 2 + 1], None):
        two, one, merged = reports(root, monkeypatch, split)
        assert two == one and two["ok"] and two["messages"] == len(offs)
        assert merged == 1, split   # the second walker's rows were used


def test_split_point_finds_a_record_near_the_middle(tmp_path):
    root = tmp_path / "s"
    offs = make_store(root, 1500)   # one file and a half: the middle is inside the first
    with MessageStore.open(root, read_only=True) as st:
        cl = st.commitlog
        s, = CR.split_points(cl, 0, 2)
    mid = cl.min_offset + (cl.max_offset - cl.min_offset) // 2
    assert s in offs and mid <= s < mid + 2000


def test_a_split_that_is_no_record_boundary_falls_back_to_one_walker(tmp_path, monkeypatch):
    root = tmp_path / "s"
    offs = make_store(root)
    two, one, merged = reports(root, monkeypatch, offs[3000] + 7)
    assert two == one and two["ok"] and merged == 0


@pytest.mark.parametrize("damage", ["body", "size", "magic", "physical", "key"])
def test_damage_at_the_split_and_in_each_half(tmp_path, monkeypatch, damage):
    root = tmp_path / "s"
    offs = make_store(root)
    split = offs[3000]
    for k in (1000, 2999, 3000, 3001, 5000):   # first half, the record before, at, after the split, second half
        o = offs[k]
        if damage == "body":
            flip(root, o + 200)
        elif damage == "size":
            patch(root, o, (123456).to_bytes(4, "big"))
        elif damage == "magic":
            patch(root, o + 4, b"\x00\x00\x00\x01")
        elif damage == "physical":
            patch(root, o + 28, (42).to_bytes(8, "big"))
        else:
            f, pos = at(root, o)
            patch(root, o + f.read_bytes().index(b"k%d" % k, pos) - pos + 1, b"#")
    two, one, merged = reports(root, monkeypatch, split)
    assert two == one and not two["ok"]
    assert len(two["problems"]) >= 3
    assert [p["offset"] for p in two["problems"] if p["kind"].startswith("commitlog")] == \
        sorted(p["offset"] for p in two["problems"] if p["kind"].startswith("commitlog"))


def test_damage_that_skips_the_first_walker_past_the_split(tmp_path, monkeypatch):
    """A bad magic code before the split, in the same file: the walk goes on at the next file,
    never at the split; the second walker's part is thrown away."""
    root = tmp_path / "s"
    offs = make_store(root)
    split = offs[3000]
    f, pos = at(root, split)
    before = [o for o in offs if int(f.name) < o < split][10]
    patch(root, before + 4, b"\x00\x00\x00\x01")
    two, one, merged = reports(root, monkeypatch, split)
    assert two == one and merged == 0
    assert any(p["offset"] == before for p in two["problems"])


def test_a_tiny_store_is_walked_by_one_walker(tmp_path, monkeypatch):
    root = tmp_path / "s"
    make_store(root, 200)

    def no(cl, options, pieces):
        raise AssertionError("split asked for on a tiny store")

    monkeypatch.setattr(CR, "split_points", no)
    with MessageStore.open(root, read_only=True) as st:
        assert check_store(st)["ok"]


def test_progress_is_monotonic_and_cancel_stops_both_walkers(tmp_path, monkeypatch):
    root = tmp_path / "s"
    offs = make_store(root)
    monkeypatch.setattr(CR, "SPLIT_MIN", 0)
    monkeypatch.setattr(CR, "cores", lambda: 2)
    monkeypatch.setattr(CR, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setattr(CR, "split_points", lambda cl, options, pieces: [offs[3000]])
    threads = threading.active_count()
    with MessageStore.open(root, read_only=True) as st:
        done = [p.done for p in check_task(st) if p.phase == "commitlog"]
        assert len(done) > 10 and done == sorted(done) and done[-1] == st.commitlog.max_offset - st.commitlog.min_offset
        token = threading.Event()
        task = check_task(st, cancel=token)
        next(task)
        next(task)
        token.set()
        with pytest.raises(CheckCancelled):
            for _ in task:
                pass
    assert threading.active_count() == threads   # the second walker has stopped


@pytest.mark.parametrize("sizes,more_keys,in_place", [((1000, 1000), False, True), ((3000, 200), False, False),
                                                      ((200, 3000), False, True), ((1000, 1000), True, False)])
def test_second_walkers_rows_joined_in_place_or_copied(tmp_path, monkeypatch, sizes, more_keys, in_place):
    """The second walker writes into the same columns after room guessed from the first MiB's
    rows: rows bigger later (room to spare: moved down), smaller later (the first walker or the
    second outgrows its room: copied). Either way, the one-walker report."""
    root = tmp_path / "s"
    s = MessageStore.create(root, StoreConfig.from_mapping(SMALL))
    offs = []
    for i in range(8000):
        offs.append(s.max_offset)
        body = sizes[0] if i < 1000 else sizes[1]
        keys = [f"k{i}"] + [f"x{i}"] * (i > 1000 or not more_keys)
        s.put_message(f"T{i % 5}", bytes([i % 251]) * body, i % 4, "TagA", keys)
    s.close()
    monkeypatch.setattr(CR, "PROBE", 1 << 18)
    joined = []
    real = CR._Builder._join_in_place

    def spy(self, o):
        joined.append(real(self, o))
        return joined[-1]

    monkeypatch.setattr(CR._Builder, "_join_in_place", spy)
    two, one, merged = reports(root, monkeypatch, offs[len(offs) // 2])
    assert two == one and two["ok"] and merged == 1
    assert joined == [in_place]


def test_crc_tails_of_both_walkers_are_counted_as_one(tmp_path, monkeypatch):
    """A 5.x store writing `__CRC32#` tails (enabledAppendPropCRC): a record whose tail was
    damaged and records whose tail marker is gone, in each half; the "unlike the other records
    of its file" rule counts both walkers' records of the file the split is in."""
    root = tmp_path / "s"
    s = MessageStore.create(root, StoreConfig.from_mapping({**SMALL, "enabledAppendPropCRC": True}))
    offs = []
    for i in range(3000):
        offs.append(s.max_offset)
        s.put_message(f"T{i % 3}", bytes([i % 251]) * 700, i % 4, "TagA", [f"k{i}"])
    s.close()
    split = offs[1500]
    f, pos = at(root, split)
    in_file = [k for k, o in enumerate(offs) if int(f.name) <= o < int(f.name) + (1 << 20)]
    for k in (in_file[5], in_file[-5]):                 # the tail's CRC digits
        f2, p2 = at(root, offs[k])
        data = f2.read_bytes()
        end = offs[k] + int.from_bytes(data[p2:p2 + 4], "big")
        digit = data[p2 + end - offs[k] - 3]
        patch(root, end - 3, b"1" if digit == ord("0") else b"0")   # always another digit
    for k in (in_file[8], in_file[-8], 1400, 1600):     # the tail's marker
        f2, p2 = at(root, offs[k])
        data = f2.read_bytes()
        patch(root, offs[k] + data.index(b"__CRC32#", p2) - p2, b"__XRC32#")
    two, one, merged = reports(root, monkeypatch, split)
    assert two == one and merged == 1 and two["crcRule"].startswith("body CRC and __CRC32#")
    crc = [p["detail"] for p in two["problems"] if p["kind"] == "commitlog-crc"]
    assert sum("unlike the other records" in d for d in crc) == 4 and len(crc) >= 5, crc


def test_many_pieces_taken_by_both_threads(tmp_path, monkeypatch):
    """The log cut into pieces of ~1 MiB (split_points' own cuts: file starts and record
    boundaries), damage in several of them: the one-walker report, every piece joined."""
    root = tmp_path / "s"
    offs = make_store(root)
    monkeypatch.setattr(CR, "PIECE", 1 << 20)
    two, one, merged = reports(root, monkeypatch, None)
    assert two == one and two["ok"] and merged >= 4
    for k in (10, 1500, 2200, 3100, 4400, 5900):
        flip(root, offs[k] + 300)
    patch(root, offs[2600] + 28, (7).to_bytes(8, "big"))
    two, one, merged = reports(root, monkeypatch, None)
    assert two == one and merged >= 4
    assert [p["offset"] for p in two["problems"] if p["kind"].startswith("commitlog")] == \
        [offs[k] for k in (10, 1500, 2200, 2600, 3100, 4400, 5900)]


def test_a_bad_cut_drops_the_pieces_after_it(tmp_path, monkeypatch):
    root = tmp_path / "s"
    offs = make_store(root)
    flip(root, offs[5000] + 300)
    two, one, merged = reports(root, monkeypatch, [offs[1000], offs[2500] + 7, offs[4000]])
    assert two == one and merged == 1 and two["problemCount"] == 1
