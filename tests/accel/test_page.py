"""getMessage pages (engine/store/page.py) and the compiled page loop (engine/accel/_page.pyx):

- the compiled loop against the reference loop (check_record per record): every queue of
  every conformance fixture, ~500 start offsets a fixture (from the first unit of the first CQ
  file, below the queue's min too) and every CQ file's edges, several page sizes, broker mode; all Message fields, the
  columns, status, nextBeginOffset, bufferTotalSize and the skipped units;
- crafted stores: IPv6 hosts, V2 topics, SCHEDULE_TOPIC_XXXX delays, non-ASCII tags, empty
  bodies, pages across CQ and commitlog files, broker byte limits; then damaged (flipped
  bytes, torn records, CQ units with the wrong size or pointing nowhere) and read with the
  CRC checks on;
- the record check alone (classify) against check_record on fuzzed records;
- the lazy page as a list.

Comparisons with the compiled module are skipped when it is not built or turned off
(RMQSTORE_PURE_PYTHON=1); the page tests then run on the reference loop alone."""
from __future__ import annotations

import dataclasses
import pickle
import random
import struct
import zlib

import numpy as np
import pytest

from conftest import FIXTURES, fixture_copy, unpack  # noqa: F401 - fixture_copy is a fixture
from engine import MessageStore, StoreConfig
from engine.errors import CorruptDataError
from engine.store import page as PG
from engine.store import page_reader as PR
from engine.format.message import (DecodeOptions, Message, MessageDraft, RecordStatus, check_record, encode_record,
                            prop_crc_tail)

KERNEL = PG.KERNEL
needs_kernel = pytest.mark.skipif(KERNEL is None, reason="engine.accel._page not built or RMQSTORE_PURE_PYTHON=1")
SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=400, maxHashSlotNum=64, maxIndexNum=256)


# ---- helpers -----------------------------------------------------------------------------------
def items(page) -> list:
    """The page's messages; a broker page's record that is not a message of its unit's size
    (read only when asked for, as the broker hands it out unread) as ("corrupt", offset)."""
    out = []
    for i in range(len(page)):
        try:
            out.append(page[i])
        except CorruptDataError as e:
            out.append(("corrupt", e.offset))
    return out


def columns(page):
    try:
        return page.columns.tolist()
    except CorruptDataError as e:
        return ("corrupt", e.offset)


def snapshot(r) -> tuple:
    msgs = items(r.messages)
    cols = columns(r.messages) if isinstance(r.messages, PG.MessagePage) else []
    return (r.status, r.nextBeginOffset, r.minOffset, r.maxOffset, r.bufferTotalSize, list(r.skipped),
            msgs, [m if isinstance(m, tuple) else m.to_json() for m in msgs], cols)


def loop(compiled: bool, saved=PG.KERNEL):
    """Pages by the compiled loop (as built) or by the reference: the page module's kernel, and
    MessageStore.get_message (the compiled one itself when built)."""
    PG.KERNEL = saved if compiled else None
    MessageStore.get_message = PR.get_message if compiled else PR.get_message_reference


def both(fn):
    """fn() with the compiled loop, then with the reference loop."""
    try:
        a = fn()
        loop(False)
        b = fn()
    finally:
        loop(True)
    return a, b


def compared(make):
    """make() gives an iterator of (key, answer): run it with the compiled loop and with the
    reference loop in lockstep, assert each pair of answers equal at once and yield the
    compiled one. (Collecting both whole runs first, as `both` does, held 1.5 GB of answers for
    the small fixture.)"""
    try:
        ga, gb = make(), make()
        while True:
            loop(True)
            x = next(ga, None)
            loop(False)
            y = next(gb, None)
            loop(True)
            assert (x is None) == (y is None), "the two runs gave different numbers of answers"
            if x is None:
                return
            assert x[0] == y[0]
            assert x[1] == y[1], x[0]
            yield x
    finally:
        loop(True)


def start_offsets(cq, step: int) -> list[int]:
    """Every `step`-th offset from the first unit of the queue's first CQ file to max + 1, plus
    the offsets where a page's shape changes whatever the step: each CQ file's first unit and
    its neighbours, the queue's min and max and their neighbours."""
    lo, hi = cq.queue.min_offset // 20, cq.max_offset + 1
    edges = {b + d for b in range(lo - lo % cq.units_per_file, hi + 1, cq.units_per_file) for d in (-1, 0, 1)}
    edges |= {cq.min_offset + d for d in (-1, 0, 1)} | {hi - 2, hi - 1, hi}
    return sorted(set(range(lo, hi + 1, step)) | {o for o in edges if lo <= o <= hi})


def read_all(store, counts=(1, 3, 32), step=1, broker=(False, True)):
    """get_message from the start offsets of every queue (`start_offsets`), plus read_page
    below the queue's min (fillers, expired): an iterator of (key, answer)."""
    for (topic, qid), cq in sorted(store.queues.items()):
        for off in start_offsets(cq, step):
            for n in counts:
                for b in broker:
                    yield (topic, qid, off, n, b), snapshot(store.get_message(topic, qid, off, n, broker=b))
                    if off < cq.max_offset:
                        st, nxt, page, total, skipped = PG.read_page(
                            store.commitlog, cq, off, cq.max_offset, n, b, 32 if b else max(n, 1),
                            256 * 1024 if b else None, kernel=PG.KERNEL is not None)
                        yield ((topic, qid, off, n, b, "raw"),
                               (st, nxt, total, skipped, items(page), columns(page)))


def check_page_parts(page):
    """columns / body / topic / properties_raw agree with the Message of every row."""
    cols = page.columns
    assert len(cols) == len(page)
    for i, m in enumerate(page):
        row = cols[i]
        for name in ("commitLogOffset", "queueOffset", "physicalOffsetField", "bornTimestamp", "storeTimestamp",
                     "preparedTransactionOffset", "tagsCode", "storeSize", "magicCode", "bodyCRC", "queueId",
                     "flag", "sysFlag", "reconsumeTimes"):
            assert int(row[name]) == getattr(m, name), name
        assert int(row["bodyLength"]) == len(m.body)
        assert bytes(page.body(i)) == m.body
        assert page.topic(i) == m.topic
        assert page.properties_raw(i) == m.propertiesRaw


# ---- conformance fixtures ----------------------------------------------------------------------
@needs_kernel
@pytest.mark.parametrize("name", FIXTURES)
def test_compiled_pages_equal_reference_pages_on_fixtures(name):
    root = unpack(name)
    with MessageStore.open(root) as s:
        # ~500 sampled starts a fixture, plus every file edge (start_offsets): the small and v5
        # fixtures at every offset took 80 of this file's 190 s for no record shape the others
        # lack (default, crashed, crashed_torn, crashed_badcrc, v5_crashed still take every offset)
        total = sum(cq.max_offset - cq.queue.min_offset // 20 for cq in s.queues.values())
        step = max(1, total // 500)
        assert sum(len(x[1][6]) for x in compared(lambda: read_all(s, step=step)) if len(x[0]) == 5) > 0


@pytest.mark.parametrize("name", ["small", "v5", "crashed_torn"])
def test_page_parts_agree_with_messages(name):
    with MessageStore.open(unpack(name)) as s:
        for (topic, qid), cq in sorted(s.queues.items()):
            if cq.max_offset > cq.min_offset:
                r = s.get_message(topic, qid, cq.min_offset, 64)
                check_page_parts(r.messages)


@needs_kernel
def test_expired_files_and_late_queues(fixture_copy):
    root = fixture_copy("small")
    for f in sorted((root / "commitlog").iterdir())[:2]:
        f.unlink()
    with MessageStore.open(root) as s:
        skipped = {why for _, snap in compared(lambda: read_all(s, counts=(1, 32), step=3))
                   for why in [w for _, w in (snap[5] if len(snap) > 6 else snap[3])]}
        assert PG.WHY_EXPIRED in skipped


# ---- crafted stores ----------------------------------------------------------------------------
def crafted_store(root):
    s = MessageStore.create(root, StoreConfig.from_mapping(SMALL))
    rnd = random.Random(3)
    for i in range(260):
        kind = i % 9
        body = bytes(rnd.randrange(256) for _ in range(rnd.choice((0, 1, 40, 300, 2000))))
        if kind == 0:
            s.put_message("TopicA", body, 0, tags="TagA", keys=f"k{i}")
        elif kind == 1:
            s.put_message("TopicA", body, 1, tags="标签-ü", keys=f"k{i} u{i}")
        elif kind == 2:
            s.put_message("TopicA", body, 0, tags="TagB", born_host="[2001:db8::7]:4242")
        elif kind == 3:
            s.put_message("TopicB", body, 0, tags="late", delay_level=1 + i % 5)
        elif kind == 4:
            s.put_message("TopicB", body, 1, properties={"a": "b", "TAGS": "x\x01y"})
        elif kind == 5:
            s.put_messages("TopicA", [body, body[:5], b""], 1, tags="batch")
        elif kind == 6:
            s.put_message("TopicC", body, 0, tags=None, keys=None, flag=7)
        elif kind == 7:
            s.put_message("TopicC", body, 1, properties={"DELAY": "3"}, tags="d")
        else:
            s.put_message("T" * 100, body, 0, tags="long")
    s.close()
    return root


@pytest.fixture
def crafted(tmp_path):
    return crafted_store(tmp_path / "crafted")


@needs_kernel
def test_crafted_store(crafted):
    with MessageStore.open(crafted) as s:
        assert len(s.commitlog.files) >= 3
        sched = [k for k in s.queues if k[0] == "SCHEDULE_TOPIC_XXXX"]
        assert sched
        msgs = [m for _, snap in compared(lambda: read_all(s, counts=(1, 5, 32, 1000))) if len(snap) > 6
                for m in snap[6]]
        assert any(m.bornHostBytes and len(m.bornHostBytes) == 20 for m in msgs)
        assert any(m.topic == "SCHEDULE_TOPIC_XXXX" and m.tagsCode > 10 ** 12 for m in msgs)
        assert any(m.tags == "标签-ü" for m in msgs)
        for (topic, qid), cq in sorted(s.queues.items()):
            check_page_parts(s.get_message(topic, qid, cq.min_offset, 10 ** 6).messages)


@needs_kernel
def test_crafted_store_broker_limits(crafted):
    with MessageStore.open(crafted) as s:
        for limits in ((3, 10 ** 6), (32, 2500), (32, 1), (0, 0)):
            s.cfg.maxTransferCountOnMessageInMemory, s.cfg.maxTransferBytesOnMessageInMemory = limits
            for _ in compared(lambda: read_all(s, counts=(0, 2, 32), broker=(True,))):
                pass


def _damage(root, seed: int, n: int = 40):
    """Flip bytes inside records, tear some, and give CQ units wrong sizes / offsets."""
    rnd = random.Random(seed)
    cl_files = sorted((root / "commitlog").iterdir())
    with MessageStore.open(root) as s:
        units = []
        for cq in s.queues.values():
            got = cq.units(cq.min_offset, cq.max_offset)
            units += [(cq, cq.min_offset + i, int(u["commitLogOffset"]), int(u["size"])) for i, u in enumerate(got)]
        fsize = s.commitlog.file_size
    for _ in range(n):
        cq, q, phy, size = rnd.choice(units)
        path = cl_files[0].parent / f"{phy - phy % fsize:020d}"
        if not path.exists():
            continue
        data = bytearray(path.read_bytes())
        pos = phy % fsize
        how = rnd.randrange(6)
        if how == 0:    # a header field (size, magic, crc, sysflag incl. the host flags, ...)
            k = pos + rnd.choice((0, 1, 3, 4, 7, 8, 36, 39))
        elif how == 1:  # anywhere in the record
            k = pos + rnd.randrange(size)
        elif how == 2:  # the lengths near the tail (topic / properties length)
            k = pos + size - rnd.randrange(1, 40)
        else:
            k = None
        if k is not None:
            data[k] ^= 1 << rnd.randrange(8)
            path.write_bytes(bytes(data))
            continue
        cq_dir = root / "consumequeue" / cq.topic / str(cq.queue_id)
        cq_file_size = cq.file_size
        cpath = cq_dir / f"{q * 20 - q * 20 % cq_file_size:020d}"
        if not cpath.exists():
            continue
        cdata = bytearray(cpath.read_bytes())
        at = q * 20 % cq_file_size
        if how == 3:    # wrong size
            struct.pack_into(">i", cdata, at + 8, size + rnd.choice((-1, 1, 8, -size + 1)))
        elif how == 4:  # pointing into the middle of a record / past the data
            struct.pack_into(">q", cdata, at, phy + rnd.choice((1, 4, size // 2, 10 ** 7)))
        else:           # a filler unit
            struct.pack_into(">qiq", cdata, at, 0, 0x7FFFFFFF, 0)
        cpath.write_bytes(bytes(cdata))


@needs_kernel
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_damaged_crafted_store(crafted, seed):
    _damage(crafted, seed)
    with MessageStore.open(crafted) as s:
        for check_crc, force in ((False, False), (True, False), (True, True)):
            s.commitlog.read_opts = dataclasses.replace(s.commitlog.read_opts, check_crc=check_crc,
                                                        force_verify_prop_crc=force)
            seen = [bool(snap[5]) for _, snap in compared(lambda: read_all(s, counts=(1, 32))) if len(snap) > 6]
        assert any(seen)  # the damage was seen


@needs_kernel
def test_damaged_fixture(fixture_copy):
    root = fixture_copy("small")
    _damage(root, 11, 80)
    with MessageStore.open(root) as s:
        for _ in compared(lambda: read_all(s, counts=(1, 32), step=3)):
            pass



def wide_store(root):
    """Records far apart in their queue: bodies of 1-6 KiB over four queues in 1 MiB commitlog
    files, so a page of 32 spans more than 64 KiB (the page loop's TOUCH_SPAN) and its records
    are loaded in one loop before they are checked (touch_record), on both page kinds."""
    cfg = dict(SMALL, mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20 * 64)
    s = MessageStore.create(root, StoreConfig.from_mapping(cfg))
    rnd = random.Random(5)
    for i in range(400):
        s.put_message("W", rnd.randbytes(rnd.choice((1000, 3000, 6000))), i % 4, tags="TagW", keys=f"w{i}")
    s.close()
    with MessageStore.open(root) as s:
        phy = s.find_queue("W", 0).units(0, 100)["commitLogOffset"]
    assert int((phy[31:] - phy[:-31]).min()) > 65536
    return root


@needs_kernel
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_wide_pages_touched_first_answer_as_the_reference(tmp_path, seed):
    root = wide_store(tmp_path / "wide")
    if seed is not None:
        _damage(root, seed, n=30)
    with MessageStore.open(root) as s:
        snaps = [snap for _, snap in compared(lambda: read_all(s, counts=(1, 32), step=3)) if len(snap) > 6]
        assert sum(len(snap[6]) for snap in snaps) > (1000 if seed is None else 30)
        if seed is None:
            for qid in range(4):
                check_page_parts(s.get_message("W", qid, 0, 64).messages)

@needs_kernel
def test_v2_refused_when_not_accepted():
    with MessageStore.open(unpack("v5")) as s:
        was = s.commitlog.read_opts
        s.commitlog.read_opts = dataclasses.replace(was, accept_v2=False)
        try:
            for _ in compared(lambda: read_all(s, counts=(32,), step=5, broker=(False,))):
                pass
        finally:
            s.commitlog.read_opts = was


@needs_kernel
def test_unusual_arguments_answer_as_the_reference():
    """The compiled get_message takes integers in int64 (numpy ones too); anything else (huge
    or negative offsets, counts below one) goes to the reference and gets its answer. Numpy
    arguments are compared with the reference given the same values as ints (its own
    arithmetic overflows on np.int64 + 2**63)."""
    with MessageStore.open(unpack("small")) as s:
        assert s.pages_compiled and PG.KERNEL is KERNEL
        (topic, qid), cq = sorted(s.queues.items())[0]
        mn, mx = cq.min_offset, cq.max_offset
        calls = [(topic, qid, off, n, b) for off in (mn, np.int64(mn), mx - 1, mx, mx + 5, -1, -2 ** 63, 2 ** 63, 2 ** 70)
                 for n in (1, 32, np.int32(3), 0, -4, 2 ** 63 - 1, 2 ** 64) for b in (False, True, 1, 0)]
        calls += [(topic, qid + 1000, mn, 32, False), ("no-such-topic", 0, 0, 32, True)]

        def run():
            out = []
            for t, q, off, n, b in calls:
                if PG.KERNEL is None:
                    off, n = (int(v) if isinstance(v, np.integer) else v for v in (off, n))
                try:
                    out.append(snapshot(s.get_message(t, q, off, n, broker=b)))
                except (OverflowError, ValueError, TypeError) as e:
                    out.append(type(e).__name__)
            return out
        a, b = both(run)
        assert a == b
        assert sum(1 for r in a if isinstance(r, tuple) and r[0] == "FOUND") >= 8

        # numpy integers stay on the compiled path (the reference is ~30x slower per page)
        def no_reference(*args):
            raise AssertionError(f"fell back to the reference for {args}")
        s.pages.get_message_py = no_reference
        r = s.get_message(topic, qid, np.int64(mn), np.int32(5))
        assert r.status == "FOUND" and len(r.messages) == 5 and type(r.nextBeginOffset) is int


# ---- the record check alone --------------------------------------------------------------------
def _records(rnd):
    out = []
    for i in range(60):
        props = {"TAGS": rnd.choice(["TagA", "ü-tag", "", "a\x01b"]), "KEYS": f"k{i}", "UNIQ_KEY": f"{i:032X}"}
        if i % 5 == 0:
            props["DELAY"] = rnd.choice(["2", "x", "99", "-1", "٣"])
        topic = "SCHEDULE_TOPIC_XXXX" if i % 4 == 0 else rnd.choice(["T", "Topic" * 30, "Top\xe9"])
        d = MessageDraft(topic=topic, body=bytes(rnd.randrange(256) for _ in range(rnd.choice((0, 3, 200)))),
                         queueId=i % 3, flag=i, properties={k: v for k, v in props.items() if v},
                         bornHost=rnd.choice([b"\x7f\0\0\1" + b"\0\0\0\1", bytes(16) + b"\0\0\1\0"]),
                         storeHost=rnd.choice([b"\x0a\0\0\1" + b"\0\0\x2a\x9f", bytes(range(16)) + b"\0\0\1\1"]),
                         reconsumeTimes=i % 4, preparedTransactionOffset=i * 1000)
        v2 = i % 3 == 0 or len(topic) > 127
        e = encode_record(d, v2=v2, props_trailing=bool(i % 2), crc_tail=i % 6 == 1)
        e.patch(i * 7, 12345 + i, 1_700_000_000_000 + i)
        out.append(bytes(e.data))
    out.append(struct.pack(">ii", 200, -875286124) + bytes(192))  # the blank record at a file's end
    return out


OPTS = [DecodeOptions(), DecodeOptions(check_crc=True), DecodeOptions(check_crc=True, force_verify_prop_crc=True),
        DecodeOptions(accept_v2=False)]


def _flags(o: DecodeOptions) -> int:
    return ((KERNEL.CHECK_CRC if o.check_crc else 0) | (KERNEL.FORCE_PROP_CRC if o.force_verify_prop_crc else 0)
            | (KERNEL.ACCEPT_V2 if o.accept_v2 else 0))


@needs_kernel
def test_classify_matches_check_record_on_fuzzed_records():
    rnd = random.Random(5)
    recs = _records(rnd)
    seen = set()
    rows = bytearray(PG.ROW_SIZE)
    for trial in range(6000):
        rec = bytearray(rnd.choice(recs))
        how = trial % 6
        if how == 1:
            for _ in range(rnd.randrange(1, 4)):
                rec[rnd.randrange(len(rec))] ^= 1 << rnd.randrange(8)
        elif how == 2:
            k = rnd.choice((0, 4, 8, 36, 39, len(rec) - 3, len(rec) - 1, len(rec) // 2))
            rec[k] ^= 1 << rnd.randrange(8)
        prefix = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 5)))
        buf = prefix + bytes(rec) + bytes(rnd.randrange(0, 60))
        pos = len(prefix) if how != 3 else 0  # 3: starting in the wrong place
        limit = len(buf) if how != 4 else pos + rnd.randrange(0, len(rec) + 1)  # 4: a torn record
        if how == 5:
            buf = buf[:rnd.randrange(pos, len(buf) + 1)]
            limit = len(buf)
        if pos >= limit:
            continue
        for o in OPTS:
            want = check_record(buf, pos, limit, pos, o)
            st, size = KERNEL.classify(buf, pos, limit, _flags(o), rows, 0)
            seen.add((want.status, st))
            if st == KERNEL.NEEDS_PY:
                # what the kernel leaves to check_record: a scheduled delay, tags outside ASCII
                assert want.message is None or want.message.topic == "SCHEDULE_TOPIC_XXXX" \
                    or not want.message.tags.isascii()
                continue
            assert (st, size) == ({RecordStatus.MESSAGE: KERNEL.MESSAGE, RecordStatus.END_OF_FILE: KERNEL.END_OF_FILE,
                                   RecordStatus.INVALID: KERNEL.INVALID,
                                   RecordStatus.SIZE_MISMATCH: KERNEL.SIZE_MISMATCH}[want.status], want.size), \
                (trial, how, o, want.reason)
            if st == KERNEL.MESSAGE:
                page = PG.MessagePage(KERNEL.PageState(1, rows, [memoryview(buf)]))
                assert page[0] == want.message == PG.MessagePage(PG.PageState(1, rows, [memoryview(buf)]))[0]
    # every status met, the kernel confirming messages and leaving some to Python
    assert {w for w, _ in seen} == set(RecordStatus)
    assert (RecordStatus.MESSAGE, KERNEL.MESSAGE) in seen and (RecordStatus.MESSAGE, KERNEL.NEEDS_PY) in seen


@needs_kernel
def test_property_scan_at_every_alignment():
    """The kernel finds property separators eight bytes at a time: raw property strings with
    TAGS / DELAY segments (duplicates, empty parts, names that only start like TAGS, separators
    at every offset around a word) give check_record's tagsCode and status."""
    rnd = random.Random(11)
    names = ["TAGS", "DELAY", "KEYS", "TAG", "TAGSX", "DELAYS", "", "\x02", "X" * 7]
    values = ["", "a", "TagA", "ab\x01c", "\xfc", "3", "x" * 9, "\x02\x02"]
    rows = bytearray(PG.ROW_SIZE)
    checked = 0
    for trial in range(3000):
        segs = []
        for _ in range(rnd.randrange(0, 6)):
            n, v = rnd.choice(names), rnd.choice(values)
            segs.append(n + ("\x01" + v if rnd.random() < 0.9 else v))
        raw = "\x02".join(segs) + ("\x02" if rnd.random() < 0.5 else "")
        raw = "P" * rnd.randrange(0, 9) + ("\x02" if rnd.random() < 0.5 else "") + raw if rnd.random() < 0.3 else raw
        topic = "SCHEDULE_TOPIC_XXXX" if trial % 5 == 0 else "T" * rnd.randrange(1, 12)
        d = MessageDraft(topic=topic, body=b"b" * rnd.randrange(0, 9), propertiesRaw=raw)
        e = encode_record(d)
        e.patch(trial, 7, 1_700_000_000_000)
        buf = bytes(e.data) + bytes(8)
        want = check_record(buf, 0, len(buf), 0)
        st, size = KERNEL.classify(buf, 0, len(buf), KERNEL.ACCEPT_V2, rows, 0)
        if st == KERNEL.NEEDS_PY:
            assert want.message is None or topic == "SCHEDULE_TOPIC_XXXX" or not want.message.tags.isascii()
            continue
        assert (st, size) == ({RecordStatus.MESSAGE: KERNEL.MESSAGE, RecordStatus.INVALID: KERNEL.INVALID,
                               RecordStatus.SIZE_MISMATCH: KERNEL.SIZE_MISMATCH}[want.status], want.size), raw
        if st == KERNEL.MESSAGE:
            page = PG.MessagePage(KERNEL.PageState(1, rows, [memoryview(buf)]))
            assert page.columns["tagsCode"][0] == want.message.tagsCode, raw
            assert page[0] == want.message == PG.MessagePage(PG.PageState(1, rows, [memoryview(buf)]))[0], raw
            checked += 1
    assert checked > 1500


@needs_kernel
def test_blank_record_and_short_tails():
    blank = struct.pack(">ii", 8, -875286124)
    assert KERNEL.classify(blank + bytes(100), 0, 108, 4)[0] == KERNEL.END_OF_FILE
    for n in range(0, 12):
        buf = struct.pack(">i", 60) + bytes(n)
        for limit in range(1, len(buf) + 1):
            want = check_record(buf, 0, limit, 0)
            st, size = KERNEL.classify(buf, 0, limit, 4)
            assert (st, size) == ({RecordStatus.INVALID: KERNEL.INVALID, RecordStatus.END_OF_FILE: KERNEL.END_OF_FILE,
                                   RecordStatus.SIZE_MISMATCH: KERNEL.SIZE_MISMATCH}[want.status], want.size)


@needs_kernel
def test_kernel_crc32_is_zlibs():
    rnd = random.Random(1)
    for n in (0, 1, 7, 8, 9, 63, 64, 65, 1000, 16384 + 3):
        data = bytes(rnd.randrange(256) for _ in range(n))
        assert KERNEL.crc32_of(data) == zlib.crc32(data)
    assert KERNEL.crc32_of(prop_crc_tail(7)) == zlib.crc32(prop_crc_tail(7))


@needs_kernel
def test_kernel_crc32_folded_and_table_agree_with_zlib_at_every_length_and_alignment():
    """The PCLMULQDQ folding (whole 16-byte blocks from 64 bytes on) and the table loop for
    the rest: every length around the block edges, odd start addresses, big buffers."""
    rnd = random.Random(2)
    pool = rnd.randbytes(70000)
    lengths = list(range(0, 200)) + [255, 256, 257, 1023, 1024, 1025, 4096 + 15, 65536 + 17]
    for n in lengths:
        for start in (0, 1, 3, 8, 13):
            data = memoryview(pool)[start:start + n]
            want = zlib.crc32(data)
            assert KERNEL.crc32_of(data) == want, (n, start)
            assert KERNEL.crc32_of(data, False) == want, (n, start)
    assert KERNEL.crc32_of(b"\xff" * 4096) == zlib.crc32(b"\xff" * 4096)


# ---- the lazy page as a list ---------------------------------------------------------------------
def test_page_behaves_as_a_list():
    with MessageStore.open(unpack("small")) as s:
        (topic, qid), cq = next((k, c) for k, c in sorted(s.queues.items()) if c.max_offset - c.min_offset >= 10)
        r = s.get_message(topic, qid, cq.min_offset, 10)
        page = r.messages
        plain = [s.commitlog.get_message(int(m.commitLogOffset)) for m in page]
        assert isinstance(page, PG.MessagePage)
        assert len(page) == 10 and bool(page) and all(isinstance(m, Message) for m in page)
        assert page == plain and plain == page and not (page != plain) and page != plain[:-1]
        assert page[0] is page[0]  # built once
        assert page[-1] == plain[-1] and page[-10] == plain[0]
        with pytest.raises(IndexError):
            page[10]
        with pytest.raises(IndexError):
            page[-11]
        assert page[2:5] == plain[2:5] and page[::-3] == plain[::-3] and page[:] == plain
        assert list(reversed(page)) == plain[::-1]
        assert plain[3] in page and page.index(plain[4]) == 4 and page.count(plain[4]) == 1
        assert page + [] == plain and [] + page == plain
        assert pickle.loads(pickle.dumps(page)) == plain
        assert repr(page) == repr(plain)
        assert page.tolist() == plain
        assert [m.queueOffset for m in page] == list(page.columns["queueOffset"])
        both_pages = PG.columns_of([page, empty_page(s, topic, qid, cq), page])
        assert both_pages.tolist() == page.columns.tolist() * 2
        assert r.to_json()["messages"] == [m.to_json() for m in plain]
        empty = s.get_message(topic, qid, cq.max_offset, 10).messages
        assert not empty and len(empty) == 0 and empty == []


def empty_page(s, topic, qid, cq):
    return s.get_message(topic, qid, cq.max_offset, 10, broker=False).messages or PG.MessagePage()


def test_page_outlives_its_store():
    s = MessageStore.open(unpack("small"))
    (topic, qid), cq = sorted(s.queues.items())[0]
    r = s.get_message(topic, qid, cq.min_offset, 20)
    want = [s.commitlog.get_message(int(o)) for o in r.messages.columns["commitLogOffset"]]
    s.close()
    assert list(r.messages) == want
    assert bytes(r.messages.body(0)) == want[0].body


@needs_kernel
def test_compiled_page_builds_no_message_until_asked():
    with MessageStore.open(unpack("small")) as s:
        (topic, qid), cq = sorted(s.queues.items())[0]
        page = s.get_message(topic, qid, cq.min_offset, 32).messages
        assert page.state.cache is None or all(m is None for m in page.state.cache)
        cols = page.columns
        assert cols.dtype == PG.ROW_DTYPE and len(cols) == len(page)
        assert np.all(np.diff(cols["queueOffset"]) == 1)
        assert page.state.cache is None or all(m is None for m in page.state.cache)
        assert page[3].queueOffset == int(cols["queueOffset"][3])
