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
    from engine.format.message import MessageDraft, encode_record
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
    from engine.format.message import DecodeOptions, RecordResult, RecordStatus, check_record
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
    from engine.store import record_scan
    from engine.format.message import DecodeOptions, RecordStatus, check_record
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
    from engine.analysis.chains import chain_lengths
    from engine.store.index_file import IndexFile
    from engine.format.javahash import index_key_hash
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
            lengths = chain_lengths(f)
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
    from engine.format.config_json import consumer_offsets, fastjson_to_json, load_config_json, to_fastjson
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
    from engine.format.properties import parse_properties, serialize_properties
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


# ---- verdicts: does `check` notice damage a reader would see? -------------------------------------
# The record layout (IPv4 hosts; IPv6 hosts shift the fields after them by 12 / 24 bytes)
_FIELDS_V4 = [(0, "TOTALSIZE"), (4, "MAGICCODE"), (8, "BODYCRC"), (12, "QUEUEID"), (16, "FLAG"), (20, "QUEUEOFFSET"),
              (28, "PHYSICALOFFSET"), (36, "SYSFLAG"), (40, "BORNTIMESTAMP"), (48, "BORNHOST"),
              (56, "STORETIMESTAMP"), (64, "STOREHOST"), (72, "RECONSUMETIMES"), (76, "PREPAREDTRANSACTIONOFFSET"),
              (84, "BODYLENGTH"), (88, "BODY")]
# fields a 4.9 record (no __CRC32#) keeps nowhere else: damage there is invisible to any check by design
FORMAT_BLIND = {"FLAG", "BORNTIMESTAMP", "BORNHOST", "STOREHOST", "RECONSUMETIMES", "PREPAREDTRANSACTIONOFFSET",
                "STORETIMESTAMP"}
INDEXED_PROPS = {"KEYS", "UNIQ_KEY", "TAGS", "DELAY", "__CRC32#"}


def record_field(msg, rel_pos: int) -> str:
    """Which field of a record (Message) byte rel_pos (0 = TOTALSIZE) belongs to."""
    born6, store6 = bool(msg.sysFlag & 0x10), bool(msg.sysFlag & 0x20)
    shift = lambda off: off + (12 if born6 and off > 48 else 0) + (12 if store6 and off > 64 else 0)  # noqa: E731
    fields = [(shift(o), n) for o, n in _FIELDS_V4]
    body_at = fields[-1][0]
    if rel_pos < body_at:
        return ([n for o, n in fields if o <= rel_pos] or [fields[0][1]])[-1]  # before the record: its first field
    body_end = body_at + len(msg.body)
    if rel_pos < body_end:
        return "BODY"
    tl = 2 if msg.magicCode == -626843477 else 1
    if rel_pos < body_end + tl:
        return "TOPICLENGTH"
    topic_end = body_end + tl + len(msg.topic.encode())
    if rel_pos < topic_end:
        return "TOPIC"
    if rel_pos < topic_end + 2:
        return "PROPERTIESLENGTH"
    raw = msg.propertiesRaw.encode()
    at = rel_pos - topic_end - 2
    start = 0
    for part in raw.split(b"\x02"):
        if at <= start + len(part):
            return "PROP:" + part.split(b"\x01")[0].decode(errors="replace")
        start += len(part) + 1
    return "PROPERTIES"


def store_answers(store, keys=None) -> dict:
    """What a reader gets: the recovered ends, every CQ unit, every message by queue offset,
    and (for the (topic, key) pairs given, None = none) every exact key query."""
    import zlib as _z
    cl = store.commitlog
    out = {"ends": (cl.min_offset, cl.max_offset), "queues": {}, "units": {}, "msgs": {}, "keys": {}}
    for (topic, qid), cq in sorted(store.queues.items()):
        out["queues"][(topic, qid)] = (cq.min_offset, cq.max_offset)
        out["units"][(topic, qid)] = tuple(map(tuple, cq.units(cq.min_offset, cq.max_offset).tolist())) \
            if cq.max_offset > cq.min_offset else ()
        got, off, n = [], cq.min_offset, 0
        while off < cq.max_offset and n < 100_000:
            r = store.get_message(topic, qid, off, 64)
            got.append((off, r.status, tuple(r.skipped)))
            for m in r.messages:
                got.append((m.queueOffset, m.commitLogOffset, m.storeSize, m.topic, m.queueId, m.bodyCRC,
                            _z.crc32(m.body), m.propertiesRaw, m.storeTimestamp, m.bornTimestamp, m.flag,
                            m.sysFlag, m.bornHost, m.storeHost, m.reconsumeTimes, m.preparedTransactionOffset))
            off = max(r.nextBeginOffset, off + 1)
            n += 1
        out["msgs"][(topic, qid)] = got
    for topic, key in sorted(keys or ()):
        out["keys"][(topic, key)] = tuple(sorted(m.commitLogOffset for m in
                                                 store.query_message(topic, key, max_num=0).messages))
    return out


class VerdictBase:
    """One fixture copy, its answers and where its readable bytes are."""

    def __init__(self, root: Path):
        from engine import MessageStore
        from engine.format.javahash import index_key, index_key_hash
        self.root = root
        with MessageStore.open(root, read_only=True, tolerant=True) as s:
            keys = set()
            self.records = []   # (offset, size, msg)
            for m in s.iter_messages():
                self.records.append((m.commitLogOffset, m.storeSize, m))
                for k in m.key_list + ([m.uniqKey] if m.uniqKey else []):
                    keys.add((m.topic, k))
            self.keys = keys
            self.hashes = {tk: index_key_hash(index_key(*tk)) for tk in keys}
            self.answers = store_answers(s, keys)
            self.cl_size = s.cfg.mappedFileSizeCommitLog
            self.queues = {k: (cq.min_offset, cq.max_offset, cq.file_size) for k, cq in s.queues.items()
                           if cq.max_offset > cq.min_offset}
            self.index = [(f.path.name, f.slot_num, f.header.indexCount) for f in s.index.files]
            from engine.analysis.check import check_store
            self.ok = check_store(s)["ok"]

    def keys_in_slots(self, slot_num: int, slots: set) -> set:
        return {tk for tk, h in self.hashes.items() if h % slot_num in slots}


def pick_damage(base: VerdictBase, rng: random.Random) -> dict:
    """A damage to bytes a reader uses: a record, a CQ unit, an index header/slot/entry, the
    checkpoint; or a whole CQ/index file truncated or deleted."""
    r = rng.random()
    if r < 0.45:
        off, size, m = rng.choice(base.records)
        pos = off + rng.randrange(size)
        return {"file": f"commitlog/{off - off % base.cl_size:020d}", "pos": pos % base.cl_size, "kind": "commitlog",
                "record": off}
    if r < 0.68:
        (topic, qid), (mn, mx, fsize) = rng.choice(sorted(base.queues.items()))
        if rng.random() < 0.04:
            u = rng.randrange(mn, mx)
            return {"file": f"consumequeue/{topic}/{qid}/{u * 20 - u * 20 % fsize:020d}", "kind": "cq",
                    "op": rng.choice(["delete", "truncate"])}
        u = rng.randrange(mn, mx)
        return {"file": f"consumequeue/{topic}/{qid}/{u * 20 - u * 20 % fsize:020d}", "pos": u * 20 % fsize + rng.randrange(20),
                "kind": "cq"}
    if r < 0.95 and base.index:
        name, slots, count = rng.choice(base.index)
        d = {"file": f"index/{name}", "kind": "index", "slots": slots}
        w = rng.random()
        if w < 0.04:
            d["op"] = rng.choice(["delete", "truncate"])
        elif w < 0.10:
            d["pos"] = rng.randrange(40)
        elif w < 0.40:
            d["pos"] = 40 + rng.randrange(slots * 4)
        else:
            d["pos"] = 40 + slots * 4 + 20 * rng.randrange(1, max(2, count)) + rng.randrange(20)
        return d
    w = rng.random()   # (a draw of its own: the classes above keep their seeds)
    if w < 0.3:
        return {"file": "checkpoint", "pos": rng.randrange(24), "kind": "checkpoint"}
    if w < 0.7:
        return pick_file_damage(base, rng)
    off, size, m = rng.choice(base.records)
    return {"file": f"commitlog/{off - off % base.cl_size:020d}", "pos": off % base.cl_size + 36, "kind": "commitlog",
            "record": off, "op": "sysflag", "set": rng.choice(MEANINGFUL_SYSFLAGS)}


# SYSFLAG values a reader acts on: compressed (and its codec), the transaction type
MEANINGFUL_SYSFLAGS = [0x1, 0x101, 0x201, 0x301, 0x4, 0x8, 0xC, 0x0]


def pick_file_damage(base: VerdictBase, rng: random.Random) -> dict:
    """A whole file of a kind (commitlog, a queue's CQ, index), its oldest, newest or any:
    deleted, or one of its 4 KiB pages zeroed."""
    kind = rng.choice(["commitlog", "cq", "index"])
    if kind == "commitlog":
        files = sorted(p.name for p in (base.root / "commitlog").iterdir())
        folder = "commitlog"
    elif kind == "cq":
        (topic, qid) = rng.choice(sorted(base.queues))
        folder = f"consumequeue/{topic}/{qid}"
        files = sorted(p.name for p in (base.root / folder).iterdir())
    else:
        files = [name for name, _s, _c in base.index]
        folder = "index"
    which = rng.choice(["oldest", "newest", "any"])
    i = {"oldest": 0, "newest": len(files) - 1}.get(which, rng.randrange(len(files)))
    which = "oldest" if i == 0 else "newest" if i == len(files) - 1 else "middle"
    path = base.root / folder / files[i]
    d = {"file": f"{folder}/{files[i]}", "kind": kind, "which": which}
    used = _data_end(path)
    if rng.random() < 0.5 or used < 4096:
        d["op"] = "delete"
    else:
        d["op"] = "zeropage"
        d["page"] = rng.randrange(used // 4096) * 4096
    return d


def _data_end(path: Path) -> int:
    """Where a (sparse, zero-padded) data file's written bytes end, to the 4 KiB page."""
    data = path.read_bytes()
    end = len(data.rstrip(b"\0"))
    return -(-end // 4096) * 4096


def apply_damage(root: Path, d: dict, rng: random.Random) -> None:
    p = root / d["file"]
    op = d.get("op")
    if op == "delete":
        p.unlink()
        return
    if op == "zeropage":
        with open(p, "r+b") as fh:
            fh.seek(d["page"])
            fh.write(bytes(4096))
        return
    if op == "sysflag":
        with open(p, "r+b") as fh:
            fh.seek(d["pos"])
            old = int.from_bytes(fh.read(4), "big")
            d["sysFlagBefore"] = old
            fh.seek(d["pos"])
            fh.write(((old & ~0x70D) | d["set"]).to_bytes(4, "big"))
        return
    if op == "truncate":
        os_size = p.stat().st_size
        with open(p, "r+b") as fh:
            fh.truncate(os_size // 2)
        return
    data = bytearray(p.read_bytes())
    pos = d["pos"]
    kind = rng.random()
    if kind < 0.4:
        data[pos] ^= 1 << rng.randrange(8)
        d["op"] = "bitflip"
    elif kind < 0.65:
        data[pos] = (data[pos] + rng.randrange(1, 256)) % 256
        d["op"] = "byte"
    elif kind < 0.8:
        n = rng.randrange(1, 17)
        data[pos:pos + n] = bytes(len(data[pos:pos + n]))
        d["op"] = f"zero{n}"
    else:
        w = rng.choice([4, 8])
        a = pos - pos % w
        v = rng.choice([0, -1, 1, 2 ** 31 - 1, int.from_bytes(data[a:a + w], "big", signed=True) + rng.choice([-1, 1])])
        data[a:a + w] = v.to_bytes(w, "big", signed=True) if -(1 << (8 * w - 1)) <= v < (1 << (8 * w - 1)) else bytes(w)
        d["op"] = f"int{w}={v}"
    old = p.read_bytes()
    d["before"] = old[max(0, pos - 8):pos + 16].hex()
    diff = [i for i in range(max(0, pos - 8), min(len(data), pos + 17)) if data[i] != old[i]]
    if diff:  # classified by the first byte that really changed (integer writes are aligned)
        d["file_offset"] += diff[0] - pos
        d["pos"] = diff[0]
    p.write_bytes(bytes(data))
    d["after"] = bytes(data[max(0, pos - 8):pos + 16]).hex()
    d["changed_bytes"] = len(diff)


def _unknown_sysflag_bits(d: dict, field: str) -> bool:
    """A change only to SYSFLAG bits the format does not define (above 0x7FF): readers must
    preserve and ignore them (STORE_FORMAT 4.5), so no check can call the record damaged."""
    if field != "SYSFLAG" or d.get("changed_bytes") != 1:
        return False
    i = min(8, d["pos"])  # index of the changed byte in the before/after windows
    xor = bytes.fromhex(d["before"])[i] ^ bytes.fromhex(d["after"])[i]
    byte_in_field = d["file_offset"] - d["record"] - 36
    return 0 <= byte_in_field < 4 and (xor << (8 * (3 - byte_in_field))) & 0x7FF == 0


def classify(base: VerdictBase, d: dict) -> str:
    if "which" in d:
        # the oldest commitlog file deleted is what retention does (its index files and CQ
        # units then point below the min offset, which readers pass over): nothing to notice
        retention = d["kind"] == "commitlog" and d["op"] == "delete" and d["which"] == "oldest"
        return f"{d['kind']}:{d['op']}:{d['which']}" + (":retention-like" if retention else "")
    if d.get("op") == "sysflag":
        rec = next(m for o, _s, m in base.records if o == d["record"])
        before, after = d["sysFlagBefore"], (d["sysFlagBefore"] & ~0x70D) | d["set"]
        crc = "crc" if "__CRC32#" in rec.propertiesRaw else "nocrc"
        # NOT <-> COMMIT changes nothing a reader does with the record (both are dispatched)
        same = before & 0x701 == after & 0x701 and {before & 0xC, after & 0xC} <= {0x0, 0x8}
        return f"commitlog:SYSFLAG:{before & 0x70D:#x}->{after & 0x70D:#x}:{crc}" + \
            (":format-blind" if same and crc == "nocrc" else "")
    if d.get("op") in ("delete", "truncate"):
        return f"{d['kind']}:{d['op']}"
    if d["kind"] == "commitlog":
        rec = next(m for o, _s, m in base.records if o == d["record"])
        field = record_field(rec, d["file_offset"] - d["record"])
        crc = "crc" if "__CRC32#" in rec.propertiesRaw else "nocrc"
        # TAGS is checked through the CQ unit's tagsCode, except where the unit holds a delivery
        # time (SCHEDULE_TOPIC) or there is no unit (prepared / rolled-back transactions)
        tags_unchecked = field == "PROP:TAGS" and (rec.topic == "SCHEDULE_TOPIC_XXXX" or rec.sysFlag & 0x0C in (4, 12))
        blind = crc == "nocrc" and (field in FORMAT_BLIND or tags_unchecked or _unknown_sysflag_bits(d, field) or
                                    (field.startswith("PROP:") and field[5:] not in INDEXED_PROPS))
        return f"commitlog:{field}:{crc}" + (":format-blind" if blind else "")
    if d["kind"] == "cq":
        return "cq:" + (["phyOffset"] * 8 + ["size"] * 4 + ["tagsCode"] * 8)[d["pos"] % 20]
    if d["kind"] == "index":
        pos, slots = d["pos"], d["slots"]
        if pos < 40:
            names = ["beginTimestamp"] * 8 + ["endTimestamp"] * 8 + ["beginPhyOffset"] * 8 + ["endPhyOffset"] * 8 + \
                ["hashSlotCount"] * 4 + ["indexCount"] * 4
            return "index:header:" + names[pos]
        if pos < 40 + 4 * slots:
            return "index:slot"
        return "index:entry:" + (["keyHash"] * 4 + ["phyOffset"] * 8 + ["timeDiff"] * 4 + ["prevIndex"] * 4)[(pos - 40 - 4 * slots) % 20]
    return "checkpoint:" + ["physicMsgTimestamp", "logicsMsgTimestamp", "indexMsgTimestamp"][d["pos"] // 8]


def affected_keys(base: VerdictBase, d: dict, root: Path):
    """The (topic, key) pairs whose answers the damage could change, beyond what the ends,
    units and messages already show (None: all of them)."""
    if d["kind"] == "commitlog":
        rec = next(m for o, _s, m in base.records if o == d["record"])
        ks = {(rec.topic, k) for k in rec.key_list + ([rec.uniqKey] if rec.uniqKey else [])}
        return ks | {tk for tk in base.keys if tk[1] in ks or tk[0] == rec.topic and len(base.keys) < 400}
    if d["kind"] == "index":
        if d.get("op") or d["pos"] < 40:
            return None
        slots = d["slots"]
        pos = d["pos"]
        if pos < 40 + 4 * slots:
            return base.keys_in_slots(slots, {(pos - 40) // 4})
        import struct as _s
        e = (pos - 40 - 4 * slots) // 20
        at = 40 + 4 * slots + 20 * e
        raw = (root / d["file"]).read_bytes()
        new_hash = _s.unpack_from(">i", raw, at)[0]
        old = bytes.fromhex(d["before"])
        start = max(0, pos - 8)
        old_full = bytearray(raw)
        old_full[start:start + len(old)] = old
        old_hash = _s.unpack_from(">i", old_full, at)[0]
        return base.keys_in_slots(slots, {abs(new_hash) % slots, abs(old_hash) % slots, new_hash % slots,
                                          old_hash % slots})
    return set()


def verdict_case(base: VerdictBase, work: Path, rng: random.Random) -> dict:
    """Damage one copy of base, ask check and the reader; restore the copy."""
    from engine import MessageStore
    from engine.analysis.check import check_store
    from engine.errors import StoreError
    d = pick_damage(base, rng)
    target = work / d["file"]
    saved = target.read_bytes()
    if "pos" in d:
        d["file_offset"] = d["pos"] + (int(target.name) if d["kind"] == "commitlog" else 0)
    try:
        apply_damage(work, d, rng)
        out = {"damage": {k: v for k, v in d.items() if k != "slots"}, "class": classify(base, d)}
        try:
            with MessageStore.open(work, read_only=True, tolerant=True) as s:
                rep = check_store(s)
                out["check_ok"] = rep["ok"]
                out["kinds"] = sorted({p["kind"] for p in rep["problems"]})
                try:
                    ans = store_answers(s, None)
                    changed = [k for k in ("ends", "queues", "units", "msgs") if ans[k] != base.answers[k]]
                    if not changed:
                        ks = affected_keys(base, d, work)
                        ks = base.keys if ks is None else ks & base.keys
                        for tk in ks:
                            got = tuple(sorted(m.commitLogOffset for m in s.query_message(*tk, max_num=0).messages))
                            if got != base.answers["keys"][tk]:
                                changed.append(f"key {tk[0]}#{tk[1]}")
                                break
                except StoreError as e:
                    changed = [f"reader error: {type(e).__name__}"]
        except StoreError as e:
            out["check_ok"] = False
            out["kinds"] = [f"refused: {type(e).__name__}"]
            changed = ["store refused"]
        out["changed"] = changed
        out["false_ok"] = bool(out["check_ok"] and changed)
        return out
    finally:
        target.write_bytes(saved)


def verdicts(stores: list[str], cases: int, seed: int, work_dir: str | None = None) -> dict:
    """cases damaged copies over the stores; counts and every false OK (check says OK, an
    answer changed)."""
    import subprocess as sp
    tmp = Path(work_dir or tempfile.mkdtemp(prefix="fz-verdict-"))
    rng = random.Random(seed)
    bases = []
    for st in stores:
        dst = tmp / Path(st).name
        shutil.rmtree(dst, ignore_errors=True)
        sp.run(["cp", "-a", "--sparse=always", st, str(dst)], check=True)
        b = VerdictBase(dst)
        if b.ok:
            bases.append(b)
    counts = {"cases": 0, "visible": 0, "checkNotOk": 0, "falseOk": 0, "falseOkFormatBlind": 0, "noisy": 0}
    classes: dict[str, int] = {}
    examples: dict[str, dict] = {}
    t0 = time.monotonic()
    try:
        for i in range(cases):
            b = bases[i % len(bases)]
            case_seed = rng.getrandbits(48)
            r = verdict_case(b, b.root, random.Random(case_seed))
            COUNT[0] += 1
            counts["cases"] += 1
            counts["visible"] += bool(r["changed"])
            counts["checkNotOk"] += not r["check_ok"]
            counts["noisy"] += (not r["check_ok"]) and not r["changed"]
            if r["false_ok"]:
                blind = r["class"].endswith((":format-blind", ":retention-like"))
                counts["falseOkFormatBlind" if blind else "falseOk"] += 1
                classes[r["class"]] = classes.get(r["class"], 0) + 1
                examples.setdefault(r["class"], {"store": b.root.name, "caseSeed": case_seed, **r["damage"],
                                                 "changed": r["changed"][:3]})
    finally:
        if work_dir is None:
            shutil.rmtree(tmp, ignore_errors=True)
    return {"counts": counts, "falseOkClasses": classes, "examples": examples,
            "seconds": round(time.monotonic() - t0, 1)}


TARGETS = {"record": t_record, "scan": t_scan, "index": t_index, "cq": t_cq, "config": t_config,
           "props": t_props, "ids": t_ids}


def atheris_record(runs: int, seed: int = 0) -> None:
    import atheris
    with atheris.instrument_imports():
        from engine.store import record_scan
        from engine.format.message import DecodeOptions, RecordStatus, check_record
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
    ap.add_argument("target", choices=list(TARGETS) + ["atheris-record", "verdict"])
    ap.add_argument("--stores", nargs="*", default=[], help="verdict: clean stores to damage (copied first)")
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--mem-mb", type=int, default=1024, help="address space allowed beyond the start-up size")
    a = ap.parse_args()
    if a.target == "atheris-record":
        atheris_record(a.runs, a.seed)
        return 0
    if a.target == "verdict":
        print(json.dumps(verdicts(a.stores, a.cases, a.seed), default=str))
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
