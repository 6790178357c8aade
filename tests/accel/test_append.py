"""The compiled put loop (engine/accel/_append.pyx) against the Python writer it replaces:
the same operations on two stores, one with the fast path and one without, must leave
byte-identical commitlogs, ConsumeQueues and index files and return equal PutResults --
including the puts the fast path hands back (roll-overs, first units of a queue, user
properties, V2 topics, delays), which exercises every hand-over between the two."""
import os
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import engine.store.message_store as ms
from engine import MessageStore, StoreConfig
from engine.format.msgid import UniqKeyGenerator, decode_uniq_key

from conftest import data_ranges

ACCEL = ms._APPEND
needs_accel = pytest.mark.skipif(ACCEL is None and os.environ.get("RMQSTORE_PURE_PYTHON") == "1",
                                reason="RMQSTORE_PURE_PYTHON=1: compiled modules off")


@needs_accel
def test_compiled_fast_paths_are_built_and_used():
    """make/pip build them; a silent fallback to Python would hide a 10-30x slowdown. (Every
    .pyx in engine/accel is listed in MODULES.)"""
    import glob
    import engine.accel as accel
    from pathlib import Path
    here = Path(accel.__file__).parent
    assert sorted(Path(p).stem for p in glob.glob(str(here / "*.pyx"))) == sorted(accel.MODULES)
    assert accel.status() == {n: True for n in accel.MODULES}, "run make (or pip install -e .) to build them"
    assert ACCEL is not None


class CountingUniq(UniqKeyGenerator):
    """Deterministic UNIQ_KEYs; its month range stays empty, so the compiled loop asks it too."""

    def next(self, now_ms=None):
        self.counter = (self.counter + 1) & 0xFFFF
        return self.prefix + f"{0x1234:08X}{self.counter:04X}"


SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=400, maxHashSlotNum=16, maxIndexNum=60)


def make_store(root, fast: bool, **cfg):
    s = MessageStore.create(root, StoreConfig.from_mapping(cfg))
    w = s.writer
    w.uniq = CountingUniq(ip=b"\x0a\x00\x00\x07", pid=77, loader_hash=0xABCDEF)
    tick = [1_795_000_000_000]

    def clock():
        tick[0] += 7
        return tick[0]
    w.clock = clock
    return s


def run_ops(s, ops, fast: bool):
    saved = ms._APPEND
    ms._APPEND = saved if fast else None
    out = []
    try:
        for kind, topic, bodies, qid, tags, keys, props in ops:
            try:
                if kind == "one":   # (the compiled front, or the reference it hands back to)
                    put = s.put_message if fast else s._put_message_py
                    r = [put(topic, bodies[0], qid, tags, keys, props)]
                else:
                    r = list(s.put_messages(topic, bodies, qid, tags, keys, props))
                out.append([x.to_json() for x in r])
            except Exception as e:  # noqa: BLE001 - both paths must refuse alike
                out.append(f"{type(e).__name__}: {e}")
    finally:
        ms._APPEND = saved
    return out


def store_files(s) -> dict:
    """Every data file (its MappedFile), index files by position (their names are wall-clock
    times), plus each index header."""
    out = {}
    for f in s.commitlog.files:
        out[f"commitlog/{f.path.name}"] = f
    for (topic, qid), cq in sorted(s.queues.items()):
        for f in cq.queue.files:
            out[f"cq/{topic}/{qid}/{f.path.name}"] = f
    for i, f in enumerate(s.index.files):
        out[f"index/{i}"] = f.file
        out[f"index/{i}/header"] = f.header.to_json()
    return out


def assert_same_bytes(key, fa, fb) -> None:
    """The two mapped files hold the same bytes. Only the blocks where either file has data are
    read: default-size files (1 GiB commitlog, 420 MB index) are almost all holes, and reading
    them through the map would make 2.8 GB of zero pages resident."""
    assert len(fa.buf) == len(fb.buf), f"{key}: sizes {len(fa.buf)} != {len(fb.buf)}"
    ranges = sorted(data_ranges(fa.path) + data_ranges(fb.path))
    pos = 0
    for start, end in ranges:
        start = max(start, pos)
        while start < end:
            stop = min(end, start + (16 << 20))
            assert bytes(fa.buf[start:stop]) == bytes(fb.buf[start:stop]), f"{key} differs in [{start}, {stop})"
            start = pos = stop


def compare(tmp_path, ops, **cfg):
    a = make_store(tmp_path / "fast", True, **cfg)
    b = make_store(tmp_path / "pure", False, **cfg)
    try:
        ra, rb = run_ops(a, ops, True), run_ops(b, ops, False)
        assert ra == rb
        da, db = store_files(a), store_files(b)
        assert sorted(da) == sorted(db)
        for k in da:
            if k.endswith("/header"):
                assert da[k] == db[k], f"{k} differs"
            else:
                assert_same_bytes(k, da[k], db[k])
        assert a.writer.queue_offsets == b.writer.queue_offsets
        assert a.writer.last_dispatched_ts == b.writer.last_dispatched_ts
        assert a.writer.new_topics == b.writer.new_topics
    finally:
        a.close()
        b.close()
    return ra


TOPICS = ["Orders", "Pay_ments-2", "%RETRY%grp", "T" * 130, "SCHEDULE_TOPIC_XXXX", "bad topic"]
TAGS = [None, "", "TagA", "标签", "a\x01b", "x\x02y", 7]
KEYS = [None, "", "k1", "k1 k2", "  lead  trail ", ["a", "b"], ("x y", "z"), [], "😀 ü", ["a", 3], "k\x02"]
PROPS = [None, None, None, {"custom": "v"}]

op = st.tuples(
    st.sampled_from(["one", "one", "batch"]),
    st.sampled_from(TOPICS[:3] * 4 + TOPICS[3:]),
    st.lists(st.sampled_from([b"", b"x", b"y" * 100, bytes(range(256)) * 12]), min_size=1, max_size=5),
    st.sampled_from([None, None, 0, 1, 3]),
    st.sampled_from(TAGS),
    st.sampled_from(KEYS),
    st.sampled_from(PROPS),
)


@needs_accel
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=1, max_size=60), crc=st.booleans(), index=st.booleans())
def test_fast_and_python_paths_write_the_same_bytes(tmp_path_factory, ops, crc, index):
    tmp = tmp_path_factory.mktemp("diff")
    compare(tmp, ops, enabledAppendPropCRC=crc, messageIndexEnable=index, **SMALL)


@needs_accel
def test_long_run_with_roll_overs_is_identical(tmp_path):
    """Hundreds of puts through tiny files: commitlog, CQ and index roll over many times,
    each time the fast path hands one put to Python and takes over again."""
    ops = []
    for i in range(400):
        topic = TOPICS[i % 2]
        if i % 9 == 0:
            ops.append(("batch", topic, [b"b" * (i % 50)] * (1 + i % 4), i % 3, "TagB", ["bk", f"u{i}"], None))
        else:
            ops.append(("one", topic, [bytes([i % 256]) * (i % 700)], None, "TagA", f"key-{i} k{i % 5}", None))
    res = compare(tmp_path, ops, **SMALL)
    assert all(isinstance(r, list) for r in res)   # every put succeeded


@needs_accel
def test_ipv6_hosts_and_default_sizes(tmp_path):
    ops = [("one", "Orders", [b"v6"], None, "T", "k", None)] * 5 + [("batch", "Orders", [b"a", b"b"], 1, None, None, None)]
    compare(tmp_path, ops, brokerIP1="2001:db8::7")


@needs_accel
def test_results_are_a_sequence(tmp_path):
    s = make_store(tmp_path / "s", True)
    try:
        s.put_messages("Orders", [b"first"], 0)               # the queue's first unit: Python path
        r = s.put_messages("Orders", [b"a", b"bb", b"ccc"], 0, "T", ["k"])
        assert type(r).__name__ == "PutResults"              # the compiled path answered
        assert len(r) == 3 and bool(r)
        assert [x.queueOffset for x in r] == [1, 2, 3]
        assert r[-1] == r[2] and r[-1].storeSize - r[0].storeSize == 2
        assert r[1:] == [r[1], r[2]]
        assert r == list(r)
        with pytest.raises(IndexError):
            r[3]
        assert r[0].msgId == (s.writer.store_host + r[0].commitLogOffset.to_bytes(8, "big")).hex().upper()
        got = s.get_message("Orders", 0, 1, 3).messages
        assert [m.uniqKey for m in got] == [x.uniqKey for x in r]
        assert [m.commitLogOffset for m in got] == [x.commitLogOffset for x in r]
    finally:
        s.close()


@needs_accel
def test_uniq_keys_from_the_compiled_generator(tmp_path):
    """The compiled loop formats UNIQ_KEYs itself within the current month: same prefix,
    consecutive counters, a send time that decodes to now."""
    s = MessageStore.create(tmp_path / "s", StoreConfig())
    try:
        s.put_message("Orders", b"x", 0)                       # Python path: first unit, caches the month
        before = int(time.time() * 1000)
        rs = [s.put_message("Orders", b"x", 0) for _ in range(50)]
        after = int(time.time() * 1000)
        prefix = s.writer.uniq.prefix
        counters = []
        for r in rs:
            assert r.uniqKey.startswith(prefix) and len(r.uniqKey) == len(prefix) + 12
            d = decode_uniq_key(r.uniqKey, now_ms=after + 5000)
            assert before - 1000 <= d["approxTimestamp"] <= after + 1000
            counters.append(d["counter"])
        assert counters == list(range(counters[0], counters[0] + 50))
        m = s.get_message("Orders", 0, 1, 1).messages[0]
        assert m.uniqKey == rs[0].uniqKey
        assert [x.commitLogOffset for x in s.query_message("Orders", rs[7].uniqKey).messages] == [rs[7].commitLogOffset]
    finally:
        s.close()


@needs_accel
def test_store_written_fast_reopens_and_checks_clean(tmp_path):
    s = MessageStore.create(tmp_path / "s", StoreConfig.from_mapping(SMALL))
    for i in range(300):
        s.put_message(f"T{i % 3}", b"p" * (i % 300), None, "Tag", [f"k{i}", "shared"])
    s.close()
    from engine.analysis.check import check_store
    with MessageStore.open(tmp_path / "s", StoreConfig.from_mapping(SMALL)) as r:
        report = check_store(r)
        assert report["ok"], report["problems"] if "problems" in report else report
        assert r.query_message("T1", "k7").messages[0].body == b"p" * 7


def test_pure_python_switch_turns_the_compiled_modules_off():
    code = "import engine.accel as a, engine.store.message_store as m; print(m._APPEND is None, any(a.status().values()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "RMQSTORE_PURE_PYTHON": "1"}).stdout.split()
    assert out == ["True", "False"]


# ---- the write path's state as C fields (engine/accel/_state.pyx) -----------------------------
STATE_ATTRS = [("file", "wrote_position"), ("file", "reserved_until"), ("cq", "max_physic_offset"),
               ("writer", "last_store_ts"), ("writer", "last_dispatched_ts"), ("uniq", "counter"),
               ("uniq", "_month_start_cached"), ("uniq", "_month_end_cached")]


@pytest.mark.parametrize("owner, attr", STATE_ATTRS)
def test_state_attributes_keep_any_value(tmp_path, owner, attr):
    """The positions and timestamps behave as plain attributes whatever is set (an int past
    int64 from a hostile store, a bool, None): read back unchanged, same type. Compiled or not."""
    s = MessageStore.create(tmp_path / "s", StoreConfig.from_mapping(SMALL))
    try:
        s.put_message("Orders", b"x", 0)
        obj = {"file": s.commitlog.queue.files[-1], "cq": s.find_queue("Orders", 0), "writer": s.writer,
               "uniq": s.writer.uniq}[owner]
        for v in (0, 7, -1, (1 << 63) - 1, -(1 << 63), 1 << 63, -(1 << 70), True, None, 12345):
            setattr(obj, attr, v)
            got = getattr(obj, attr)
            assert got == v and type(got) is type(v), (attr, v, got)
    finally:
        s.writer.last_store_ts = s.writer.last_dispatched_ts = 0
        s.commitlog.queue.files[-1].wrote_position = s.commitlog.queue.files[-1].reserved_until = 0
        s.close()


@needs_accel
@pytest.mark.parametrize("owner, attr, value, read", [
    ("cq", "max_physic_offset", 1 << 64, True),       # a hostile CQ's last unit ends past int64
    ("writer", "last_store_ts", True, True),
    ("writer", "last_dispatched_ts", -(1 << 70), False),   # only written by a put: overwritten
    ("uniq", "counter", 1 << 64, True),
], ids=["cq-max-phy", "store-ts", "dispatched-ts", "uniq-counter"])
def test_state_that_is_not_int64_is_left_to_python(tmp_path, owner, attr, value, read):
    """A put meets state the C fields cannot hold: the compiled put hands it to Python, which
    does what it always did (same bytes, same answers or the same refusal)."""
    stores = [make_store(tmp_path / "fast", True, **SMALL), make_store(tmp_path / "pure", False, **SMALL)]
    ops = [("one", "Orders", [b"x" * (9 + i)], 0, "T", f"k{i}", None) for i in range(3)]
    later = ops + [("batch", "Orders", [b"b1", b"b2"], 0, "T", ["k"], None)]
    try:
        res = []
        for s, fast in zip(stores, (True, False)):
            r = run_ops(s, ops, fast)
            obj = {"cq": s.find_queue("Orders", 0), "writer": s.writer, "uniq": s.writer.uniq}[owner]
            setattr(obj, attr, value)
            if fast and read:
                assert s.writer._appender.put1("Orders", b"z", 0, "T", "k") is None   # handed over
            res.append(r + run_ops(s, later, fast))
        assert res[0] == res[1]
        da, db = store_files(stores[0]), store_files(stores[1])
        assert sorted(da) == sorted(db)
        for k in da:
            if k.endswith("/header"):
                assert da[k] == db[k], k
            else:
                assert_same_bytes(k, da[k], db[k])
    finally:
        for s in stores:
            s.writer.last_store_ts = s.writer.last_dispatched_ts = 0
            s.writer.uniq.counter = 0
            s.close()


@needs_accel
def test_single_put_returns_a_put_result(tmp_path):
    """put_message's compiled answer is a PutResult (the NamedTuple), not a look-alike."""
    from engine.store.writer import PutResult
    s = make_store(tmp_path / "s", True)
    try:
        s.put_message("Orders", b"first", 0)                  # the queue's first unit: Python path
        r = s.put_message("Orders", b"second", 0, "T", ["one key"])
        assert type(r) is PutResult and isinstance(r, tuple) and len(r) == 9
        assert r == PutResult(*r) and hash(r) == hash(tuple(r))
        assert r._asdict() == r.to_json() and r.status == "PUT_OK" and r.queueOffset == 1
        m = s.get_message("Orders", 0, 1, 1).messages[0]
        assert (m.uniqKey, m.commitLogOffset, m.storeSize, m.msgId) == (r.uniqKey, r.commitLogOffset,
                                                                         r.storeSize, r.msgId)
    finally:
        s.close()


def test_a_file_closed_while_warming_waits_and_unmaps(tmp_path):
    """The commitlog's pages are populated on a thread of its own (MappedFile.warm): a file
    closed straight after it was made waits for that thread, then unmaps (a map left behind
    would keep the file's memory); what was written before is on disk. Compiled or not."""
    from engine.files.mapped_file import MappedFile
    path = tmp_path / "00000000000000000000"
    f = MappedFile(path, 64 << 20, writable=True, create=True, reserve_step=64 << 20, populate=True)
    f.write_at(0, b"first")
    f.flush(5)
    f.close()
    assert f.mm.closed
    with open(path, "rb") as fh:
        assert fh.read(6) == b"first\x00"
