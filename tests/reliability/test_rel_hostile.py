"""Hostile input: index chains with cycles and links out of range, ConsumeQueue units pointing
anywhere, absurd record lengths, giant properties, topic names that try to leave the store,
symlinks out of the store, non-UTF-8 bytes, bodies that are escape sequences or HTML, enormous
bodies. Every case ends in bounded time with typed errors only, and nothing outside the store
is created or changed."""
from __future__ import annotations

import json
import os
import random
import re
import shutil
import struct
from pathlib import Path

import pytest

from relsupport import (FIGURES, Tolerant, append_raw, assert_typed, browse, build_store, file_digest, memory_limit,
                        raw_record, run_cli, small_cfg, time_limit, tree_digest)

from engine import MessageStore
from engine.analysis.chains import chain_lengths
from engine.analysis.check import check_store
from engine.errors import MessageRejectedError, StoreError
from engine.format.javahash import index_key, index_key_hash

UNSAFE_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.fixture(scope="module")
def base_store(tmp_path_factory):
    return build_store(tmp_path_factory.mktemp("hostile") / "base", n=400, seed=21)


def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    return dst


def full_session(root: Path, what: str, rw: bool = True) -> Tolerant:
    """Read-only browse (typed errors only, nothing changed), then recovery and rebuild."""
    before = tree_digest(root)
    guard = Tolerant()
    with time_limit(60, what), memory_limit(1 << 30):
        try:
            with MessageStore.open(root) as s:
                browse(s, random.Random(0), guard=guard)
        except StoreError as e:
            assert_typed(e, what)
    assert tree_digest(root) == before, what
    if rw:
        from engine.cli.write import rebuild
        with time_limit(60, what):
            for step in (lambda: MessageStore.open(root, read_only=False).close(), lambda: rebuild(root, None)):
                try:
                    step()
                except StoreError as e:
                    assert_typed(e, what)
    return guard


# ---- topic names that try to leave the store -------------------------------------------------------
ESCAPING = [b"../escape1", b"../../escape2", b"a/../../escape3", b"..", b".", b"/tmp/escape4", b"x\\..\\escape5",
            b"nul\x00escape6", b"", b"\xe2\x80\xaeevil", b"\xff\xfe../escape7", b"consumequeue/../../escape8"]


def test_topic_names_never_leave_the_store(request, tmp_path, base_store):
    outer = tmp_path / "outer"
    root = copy(base_store, outer / "store")
    outside_before = sorted(p.name for p in outer.iterdir())
    recs = [raw_record(t, b"x", b"KEYS\x01k\x02UNIQ_KEY\x01U%d" % i, qid=q)
            for i, (t, q) in enumerate((t, q) for t in ESCAPING for q in (0, -1, 2 ** 31 - 1))]
    recs.append(raw_record(b"../" * 60 + b"deep", v2=True))  # V2, 240-byte topic
    append_raw(root, recs)
    full_session(root, "escaping topics")
    assert sorted(p.name for p in outer.iterdir()) == outside_before
    assert not list(tmp_path.rglob("escape*")) or all(str(p).startswith(str(root)) for p in tmp_path.rglob("escape*"))
    for d in (root / "consumequeue").iterdir():
        assert d.name not in ("..", ".", "") and "/" not in d.name
        assert d.resolve().parent == (root / "consumequeue").resolve()
    with MessageStore.open(root) as s:
        assert s.max_offset > 0 and check_store(s)["messages"] >= 400
    code, out, err = run_cli("rebuild", root, "--yes")
    assert code == 0 and "Traceback" not in err
    assert sorted(p.name for p in outer.iterdir()) == outside_before
    FIGURES.add(request, "hostile/topic-names", runs=1, faultsInjected=len(recs), messagesChecked=len(recs))


# ---- index tables -------------------------------------------------------------------------------------
def _index_cases(f_slots: int, f_n: int, key_hash: int):
    slot = key_hash % f_slots
    e = lambda n: 40 + 4 * f_slots + 20 * n  # noqa: E731
    cases = {}

    def case(name, header_count=None, links=(), slot_to=None, entries=()):
        cases[name] = (header_count, links, slot_to, entries)
    case("self-loop", links=[(5, 5)], slot_to=5, entries=[5])
    case("two-cycle", links=[(5, 9), (9, 5)], slot_to=5, entries=[5, 9])
    case("long-cycle", links=[(n, n + 1) for n in range(1, 60)] + [(60, 1)], slot_to=1, entries=range(1, 61))
    case("forged-count-cycle", header_count=2 ** 31 - 1, links=[(5, 9), (9, 5)], slot_to=5, entries=[5, 9])
    case("link-past-count", links=[(5, 2 ** 31 - 1)], slot_to=5, entries=[5])
    case("link-past-file", header_count=f_n + 100, links=[(5, f_n + 50)], slot_to=5, entries=[5])
    case("negative-link", links=[(5, -7)], slot_to=5, entries=[5])
    case("slot-past-file", header_count=2 ** 31 - 1, slot_to=f_n + 3)
    case("negative-count", header_count=-5, slot_to=5, entries=[5])
    return cases, slot, e


def test_index_chains_with_cycles_and_wild_links(request, tmp_path, base_store):
    cfg = small_cfg()
    key = "order-1"
    runs = 0
    with MessageStore.open(base_store) as s:
        topic = "TopicA"
        kh = index_key_hash(index_key(topic, key))
        idx_name = s.index.files[-1].name
        slots, n = s.index.files[-1].slot_num, s.index.files[-1].index_num
    cases, slot, e = _index_cases(slots, n, kh)
    for name, (count, links, slot_to, entries) in cases.items():
        root = copy(base_store, tmp_path / name)
        p = root / "index" / idx_name
        raw = bytearray(p.read_bytes())
        if count is not None:
            struct.pack_into(">i", raw, 36, count)
        if slot_to is not None:
            struct.pack_into(">i", raw, 40 + 4 * slot, slot_to)
        for en in entries:
            struct.pack_into(">i", raw, e(en), kh)        # every entry of the chain matches the key
            struct.pack_into(">i", raw, e(en) + 12, 0)    # time diff 0: inside any window
        for a, b in links:
            if 0 < a < n:
                struct.pack_into(">i", raw, e(a) + 16, b)
        p.write_bytes(bytes(raw))
        with time_limit(10, name), memory_limit(1 << 30):
            with MessageStore.open(root, cfg) as s:
                r = s.query_message(topic, key, max_num=0)
                raw_hits = s.query_message(topic, key, raw=True)
                assert len(raw_hits.offsets) <= 64
                offs = []
                s.index.files[-1].select(index_key(topic, key), 2 ** 63 - 1, 0, 2 ** 63 - 1, offs)
                assert len(offs) <= n, (name, len(offs))
                for f in s.index.files:
                    lengths = chain_lengths(f)
                    assert int(lengths.max(initial=0)) <= n
                    for sl in range(f.slot_num):
                        assert len(f.chain(sl)) <= n
                rep = check_store(s)
                if "cycle" in name:
                    assert any(pr["kind"].startswith("index") for pr in rep["problems"]), name
                assert all(m.topic == topic for m in r.messages)
        full_session(root, f"index {name}", rw=False)
        runs += 1
    FIGURES.add(request, "hostile/index-chains", runs=runs, faultsInjected=runs)


# ---- ConsumeQueue units pointing anywhere -------------------------------------------------------------
def test_cq_units_pointing_anywhere(request, tmp_path, base_store):
    with MessageStore.open(base_store) as s:
        end = s.max_offset
        offs = [m.commitLogOffset for m in s.iter_messages()]
    wild = [(-1, 100), (0, 0), (0, -5), (offs[3] + 1, 200), (offs[3], 1), (end - 10, 1), (end, 200),
            (end + 10 ** 6, 200),
            (2 ** 63 - 1, 2 ** 31 - 1), (-2 ** 63, 1), (65536 - 10, 2), (65536 - 1, 2 ** 31 - 1), (0, 2 ** 31 - 1)]
    root = copy(base_store, tmp_path / "s")
    q = root / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    raw = bytearray(q.read_bytes())
    for i, (phy, size) in enumerate(wild):
        struct.pack_into(">qiq", raw, 20 * (i + 1), phy, size, -1)
    q.write_bytes(bytes(raw))
    guard = full_session(root, "wild CQ units", rw=True)
    FIGURES.add(request, "hostile/cq-units", runs=1, faultsInjected=len(wild), typedErrorsInSession=len(guard.typed))


# ---- absurd record lengths -----------------------------------------------------------------------------
FORGED = {"total-max": dict(total=2 ** 31 - 1), "total-negative": dict(total=-1), "total-zero": dict(total=0),
          "total-tiny": dict(total=5), "total-short": dict(total=60), "total-long": dict(total=400),
          "body-max": dict(body_len=2 ** 31 - 1), "body-negative": dict(body_len=-5),
          "topic-negative": dict(topic_len=-1), "topic-long": dict(topic_len=127),
          "props-negative": dict(prop_len=-1), "props-max": dict(prop_len=32767)}


@pytest.mark.parametrize("where", ["tail", "middle"])
def test_absurd_record_lengths(request, tmp_path, base_store, where):
    for name, forged in FORGED.items():
        root = copy(base_store, tmp_path / f"{where}-{name}")
        bad = raw_record(b"TopicA", b"body" * 5, b"UNIQ_KEY\x01FORGED", **forged)
        if where == "tail":
            append_raw(root, [bad, raw_record(b"TopicA", b"after")])
        else:  # overwrite an early record of the first file (outside the recovery window)
            with MessageStore.open(root) as s:
                m = next(x for x in s.iter_messages() if x.commitLogOffset > 1000 and x.storeSize >= len(bad))
            p = root / "commitlog" / "00000000000000000000"
            data = bytearray(p.read_bytes())
            data[m.commitLogOffset:m.commitLogOffset + len(bad)] = bad
            p.write_bytes(bytes(data))
        full_session(root, f"{where} {name}")
    FIGURES.add(request, f"hostile/record-lengths-{where}", runs=len(FORGED), faultsInjected=len(FORGED))


# ---- giant properties, many keys, enormous bodies -------------------------------------------------------
def test_giant_properties_and_a_thousand_keys(tmp_path):
    root = tmp_path / "s"
    with MessageStore.create(root, small_cfg()) as s:
        big = {"p": "v" * 32000}
        r1 = s.put_message("T", b"x", queue_id=0, properties=big)
        with pytest.raises(MessageRejectedError):
            s.put_message("T", b"x", queue_id=0, properties={"p": "v" * 33000})
        keys = [f"k{i}" for i in range(1500)]
        r2 = s.put_message("T", b"y", queue_id=0, keys=keys)
        assert s.max_offset == r2.commitLogOffset + r2.storeSize  # the refused one wrote nothing
    with MessageStore.open(root) as s:
        assert s.commitlog.get_message(r1.commitLogOffset).properties["p"] == "v" * 32000
        assert [m.commitLogOffset for m in s.query_message("T", "k1234").messages] == [r2.commitLogOffset]
        assert len(s.index.files) >= 5  # 1501 keys over 255-entry files
        assert check_store(s)["ok"]
    code, out, err = run_cli("dump", root, "--json")
    assert code == 0 and len([json.loads(x) for x in out.splitlines()]) == 2


def test_enormous_bodies(tmp_path):
    root = tmp_path / "s"
    cfg = small_cfg(mappedFileSizeCommitLog=16 << 20)
    body = bytes(range(256)) * (4 * 1024 * 1024 // 256)  # exactly maxMessageSize
    with MessageStore.create(root, cfg) as s:
        r = s.put_message("T", body, queue_id=0, keys="big")
        with pytest.raises(MessageRejectedError):
            s.put_message("T", body + b"!", queue_id=0)
        s.put_messages("T", [body[:1 << 20]] * 3, queue_id=0)
    with memory_limit(512 << 20), MessageStore.open(root, cfg) as s:
        assert s.commitlog.get_message(r.commitLogOffset).body == body
        assert check_store(s)["ok"]
    code, out, err = run_cli("get", root, "T", 0, 0, "--json", "--set", "mappedFileSizeCommitLog=16777216")
    assert code == 0 and json.loads(out)["messages"][0]["bodyLength"] == len(body)


# ---- non-UTF-8, escape sequences, HTML ----------------------------------------------------------------
def _nasty_store(root: Path) -> Path:
    with MessageStore.create(root, small_cfg()) as s:
        s.put_message("Web", b"<script>alert(1)</script><img src=x onerror=alert(2)>", queue_id=0,
                      tags="<b>bold</b>", keys=["<i>k</i>", "\x1b[2J\x1b[H"])
        s.put_message("Web", b"\x1b]0;owned\x07\x1b[31mred\x9b2J\r\x08", queue_id=0,
                      tags="\x1b[5mblink", keys=["\u202eevil\u202c", "k\x07"], properties={"x": "\x1b[1m\x7f"})
    append_raw(root, [raw_record(b"Web\xff\x1b[2J", b"\xff\xfe\xc3(", b"KEYS\x01\xff\xfebad\x02TAGS\x01\xc3(\x02"
                                 b"UNIQ_KEY\x01NONUTF8\x02x\x01\xed\xa0\x80", qid=1)])
    MessageStore.open(root, read_only=False).close()  # recovery dispatches the hand-made record
    return root


def test_non_utf8_and_escape_sequences_are_data_not_commands(tmp_path):
    root = _nasty_store(tmp_path / "s")
    with MessageStore.open(root) as s:
        msgs = list(s.iter_messages())
        assert len(msgs) == 3
        odd = msgs[2]
        assert "\ufffd" in odd.topic and odd.keys == "\ufffd\ufffdbad" and odd.body == b"\xff\xfe\xc3("
        hits = s.query_message(odd.topic, "\ufffd\ufffdbad").messages
        assert [m.commitLogOffset for m in hits] == [odd.commitLogOffset]
        json.dumps([m.to_json() for m in msgs])
        assert check_store(s)["ok"]
    m0 = msgs[0]
    for args in (["dump"], ["get", "Web", 0, 0], ["query-key", "Web", "<i>k</i>"], ["msgid", m0.msgId], ["info"],
                 ["cq", "Web", 0], ["check"], ["uniq", "Web", m0.uniqKey]):
        code, out, err = run_cli(args[0], root, *args[1:])
        assert code in (0, 1) and "Traceback" not in err and "internal error" not in err, (args, err)
        bad = UNSAFE_TERMINAL.findall(out + err)
        assert not bad, (args, bad, out[:500])
        code, out, err = run_cli(args[0], root, *args[1:], "--json")
        for line in out.splitlines():
            json.loads(line)


# ---- symlinks and special files ------------------------------------------------------------------------
def test_special_files_in_place_of_store_files_read_only(tmp_path, base_store):
    cases = {"topics.json->/dev/zero": ("config/topics.json", "/dev/zero"),
             "consumerOffset.json->/dev/urandom": ("config/consumerOffset.json", "/dev/urandom"),
             "topics.json fifo": ("config/topics.json", "fifo"), "checkpoint fifo": ("checkpoint", "fifo"),
             "lock fifo": ("lock", "fifo"), "checkpoint->/dev/zero": ("checkpoint", "/dev/zero"),
             "index->/dev/zero": ("index/29990101000000000", "/dev/zero"),
             "commitlog fifo": ("commitlog/99999999999999999999", "fifo")}
    for name, (rel, target) in cases.items():
        root = copy(base_store, tmp_path / re.sub(r"\W", "_", name))
        p = root / rel
        p.unlink(missing_ok=True)
        if target == "fifo":
            os.mkfifo(p)
        else:
            os.symlink(target, p)
        with time_limit(10, name), memory_limit(512 << 20):
            try:
                with MessageStore.open(root) as s:
                    guard = Tolerant()
                    browse(s, random.Random(0), deep=False, guard=guard)
                    s.broker_holding_lock()
                    json.dumps(s.info(), default=str)
            except StoreError as e:
                assert_typed(e, name)
        code, out, err = run_cli("info", root, timeout=20)
        assert code in (0, 2) and "Traceback" not in err and "internal error" not in err, (name, err)


SYMLINKED = ["checkpoint", "abort", "lock", "config/topics.json.bak", "config/topics.json",
             "commitlog/LAST", "consumequeue/TopicA/0/00000000000000000000", "index/FIRST"]


@pytest.mark.parametrize("rel", SYMLINKED)
def test_writes_never_follow_a_symlink_out_of_the_store(tmp_path, base_store, rel):
    """A store file that is a symlink to a file outside (a tarball from elsewhere): read-only
    use reads through it, but no read-write command may change the file it points to."""
    root = copy(base_store, tmp_path / "store")
    (root / "abort").touch()
    (root / "config" / "topics.json.bak").write_text((root / "config" / "topics.json").read_text())
    if rel == "commitlog/LAST":
        rel = "commitlog/" + sorted(os.listdir(root / "commitlog"))[-1]
    if rel == "index/FIRST":
        rel = "index/" + sorted(os.listdir(root / "index"))[0]
    p = root / rel
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    data = p.read_bytes() if p.exists() else b""
    if rel.startswith("commitlog/"):
        data = data[:len(data) - 4096] + b"\x55" * 4096  # a torn tail recovery would zero
    victim.write_bytes(data)
    before = file_digest(victim)
    p.unlink(missing_ok=True)
    os.symlink(victim, p)
    for args in (["recover"], ["send", "NewTopic", "--body", "x", "--keys", "k"], ["rebuild", "--yes"]):
        code, out, err = run_cli(args[0], root, *args[1:])
        assert "Traceback" not in err and "internal error" not in err, (args, err)
        assert code == 2 and "symbolic link" in err, (args, code, err)  # refused, naming the file
        assert file_digest(victim) == before, f"{args[0]} changed {victim} through {rel}"
    with MessageStore.open(root) as s:  # reading through the link is fine
        s.info()
