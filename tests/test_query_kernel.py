"""Key queries: the compiled walker (engine/accel/_query.pyx) against the Python reference
(IndexService.query_offset(accel=False) over IndexFile.select), answer for answer: on every
conformance store's keys with several time windows and caps, on a store written here whose
small index rolls over several files while it is queried, and on damaged copies (cycles,
forward links, links and slots out of range). The batched API equals one call per key.

Run compiled and with RMQSTORE_PURE_PYTHON=1 (the Makefile's TWIN_TESTS): with the compiled
module off, both sides are the reference and the RocketMQ answers still hold."""
from __future__ import annotations

import struct

import pytest

from conftest import CLEAN, CRASHED, manifest, unpack
from engine import MessageStore, StoreConfig, accel
from engine.format.javahash import index_key, index_key_hash, java_hash
from engine.store.index_file import LONG_MAX

KERNEL = accel.load("_query")
SMALL = dict(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=7, maxIndexNum=40)


def windows(store) -> list[tuple[int, int]]:
    """Time windows around the store's index files: all, none, each file's range, halves."""
    out = [(0, LONG_MAX), (LONG_MAX - 1, LONG_MAX), (0, 0)]
    for f in store.index.files:
        b, e = f.header.beginTimestamp, f.header.endTimestamp
        out += [(b, e), (b + 1000, e), (b, (b + e) // 2), ((b + e) // 2, LONG_MAX), (e, e)]
    return out


def both(store, topic, key, max_num, begin, end):
    idx = store.index
    fast = idx.query_offset(topic, key, max_num, begin, end, cap=0)
    ref = idx.query_offset(topic, key, max_num, begin, end, cap=0, accel=False)
    assert fast == ref, (topic, key, max_num, begin, end)
    return ref


def all_pairs(name):
    return [(t, k) for t, k, _src, _exp in manifest(name)["key_queries"]["all_pairs"]]


@pytest.mark.parametrize("name", CLEAN + CRASHED)
def test_compiled_walk_equals_reference_on_real_stores(name):
    pairs = all_pairs(name)[:400]
    with MessageStore.open(unpack(name)) as store:
        ws = windows(store)
        for i, (topic, key) in enumerate(pairs):
            for max_num in (1, 3, 64):
                both(store, topic, key, max_num, *ws[i % len(ws)])
            both(store, topic, key + "-absent", 64, 0, LONG_MAX)
        by_topic: dict[str, list[str]] = {}
        for topic, key in pairs:
            by_topic.setdefault(topic, []).append(key)
        for topic, keys in by_topic.items():
            batch = store.index.query_offsets(topic, keys, 64, 0, LONG_MAX, cap=0)
            assert batch == [store.index.query_offset(topic, k, 64, 0, LONG_MAX, cap=0, accel=False)[0]
                             for k in keys]


def _int_min_key(topic: str) -> str:
    """A key whose "topic#key" has String.hashCode == Integer.MIN_VALUE (indexKeyHash 0)."""
    target = 0x80000000
    for n in range(100000):
        prefix = f"k{n}"
        h = java_hash(index_key(topic, prefix)) & 0xFFFFFFFF
        rest = (target - h * 31 ** 3) & 0xFFFFFFFF   # = c1 * 961 + c2 * 31 + c3
        c1, r = divmod(rest, 961)
        if 0x20 <= c1 < 0xD800:
            return prefix + chr(c1) + chr(r // 31) + chr(r % 31)
    raise AssertionError("no key found")


@pytest.mark.skipif(KERNEL is None, reason="compiled module not built or turned off")
def test_key_hash_is_javas_over_utf16_units():
    keys = ["", "a", "order-1001", "订单-42", "emoji-\U0001F600-x", "\U00010400\U0001F4A9", "lone-\ud800-s",
            "x" * 3000, _int_min_key("T")]
    for key in keys:
        assert KERNEL.key_hash("T", key) == index_key_hash(index_key("T", key)), key
    assert KERNEL.key_hash("T", keys[-1]) == 0


def _write(store, n: int, t0: int = 0):
    """n messages over 3 topics, shared and per-message keys, some keys CJK / non-BMP."""
    out = []
    for i in range(n):
        keys = [f"k{i}", f"shared{i % 5}", "订单" if i % 7 == 0 else "e\U0001F600" if i % 11 == 0 else f"z{i % 3}"]
        out.append(store.put_message(f"T{i % 3}", b"b%d" % i, tags="A", keys=keys))
    return out


def test_queries_follow_a_writer_across_index_rolls(tmp_path):
    """40-entry index files roll every 13 messages (3 keys + UNIQ_KEY): queries between puts
    see every new entry and every new file, compiled and reference alike."""
    cfg = StoreConfig.from_mapping({**SMALL})
    with MessageStore.create(tmp_path / "s", cfg) as store:
        for step in range(6):
            _write(store, 17)
            for t in range(3):
                for key in ["shared0", "shared4", "订单", "e\U0001F600", "z1", "k3", "k100", "none"]:
                    for w in windows(store)[:6]:
                        both(store, f"T{t}", key, 64, *w)
        assert len(store.index.files) > 4
        hits = both(store, "T0", "shared0", 64, 0, LONG_MAX)[0]
        assert hits, "shared keys are found"


def _damage(path, slot_num: int, edits) -> None:
    """Write (entry number, field, value) edits into an index file."""
    base = 40 + 4 * slot_num
    field = {"prev": (16, ">i"), "diff": (12, ">i"), "hash": (0, ">i"), "slot": (None, ">i")}
    with open(path, "r+b") as fh:
        for n, name, value in edits:
            off, fmt = field[name]
            fh.seek(40 + 4 * n if name == "slot" else base + 20 * n + off)
            fh.write(struct.pack(fmt, value))


def test_damaged_chains_end_the_same_way(tmp_path):
    cfg = StoreConfig.from_mapping({**SMALL, "maxIndexNum": 200})
    with MessageStore.create(tmp_path / "s", cfg) as store:
        _write(store, 40)
    files = sorted((tmp_path / "s" / "index").iterdir())
    edits = [(30, "prev", 60), (40, "prev", 30), (50, "prev", 50), (20, "prev", 5000), (25, "prev", -3),
             (12, "diff", -1), (3, "slot", 150), (4, "slot", -7), (5, "slot", 1_000_000), (33, "hash", 0)]
    _damage(files[-1], 7, edits)
    with MessageStore.open(tmp_path / "s") as store:
        for t in range(3):
            for i in range(40):
                for key in (f"k{i}", f"shared{i % 5}", f"z{i % 3}"):
                    both(store, f"T{t}", key, 64, 0, LONG_MAX)
                    both(store, f"T{t}", key, 2, 0, LONG_MAX)


def test_batch_api_caps_like_single_queries(tmp_path):
    cfg = StoreConfig.from_mapping({**SMALL, "maxIndexNum": 400})
    with MessageStore.create(tmp_path / "s", cfg) as store:
        _write(store, 60)
        idx = store.index
        keys = ["shared1", "shared2", "k5", "none", "z0"]
        for cap in (None, 0, 2):
            got = idx.query_offsets("T1", keys, 64, 0, LONG_MAX, cap=cap)
            assert got == [idx.query_offset("T1", k, 64, 0, LONG_MAX, cap=cap, accel=False)[0] for k in keys]
        assert max(len(g) for g in idx.query_offsets("T1", keys, 64, 0, LONG_MAX, cap=2)) == 2


def test_the_compiled_front_falls_back_for_what_it_does_not_take(tmp_path):
    """IndexService.query_offset answers in C only for the common case; times beyond int64,
    keyword calls, the default cap, a reload that replaced the file list and accel=False all
    answer as the reference does."""
    with MessageStore.create(tmp_path / "s", StoreConfig(**SMALL)) as store:
        for i in range(120):
            store.put_message("FrontTopic", b"x", queue_id=0, keys=f"key{i % 9}")
        idx = store.index
        ref = idx.query_offset("FrontTopic", "key3", 64, 0, LONG_MAX, cap=0, accel=False)
        assert ref[0]
        assert idx.query_offset("FrontTopic", "key3", 64, 0, LONG_MAX, cap=0) == ref
        assert idx.query_offset("FrontTopic", "key3", 64, begin=-(2 ** 70), end=2 ** 70, cap=0) == ref
        assert idx.query_offset(topic="FrontTopic", key="key3", max_num=64, cap=0) == ref
        capped = idx.query_offset("FrontTopic", "key3", 64)   # cap: maxMsgsNumBatch
        assert capped == idx.query_offset("FrontTopic", "key3", 64, accel=False)
        assert capped[0] == ref[0][:store.cfg.maxMsgsNumBatch]
        idx.files = list(idx.files)   # another list object: the walker is rebuilt, same answer
        assert idx.query_offset("FrontTopic", "key3", 64, 0, LONG_MAX, cap=0) == ref




def test_key_hash_fast_paths_and_the_topic_cache():
    """The 1-byte-string loop, the per-kind loop and the cached "topic#" prefix give Java's
    hash for every mix of string kinds, topics interleaved so the cache switches each call."""
    if KERNEL is None:
        pytest.skip("compiled module not built or turned off")
    import random
    rnd = random.Random(7)
    alphabet = ["a", "Z", "0", "#", "\x00", "\x7f", "\x80", "é", "ÿ", "Ā", "中", "\U0001F600", "\U0010FFFF"]
    topics = ["T", "TopicTest", "主题", "t\U0001F600", ""]
    for i in range(5000):
        topic = topics[i % len(topics)] if i % 3 else "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(6)))
        key = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(12)))
        assert KERNEL.key_hash(topic, key) == index_key_hash(index_key(topic, key)), (topic, key)


def reference_query(store, topic, key, begin=0, end=LONG_MAX, max_num=64, raw=False, cap=None):
    """Queries.query_message from the Python pieces: IndexService's own walk and get_message per
    hit for a raw answer (the exact answer is Python over the raw one's pieces)."""
    from engine.store.queries import QueryResult
    if not raw:
        return store._query_exact(topic, key, begin, end, max_num, cap)
    offs, lts, loff = store.index._query_offset_py(topic, key, max_num, begin, end, cap, accel=False)
    # queryMessage loads the hits sorted (queryOffset walks newest first)
    return QueryResult(store.commitlog._messages_at_py(sorted(offs)), False, offs, [], lts, loff)


def test_compiled_query_message_equals_the_reference(tmp_path):
    """Queries.query_message over the compiled walk and reads answers exactly as the Python
    pieces, raw and exact, over index rolls, caps, time windows, absent keys and max_num 0."""
    from engine.store.queries import QueryResult
    ref_fn = reference_query
    with MessageStore.create(tmp_path / "s", StoreConfig(**SMALL)) as store:
        _write(store, 150)
        ws = windows(store)
        for i, key in enumerate(["k3", "k149", "shared2", "订单", "e\U0001F600", "z1", "absent"]):
            for topic in ("T0", "T1", "T2", "Nope"):
                for max_num, cap in ((64, None), (3, None), (64, 0), (0, None), (5, 2)):
                    b, e = ws[(i + max_num) % len(ws)]
                    for raw in (True, False):
                        got = store.query_message(topic, key, b, e, max_num, raw=raw, cap=cap)
                        want = ref_fn(store, topic, key, b, e, max_num, raw, cap)
                        assert type(got) is QueryResult
                        assert got == want, (topic, key, max_num, cap, b, e, raw)
        got = store.query_message(topic="T1", key="shared1", raw=True)
        assert got.messages and got == ref_fn(store, "T1", "shared1", raw=True)
        assert {m.commitLogOffset for m in got.messages} <= set(got.offsets)
        # RocketMQ's order: queryOffset newest first, queryMessage's messages ascending
        walk = store.index.query_offset("T1", "shared1", 64)[0]
        assert len(walk) > 1 and walk == sorted(walk, reverse=True)
        assert got.offsets == walk and sorted(walk) == [m.commitLogOffset for m in got.messages]


@pytest.mark.parametrize("name", CLEAN + CRASHED)
def test_compiled_query_message_on_real_stores(name):
    """The compiled query_message front against the reference on stores the real RocketMQ
    wrote (crashed ones too): raw and exact, whole range and a window."""
    ref_fn = reference_query
    with MessageStore.open(unpack(name)) as store:
        ws = windows(store)
        for i, (topic, key) in enumerate(all_pairs(name)[:150]):
            b, e = ws[i % len(ws)]
            for raw in (True, False):
                for args in ((0, LONG_MAX, 64), (b, e, 3)):
                    assert store.query_message(topic, key, *args, raw=raw) == ref_fn(store, topic, key, *args, raw), \
                        (topic, key, args, raw)


def test_answers_are_independent(tmp_path):
    """Every query_offset answer is its own tuple: an answer kept stays what it was."""
    import gc
    with MessageStore.create(tmp_path / "s", StoreConfig(**SMALL)) as s:
        for i in range(6):
            s.put_message("T", b"x", keys=f"k{i % 3}")
        q = s.index.query_offset
        ref = {k: s.index._query_offset_py("T", k, 64, accel=False) for k in ("k0", "k1", "k2", "zz")}
        kept = q("T", "k0", 64)
        again = q("T", "k1", 64)
        assert kept is not again and kept == ref["k0"] and again == ref["k1"]
        for k in ("k2", "zz", "k0", "k1") * 3:
            got = q("T", k, 64)
            assert got == ref[k] and isinstance(got, tuple) and len(got) == 3
            del got
        assert kept == ref["k0"] and again == ref["k1"]
        gc.collect()
        assert q("T", "k2", 64) == ref["k2"]


def test_topic_or_key_not_a_str_answers_as_the_reference(tmp_path):
    """A topic or key that is not exactly a str (None, a str subclass) is answered by the Python
    reference, never hashed by the compiled walk (which would read None as the last topic)."""
    class Name(str):
        pass
    with MessageStore.create(tmp_path / "s", StoreConfig(**SMALL)) as s:
        s.put_message("T", b"x", keys="k")
        q = s.index.query_offset
        assert q("T", "k", 64)[0] == s.index._query_offset_py("T", "k", 64, accel=False)[0] != []
        assert q(Name("T"), Name("k"), 64) == s.index._query_offset_py("T", "k", 64, accel=False)
        assert q(None, "k", 64) == s.index._query_offset_py(None, "k", 64, accel=False)
        if accel.load("_query") is not None:
            from engine.accel._query import key_hash
            with pytest.raises(TypeError):
                key_hash(None, "k")
            with pytest.raises(TypeError):
                s.index.query_offsets("T", ["k", None], 64)
