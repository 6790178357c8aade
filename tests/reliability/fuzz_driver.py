"""Fuzz targets for the decoders, run in a child process with a memory cap (RLIMIT_AS) and a
time limit per example (SIGALRM). A target passes when no input makes it raise anything but a
typed StoreError, hang, or break an invariant (oracles: check_record for the bulk recovery
scan, the spec's chain walk for the index, JSON round trips for the config parser).

    python fuzz_driver.py TARGET [--examples N] [--seed S] [--timeout SEC] [--mem-mb MB]
    python fuzz_driver.py atheris-record --runs N      (coverage-guided, if atheris is installed)

Prints one JSON line {"target", "examples", "seconds"}; exits 1 with the failing input on error."""
from __future__ import annotations

import argparse
import functools
import json
import random
import resource
import shutil
import signal
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


class Hang(Exception):
    pass


TIMEOUT = [2.0]
COUNT = [0]


def bounded(fn):
    """Run one example under the per-example alarm."""
    @functools.wraps(fn)
    def wrapper(*a, **k):
        COUNT[0] += 1

        def on_alarm(signum, frame):
            raise Hang(f"example took more than {TIMEOUT[0]}s")
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, TIMEOUT[0])
        try:
            return fn(*a, **k)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    return wrapper


def typed_only(fn, *a, **k):
    from engine.errors import StoreError
    try:
        return fn(*a, **k)
    except StoreError as e:
        assert e.path, f"typed error without a file: {e!r}"
        return None


# ---- shared material ---------------------------------------------------------------------------
def sample_records(rng: random.Random, n: int = 6) -> list[bytes]:
    """Valid records of every shape: V1/V2, IPv4/IPv6 hosts, empty and binary bodies, odd
    properties, a SCHEDULE_TOPIC record with a DELAY, a 5.x CRC tail."""
    from engine.message import MessageDraft, encode_record
    out = []
    for i in range(n):
        v6b, v6s = rng.random() < 0.2, rng.random() < 0.2
        topic = rng.choice(["T", "SCHEDULE_TOPIC_XXXX", "%RETRY%g", "x" * rng.randrange(1, 127), ""])
        props = {"UNIQ_KEY": f"{rng.getrandbits(64):016X}"}
        if rng.random() < 0.5:
            props["KEYS"] = " ".join(rng.sample(["a", "b", "é", "k\x1b"], rng.randrange(1, 3)))
        if rng.random() < 0.3:
            props["TAGS"] = rng.choice(["t", "", "\u4e2d"])
        if topic == "SCHEDULE_TOPIC_XXXX":
            props["DELAY"] = rng.choice(["1", "3", "18", "99", "0", "-2"])
        d = MessageDraft(topic=topic, body=rng.randbytes(rng.choice([0, 1, 17, 300])), queueId=rng.randrange(8),
                         properties=props, sysFlag=rng.choice([0, 0, 0x4, 0x8, 0xC, 0x1]),
                         bornHost=(bytes(16) if v6b else b"\x7f\0\0\1") + struct.pack(">i", 1),
                         storeHost=(bytes(15) + b"\1" if v6s else b"\x7f\0\0\1") + struct.pack(">i", 10911))
        rec = encode_record(d, v2=rng.random() < 0.2, props_trailing=rng.random() < 0.3,
                            crc_tail=rng.random() < 0.15)
        rec.patch(rng.randrange(100), 0, 1_700_000_000_000 + i)
        out.append(bytes(rec.data))
    return out


# ---- targets ---------------------------------------------------------------------------------
def t_record(st, given, settings):
    """check_record on random and on mutated valid records: a classification, never an
    exception; a MESSAGE fits its buffer and agrees with itself."""
    from engine.message import DecodeOptions, RecordResult, RecordStatus, check_record
    recs = sample_records(random.Random(7), 24)
    opts_all = [DecodeOptions(), DecodeOptions(check_crc=True),
                DecodeOptions(check_crc=True, force_verify_prop_crc=True), DecodeOptions(accept_v2=False)]

    @st.composite
    def buffers(draw):
        if draw(st.booleans()):
            base = bytearray(draw(st.binary(min_size=0, max_size=600)))
        else:
            base = bytearray(b"".join(draw(st.lists(st.sampled_from(recs), min_size=1, max_size=3))))
            for _ in range(draw(st.integers(0, 6))):
                if not base:
                    break
                i = draw(st.integers(0, len(base) - 1))
                kind = draw(st.integers(0, 3))
                if kind == 0:
                    base[i] ^= 1 << draw(st.integers(0, 7))
                elif kind == 1:
                    v = draw(st.sampled_from([0, -1, 1, 2 ** 31 - 1, -2 ** 31, 91, 4096]))
                    base[i:i + 4] = struct.pack(">i", v)[:len(base[i:i + 4])]
                elif kind == 2:
                    del base[i:]
                else:
                    v = draw(st.sampled_from([-1, 0, 1, 32767, -32768]))
                    base[i:i + 2] = struct.pack(">h", v)[:len(base[i:i + 2])]
        pos = draw(st.integers(0, max(0, len(base))))
        limit = draw(st.integers(pos, len(base)))
        return bytes(base), pos, limit

    @settings
    @given(buffers(), st.sampled_from(range(len(opts_all))))
    @bounded
    def run(b, oi):
        buf, pos, limit = b
        r = check_record(buf, pos, limit, 1000 + pos, opts_all[oi])
        assert isinstance(r, RecordResult) and isinstance(r.status, RecordStatus)
        if r.status is RecordStatus.MESSAGE:
            m = r.message
            assert 0 < r.size <= limit - pos and m.storeSize == r.size and m.commitLogOffset == 1000 + pos
            json.dumps(m.to_json())
            _ = (m.msgId, m.bornHost, m.storeHost, m.transactionType, m.key_list, m.tagsCode)
        elif r.status is RecordStatus.END_OF_FILE:
            assert r.size == 0
        elif r.status is RecordStatus.INVALID:
            assert r.size == -1 and r.message is None
        else:
            assert r.size > 0 and r.message is None
    run()


def t_scan(st, given, settings):
    """The bulk recovery walk (record_scan.run_of_messages) against its oracle, check_record:
    every record it vouches for must be a MESSAGE for check_record, at the same positions."""
    from engine import record_scan
    from engine.message import DecodeOptions, RecordStatus, check_record
    recs = sample_records(random.Random(11), 32)
    opts_all = [DecodeOptions(), DecodeOptions(check_crc=True), DecodeOptions(accept_v2=False)]

    @st.composite
    def logs(draw):
        parts = draw(st.lists(st.sampled_from(recs), min_size=1, max_size=12))
        buf = bytearray(b"".join(parts))
        for _ in range(draw(st.integers(0, 5))):
            i = draw(st.integers(0, len(buf) - 1))
            op = draw(st.integers(0, 3))
            if op == 0:
                buf[i] ^= 1 << draw(st.integers(0, 7))
            elif op == 1:
                v = draw(st.sampled_from([0, -1, 1, 8, 72, 91, 2 ** 31 - 1, -875286124, -626843481, -626843477]))
                buf[i:i + 4] = struct.pack(">i", v)[:len(buf[i:i + 4])]
            elif op == 2:
                n = draw(st.integers(1, 64))
                buf[i:i + n] = bytes(len(buf[i:i + n]))
            else:
                buf[i:i + 2] = struct.pack(">h", draw(st.sampled_from([-1, 0, 1, 127, 128, 32767])))[:len(buf[i:i + 2])]
        buf += bytes(draw(st.integers(0, 64)))
        limit = draw(st.integers(max(0, len(buf) - 40), len(buf)))
        return bytes(buf), limit

    @settings
    @given(logs(), st.sampled_from(range(len(opts_all))), st.integers(1, 40))
    @bounded
    def run(b, oi, max_records):
        buf, limit = b
        opts = opts_all[oi]
        if not record_scan.supports(opts):
            return
        n, last, nxt, clean = record_scan.run_of_messages(buf, 0, limit, opts, max_records)
        pos = 0
        for k in range(n):
            r = check_record(buf, pos, limit, pos, opts)
            assert r.status is RecordStatus.MESSAGE, (k, pos, r.status, r.reason)
            if k == n - 1:
                assert last == pos
            pos += r.size
        assert n == 0 or nxt == pos
    run()


def t_index(st, given, settings):
    """IndexFile over random headers, slots and entries (cycles, links out of range, forged
    counts): select, chain and chain_lengths end, stay bounded, agree with each other."""
    from engine.index_file import IndexFile
    from engine.javahash import index_key_hash
    tmp = Path(tempfile.mkdtemp(prefix="fz-index-"))
    keys = [f"T#k{i}" for i in range(6)]
    hashes = [index_key_hash(k) for k in keys]
    i32 = st.one_of(st.integers(-3, 40), st.sampled_from([2 ** 31 - 1, -2 ** 31, 255, 256, 257]))

    @st.composite
    def tables(draw):
        slots = draw(st.integers(1, 16))
        n = draw(st.integers(2, 48))
        header = struct.pack(">qqqqii", draw(st.sampled_from([0, 1, 1_700_000_000_000, 2 ** 62, -5])),
                             draw(st.integers(0, 2 ** 62)), 0, 0, draw(i32), draw(i32))
        slot_v = b"".join(struct.pack(">i", draw(i32)) for _ in range(slots))
        any_hash = st.one_of(st.sampled_from(hashes), st.integers(-2 ** 31, 2 ** 31 - 1))
        ents = b"".join(struct.pack(">iqii", draw(any_hash),
                                    draw(st.integers(-1, 2 ** 40)), draw(st.integers(-3, 2 ** 31 - 1)), draw(i32))
                        for _ in range(n))
        return slots, n, header + slot_v + ents

    @settings
    @given(tables(), st.sampled_from(keys), st.sampled_from([1, 64, 2 ** 63 - 1]),
           st.sampled_from([(0, 2 ** 63 - 1), (1_700_000_000_000, 1_800_000_000_000), (5, 4)]))
    @bounded
    def run(table, key, max_num, window):
        slots, n, data = table
        p = tmp / "20260101000000000"
        p.write_bytes(data)
        f = IndexFile(p, slots, n)
        try:
            out: list[int] = []
            f.select(key, max_num, window[0], window[1], out)
            assert len(out) <= min(max_num, n)
            lengths = f.chain_lengths()
            for s in range(slots):
                chain = f.chain(s)
                assert len(chain) <= n
                assert int(lengths[s]) == len(chain), (s, int(lengths[s]), [c.index for c in chain])
        finally:
            f.close()
    try:
        run()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def t_cq(st, given, settings):
    """ConsumeQueue units pointing anywhere, in a real store: a full browsing session raises
    nothing but typed errors."""
    from engine import MessageStore
    from relsupport import Tolerant, browse, build_store
    tmp = Path(tempfile.mkdtemp(prefix="fz-cq-"))
    base = build_store(tmp / "base", n=120, seed=3, mappedFileSizeConsumeQueue=200)
    with MessageStore.open(base) as s:
        offs = [m.commitLogOffset for m in s.iter_messages()]
        sizes = [m.storeSize for m in s.iter_messages()]
        end = s.max_offset
    qdirs = [d for t in (base / "consumequeue").iterdir() for d in t.iterdir()]
    unit = st.one_of(
        st.tuples(st.sampled_from(offs), st.sampled_from(sizes), st.integers(-2, 2 ** 40)),  # real offsets, odd sizes
        st.tuples(st.integers(-2 ** 63, 2 ** 63 - 1), st.integers(-2 ** 31, 2 ** 31 - 1),
                  st.integers(-2 ** 63, 2 ** 63 - 1)),
        st.tuples(st.sampled_from([0, 1, end - 1, end, end + 1, 65535, 65536 - 10]),
                  st.sampled_from([0, 1, 20, 91, 2 ** 31 - 1]), st.just(0)),
        st.just((0, 2 ** 31 - 1, 0)))                                                               # filler

    @settings
    @given(st.sampled_from(range(len(qdirs))), st.lists(st.lists(unit, max_size=10), min_size=1, max_size=4),
           st.booleans(), st.integers(0, 2 ** 32))
    @bounded
    def run(qi, files, drop_first, rs):
        root = tmp / "case"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(base, root)
        q = root / qdirs[qi].relative_to(base)
        shutil.rmtree(q)
        q.mkdir()
        for k, units in enumerate(files):
            if drop_first and k == 0 and len(files) > 1:
                continue
            raw = b"".join(struct.pack(">qiq", *u) for u in units).ljust(200, b"\0")
            (q / f"{k * 200:020d}").write_bytes(raw)
        store = typed_only(MessageStore.open, root)
        if store is None:
            return
        with store:
            browse(store, random.Random(rs), deep=False, guard=Tolerant())
    try:
        run()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def t_config(st, given, settings):
    """The fastjson config parser: random text never raises; fastjson rendered by to_fastjson
    round-trips; load_config_json on random bytes is a dict, None or CorruptDataError."""
    from engine.config_json import consumer_offsets, fastjson_to_json, load_config_json, to_fastjson
    from engine.errors import CorruptDataError
    tmp = Path(tempfile.mkdtemp(prefix="fz-json-"))
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 63, 2 ** 63), st.text(max_size=12),
                        st.floats(allow_nan=False, allow_infinity=False))
    values = st.recursive(scalars, lambda c: st.one_of(
        st.lists(c, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=8), st.integers(-5, 10 ** 6)), c, max_size=4)), max_leaves=20)

    def norm(o):
        if isinstance(o, dict):
            return {str(k): norm(v) for k, v in o.items()}
        if isinstance(o, list):
            return [norm(v) for v in o]
        return o

    @settings
    @given(values, st.text(max_size=200), st.binary(max_size=300))
    @bounded
    def run(obj, text, raw):
        fastjson_to_json(text)
        if isinstance(obj, dict):
            # keys that look like ints come back as str keys either way
            keys = [str(k) for k in obj]
            if len(set(keys)) == len(keys):
                assert json.loads(fastjson_to_json(to_fastjson(obj))) == norm(obj)
        (tmp / "x.json").write_bytes(raw if raw.strip() else b"{" + raw)
        try:
            data = load_config_json(tmp, "x.json")
            assert data is None or isinstance(data, dict)
            consumer_offsets(data)
        except CorruptDataError as e:
            assert e.path
        consumer_offsets(obj if isinstance(obj, dict) else {"offsetTable": obj})
    try:
        run()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def t_props(st, given, settings):
    """Property strings: parse never raises; serialize -> parse round-trips what RocketMQ keeps."""
    from engine.properties import parse_properties, serialize_properties
    name = st.text(min_size=1, max_size=8).filter(lambda s: "\x01" not in s and "\x02" not in s)
    value = st.text(min_size=1, max_size=12).filter(lambda s: "\x02" not in s)

    @settings
    @given(st.dictionaries(name, value, max_size=6), st.text(max_size=120), st.booleans())
    @bounded
    def run(props, junk, trailing):
        parse_properties(junk)
        assert parse_properties(serialize_properties(props, trailing)) == props
    run()


def t_ids(st, given, settings):
    """Message ids from a user: lookups answer or say 'unknown', never raise."""
    from engine import MessageStore
    from relsupport import build_store
    tmp = Path(tempfile.mkdtemp(prefix="fz-id-"))
    root = build_store(tmp / "s", n=60, seed=5)
    store = MessageStore.open(root)
    ids = [m.msgId for m in store.iter_messages()][:10] + [m.uniqKey for m in store.iter_messages() if m.uniqKey][:10]

    @settings
    @given(st.one_of(st.text(max_size=70), st.text(alphabet="0123456789abcdefABCDEF", min_size=30, max_size=58),
                     st.sampled_from(ids)))
    @bounded
    def run(s):
        kind, msgs = store.lookup_id(s)
        assert kind in ("offset", "uniq", "unknown")
    try:
        run()
    finally:
        store.close()
        shutil.rmtree(tmp, ignore_errors=True)


TARGETS = {"record": t_record, "scan": t_scan, "index": t_index, "cq": t_cq, "config": t_config,
           "props": t_props, "ids": t_ids}


def atheris_record(runs: int, seed: int = 0) -> None:
    import atheris
    with atheris.instrument_imports():
        from engine import record_scan
        from engine.message import DecodeOptions, RecordStatus, check_record
    opts = [DecodeOptions(), DecodeOptions(check_crc=True), DecodeOptions(check_crc=True, force_verify_prop_crc=True)]
    seeds = sample_records(random.Random(3), 16)

    def one(data: bytes):
        if len(data) < 2:
            return
        o = opts[data[0] % 3]
        buf = (seeds[data[1] % len(seeds)] + data[2:]) if data[0] & 0x80 else data[2:]
        r = check_record(buf, 0, len(buf), 0, o)
        if r.status is RecordStatus.MESSAGE:
            assert 0 < r.size <= len(buf)
        if record_scan.supports(o):
            n, last, nxt, clean = record_scan.run_of_messages(buf, 0, len(buf), o, 8)
            pos = 0
            for _ in range(n):
                rr = check_record(buf, pos, len(buf), pos, o)
                assert rr.status is RecordStatus.MESSAGE
                pos += rr.size
    # libFuzzer's RSS limit reads getrusage's peak, and Linux carries a process's peak RSS
    # across execve -- a child spawned (vfork) by a big pytest process starts "using" the
    # parent's RSS (seen: 5.9 GB at INITED after the GUI and index tests, an instant OOM
    # report). The limit is 2 GB on top of what the process started with.
    inherited_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    atheris.Setup([sys.argv[0], f"-runs={runs}", f"-seed={seed}", "-max_len=2048",
                   f"-rss_limit_mb={inherited_mb + 2048}", "-timeout=5"], one)
    atheris.Fuzz()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("target", choices=list(TARGETS) + ["atheris-record"])
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--mem-mb", type=int, default=1024, help="address space allowed beyond the start-up size")
    a = ap.parse_args()
    if a.target == "atheris-record":
        atheris_record(a.runs, a.seed)
        return 0
    from hypothesis import HealthCheck, given, seed, settings, strategies as st
    with open("/proc/self/statm") as fh:
        vm = int(fh.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (vm + a.mem_mb * (1 << 20), resource.RLIM_INFINITY))
    TIMEOUT[0] = a.timeout
    conf = settings(max_examples=a.examples, deadline=None, database=None, derandomize=False,
                    suppress_health_check=list(HealthCheck), print_blob=True)

    def configured(fn):
        return seed(a.seed)(conf(fn))
    t0 = time.monotonic()
    TARGETS[a.target](st, given, configured)
    print(json.dumps({"target": a.target, "examples": COUNT[0], "seconds": round(time.monotonic() - t0, 2),
                      "seed": a.seed}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
