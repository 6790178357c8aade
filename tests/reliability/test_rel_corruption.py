"""Corruption: bit flips, zero-filled regions, random overwrites, truncations, extensions and
missing files in the commitlog, ConsumeQueue, index, checkpoint and config JSON files, on our own
stores and on RocketMQ's. A read-only open then either refuses with a typed StoreError naming the
file, or serves a full browsing session in which every failure is typed; it never changes a
byte. Read-write recovery and rebuild on the damaged store fail only with typed errors and
leave consistent ConsumeQueues and index behind. Targeted cases check the damage is reported."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import unpack
from relsupport import (FIGURES, Tolerant, assert_typed, browse, build_store, memory_limit, run_cli, scale,
                        seed_for, small_cfg, time_limit, tree_digest)

from engine import MessageStore
from engine.analysis.check import check_store
from engine.errors import StoreError

CQ_SMALL = 400  # 20 units per ConsumeQueue file: several files per queue


@pytest.fixture(scope="module")
def own_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("corrupt") / "base"
    build_store(root, n=900, seed=11, mappedFileSizeConsumeQueue=CQ_SMALL)
    from engine.format.config_json import store_config_json
    store_config_json(root / "config", "consumerOffset.json",
                      {"offsetTable": {"TopicA@g1": {0: 3, 1: 9}, "TopicB@g2": {2: 1}}})
    store_config_json(root / "config", "subscriptionGroup.json",
                      {"subscriptionGroupTable": {"g1": {"groupName": "g1"}}})
    return root


def copy_store(src: Path, dst: Path) -> Path:
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dst)], check=True)
    return dst


def categorize(root: Path) -> dict[str, list[Path]]:
    cats = {"commitlog": sorted((root / "commitlog").glob("*")),
            "cq": sorted(p for p in (root / "consumequeue").rglob("*") if p.is_file()),
            "index": sorted((root / "index").glob("*")) if (root / "index").exists() else [],
            "checkpoint": [root / "checkpoint"] if (root / "checkpoint").exists() else [],
            "config": sorted(p for p in (root / "config").glob("*.json")) if (root / "config").exists() else []}
    return {k: v for k, v in cats.items() if v}


def live_end(data: bytes) -> int:
    return len(data.rstrip(b"\0")) or len(data)


def mutate(root: Path, rng: random.Random) -> str:
    """Damage one file of the store in one of many ways; returns a description."""
    cats = categorize(root)
    weights = {"commitlog": 30, "cq": 25, "index": 20, "checkpoint": 10, "config": 15}
    cat = rng.choices(list(cats), [weights[c] for c in cats])[0]
    files = cats[cat]
    p = rng.choice(files)
    rel = p.relative_to(root)
    data = bytearray(p.read_bytes())
    end = live_end(data)
    if cat == "config":
        op = rng.choice(["flip", "truncate", "delete", "garbage", "non-utf8", "shape", "deep", "bigint", "empty"])
        if op == "flip" and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == "truncate":
            data = data[:rng.randrange(len(data) + 1)]
        elif op == "delete":
            p.unlink()
            return f"{op} {rel}"
        elif op == "garbage":
            data = bytearray(rng.randbytes(rng.randrange(1, 300)))
        elif op == "non-utf8":
            data[rng.randrange(len(data) + 1):0] = b"\xff\xfe\xc3("
        elif op == "shape":
            data = bytearray(json.dumps(rng.choice([[1, 2], {"topicConfigTable": [1]}, {"offsetTable": [1]},
                                                    {"offsetTable": {"a@b": [1]}}, {"offsetTable": {"x": 1}},
                                                    {"topicConfigTable": {"T": 5}}, "text", 42,
                                                    {"offsetTable": {"a@b": {"q": "x"}}}])).encode())
        elif op == "deep":
            data = bytearray(b"{\"a\":" + b"[" * 50000)
        elif op == "bigint":
            data = bytearray(b"{\"offsetTable\":{\"T@g\":{0:" + b"9" * 6000 + b"}}}")
        elif op == "empty":
            data = bytearray()
        p.write_bytes(bytes(data))
        return f"{op} {rel}"
    if cat == "checkpoint":
        op = rng.choice(["flip", "truncate", "delete", "garbage", "extreme"])
    else:
        op = rng.choice(["flip", "flip", "flip", "zero", "overwrite", "truncate", "extend", "delete"])
    if op == "delete":
        if cat in ("cq", "commitlog") and len(files) > 2 and rng.random() < 0.7:
            p = files[rng.randrange(1, len(files) - 1)]  # a file from the middle
            rel = p.relative_to(root)
        p.unlink()
        return f"delete {rel}"
    if op == "flip":
        for _ in range(rng.choice([1, 1, 2, 8])):
            i = rng.randrange(end) if rng.random() < 0.9 else rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    elif op == "zero":
        a = rng.randrange(end)
        n = min(rng.randrange(1, 4097), len(data) - a)
        data[a:a + n] = bytes(n)
    elif op == "overwrite":
        a = rng.randrange(end)
        n = rng.randrange(1, 65)
        data[a:a + n] = rng.randbytes(len(data[a:a + n]))
    elif op == "truncate":
        data = data[:rng.randrange(len(data))]
    elif op == "extend":
        data += rng.randbytes(rng.randrange(1, 100))
    elif op == "garbage":
        data = bytearray(rng.randbytes(len(data)))
    elif op == "extreme":
        import struct
        data[:40] = struct.pack(">qqqqq", *(rng.choice([-1, 2 ** 63 - 1, 0, -2 ** 63, 1]) for _ in range(5)))
    p.write_bytes(bytes(data))
    return f"{op} {rel}"


def run_read_only(root: Path, rng: random.Random, what: str) -> dict:
    """Open read-only and browse; typed errors only, no byte changed. Returns the outcome."""
    before = tree_digest(root)
    out = {"refused": False, "typed": 0, "detected": False, "messages": 0}
    with memory_limit(1 << 30), time_limit(60, what):
        try:
            store = MessageStore.open(root)
        except StoreError as e:
            assert_typed(e, what)
            out["refused"] = out["detected"] = True
        except Exception as e:  # noqa: BLE001 - the point of the test
            raise AssertionError(f"untyped {type(e).__name__} on open: {e} [{what}]") from e
        else:
            with store:
                guard = Tolerant()
                try:
                    out["messages"] = browse(store, rng, deep=False, guard=guard)
                    rep = guard(check_store, store)
                except (StoreError, AssertionError):
                    raise
                except Exception as e:  # noqa: BLE001
                    raise AssertionError(f"untyped {type(e).__name__}: {e} [{what}]") from e
                out["typed"] = len(guard.typed)
                out["detected"] = bool(guard.typed) or bool(rep and not rep["ok"]) or bool(store.warnings)
    assert tree_digest(root) == before, f"read-only session changed the store [{what}]"
    return out


def run_read_write(root: Path, what: str, cfg=None) -> str:
    """Recovery, then a rebuild, on the damaged store: typed errors only; after a rebuild the
    ConsumeQueues and the index agree with whatever commitlog is left."""
    with time_limit(60, what):
        try:
            MessageStore.open(root, cfg, read_only=False).close()
        except StoreError as e:
            assert_typed(e, what)
            return "refused"
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"untyped {type(e).__name__} in recovery: {e} [{what}]") from e
        from engine.cli.write import rebuild
        try:
            rebuild(root, cfg)
        except StoreError as e:
            assert_typed(e, what)
            return "rebuild refused"
        except Exception as e:  # noqa: BLE001
            raise AssertionError(f"untyped {type(e).__name__} in rebuild: {e} [{what}]") from e
        with MessageStore.open(root, cfg) as s:
            rep = check_store(s)
            bad = [p for p in rep["problems"] if p["kind"].startswith(("cq", "index"))]
            if bad and "commitlog/" in what:
                # records lost in a hole of the commitlog: like RocketMQ's reput, the rebuild
                # appends the next record of the queue at the current position (spec 8.7), so
                # later queue offsets shift. Known; see test_rebuild_across_a_hole_keeps_queue_offsets
                return "recovered, queue offsets shifted by a commitlog hole"
            assert not bad, f"after rebuild: {bad[:3]} [{what}]"
    return "recovered"


def _random_cases(request, tmp_path, base: Path, name: str, runs: int, rw_share: float, cfg=None):
    seed = seed_for(request, name)
    rng = random.Random(seed)
    stats = {"refused": 0, "typedErrors": 0, "detected": 0, "messages": 0, "rw": 0, "shifted": 0}
    failures = 0
    try:
        for i in range(runs):
            root = copy_store(base, tmp_path / f"c{i}")
            what = mutate(root, rng)
            if rng.random() < 0.3:
                what += "; " + mutate(root, rng)
            what = f"{name} seed={seed} case={i}: {what}"
            o = run_read_only(root, rng, what)
            stats["refused"] += o["refused"]
            stats["typedErrors"] += o["typed"]
            stats["detected"] += o["detected"]
            stats["messages"] += o["messages"]
            if rng.random() < rw_share:
                r = run_read_write(root, what, cfg)
                stats["rw"] += 1
                stats["shifted"] += "shifted" in r
            shutil.rmtree(root)
    except AssertionError:
        failures = 1
        raise
    finally:
        FIGURES.add(request, f"corruption/{name}", runs=runs if not failures else i + 1, faultsInjected=i + 1,
                    messagesChecked=stats["messages"], failures=failures, refusedTyped=stats["refused"],
                    typedErrorsInSession=stats["typedErrors"], damageReported=stats["detected"],
                    readWriteRecoveries=stats["rw"], rebuildsShiftedByHole=stats["shifted"], seeds=[seed])


def test_random_damage_own_store(request, tmp_path, own_store):
    _random_cases(request, tmp_path, own_store, "own-store", scale(request, 30, 1500), 0.25)


@pytest.mark.parametrize("fixture", ["small", "v5", "crashed_torn"])
def test_random_damage_rocketmq_stores(request, tmp_path, fixture):
    _random_cases(request, tmp_path, unpack(fixture), fixture, scale(request, 6, 300), 0.2)


# ---- targeted: damage must be reported, the rest stays readable ----------------------------------
def _messages(root, cfg=None):
    with MessageStore.open(root, cfg) as s:
        return list(s.iter_messages())


def test_flipped_body_byte_in_an_old_file_is_reported(tmp_path, own_store):
    root = copy_store(own_store, tmp_path / "s")
    msgs = [m for m in _messages(root) if m.commitLogOffset < 65536 and len(m.body) > 20]
    m = msgs[len(msgs) // 2]
    p = root / "commitlog" / "00000000000000000000"
    data = bytearray(p.read_bytes())
    body_at = m.commitLogOffset + m.storeSize - len(m.body) - 1 - len(m.topic.encode()) - 2 \
        - len(m.propertiesRaw.encode())
    data[body_at + 3] ^= 0x10
    p.write_bytes(bytes(data))
    with MessageStore.open(root) as s:
        rep = check_store(s)
        assert any(x["offset"] == m.commitLogOffset for x in rep["problems"]), rep["problems"][:3]
    code, out, err = run_cli("check", root, "--json")
    assert code == 1 and "Traceback" not in err


def test_zeroed_region_in_an_old_commitlog_file(tmp_path, own_store):
    root = copy_store(own_store, tmp_path / "s")
    before = _messages(root)
    p = root / "commitlog" / "00000000000000000000"
    data = bytearray(p.read_bytes())
    data[20000:24096] = bytes(4096)
    p.write_bytes(bytes(data))
    with MessageStore.open(root) as s:
        rep = check_store(s)
        kinds = {x["kind"] for x in rep["problems"]}
        assert "commitlog-record" in kinds and "cq-unit" in kinds, rep["problems"][:3]
        # everything in later files is still served, through the log and through the queues
        later = [m for m in before if m.commitLogOffset >= 65536]
        assert all(s.commitlog.get_message(m.commitLogOffset) is not None for m in later)
        for m in later[:50]:
            if m.sysFlag & 0xC in (0, 8):
                r = s.get_message(m.topic, m.queueId, m.queueOffset, 1)
                assert r.messages and r.messages[0].commitLogOffset == m.commitLogOffset


def test_consume_queue_file_missing_from_the_middle(tmp_path, own_store):
    root = copy_store(own_store, tmp_path / "s")
    qdir = max(((root / "consumequeue" / "TopicA").iterdir()), key=lambda d: len(list(d.iterdir())))
    files = sorted(qdir.iterdir())
    assert len(files) >= 3
    gone = files[1]
    gone.unlink()
    first_gone = int(gone.name) // 20
    with MessageStore.open(root) as s:
        cq = s.find_queue("TopicA", int(qdir.name))
        r = s.get_message("TopicA", cq.queue_id, first_gone, 5)
        assert not r.messages  # nothing to serve in the hole ...
        after = first_gone + CQ_SMALL // 20
        r = s.get_message("TopicA", cq.queue_id, after, 5)
        assert r.messages and r.messages[0].queueOffset == after  # ... and the rest is served
        rep = check_store(s)
        missing = [x for x in rep["problems"] if x["kind"] == "cq-missing"]
        assert len(missing) == CQ_SMALL // 20
    assert run_read_write(root, "cq file missing") == "recovered"


@pytest.mark.parametrize("what", ["commitlog", "cq", "index"])
def test_truncated_data_file_is_a_typed_error_naming_it(tmp_path, own_store, what):
    root = copy_store(own_store, tmp_path / "s")
    p = categorize(root)[what][0]
    with open(p, "r+b") as fh:
        fh.truncate(p.stat().st_size // 2)
    try:
        with MessageStore.open(root, small_cfg(mappedFileSizeConsumeQueue=CQ_SMALL)) as s:
            assert what == "index" and any(p.name in w for w in s.warnings)  # a reader skips it
    except StoreError as e:
        assert_typed(e)
        assert p.name in str(e) or str(p.parent) in str(e)
    code, out, err = run_cli("info", root)
    assert code in (0, 2) and "Traceback" not in err and len(err.strip().splitlines()) <= 1


@pytest.mark.parametrize("content", [b"", b"\x00" * 4096, b"\xff" * 4096, b"short", None])
def test_damaged_checkpoint(tmp_path, own_store, content):
    root = copy_store(own_store, tmp_path / "s")
    (root / "abort").touch()
    if content is None:
        (root / "checkpoint").unlink()
    else:
        (root / "checkpoint").write_bytes(content)
    run_read_only(root, random.Random(1), f"checkpoint {content[:8] if content else content!r}")
    assert run_read_write(root, "checkpoint") == "recovered"
    assert len(_messages(root)) == len(_messages(own_store))


def test_rebuild_across_a_hole_keeps_queue_offsets(tmp_path, own_store):
    """Records lost in the middle of the commitlog: RocketMQ's reput would append each queue's
    next record at the queue's end (§8.7), shifting every later queue offset (consumer offsets
    then point at other messages). Our policy: the record goes to its own queue offset and the
    gap is filled with filler units, as for a queue that starts late (docs/reliability.md)."""
    root = copy_store(own_store, tmp_path / "s")
    before = {(m.topic, m.queueId, m.queueOffset): m.commitLogOffset for m in _messages(root)
              if m.commitLogOffset >= 65536 and m.sysFlag & 0xC in (0, 8)}
    p = root / "commitlog" / "00000000000000000000"
    data = bytearray(p.read_bytes())
    data[20000:24096] = bytes(4096)
    p.write_bytes(bytes(data))
    from engine.cli.write import rebuild
    rebuild(root, None)
    with MessageStore.open(root) as s:
        moved = [k for k, off in before.items()
                 if (s.find_queue(k[0], k[1]).unit(k[2]) or (None,))[0] != off]
        assert not moved, f"{len(moved)} messages now at other queue offsets, e.g. {moved[:3]}"
        fillers = sum(int(((u["commitLogOffset"] == 0) & (u["size"] == 0x7FFFFFFF)).sum())
                      for cq in s.queues.values() for u in [cq.units(cq.min_offset, cq.max_offset)])
        assert fillers > 0  # the lost records' places
        rep = check_store(s)
        assert not [p for p in rep["problems"] if p["kind"].startswith(("cq", "index"))], rep["problems"][:3]


def test_filler_gap_across_cq_files_survives_a_crash_mid_fill(tmp_path):
    """The gap policy at the unit level: the fillers may span several CQ files; a crash in the
    middle of filling leaves a queue ending in fillers, which recovery must not take as its
    maxPhysicOffset (Java's rule would give 0x7FFFFFFF: every later record skipped); a gap
    no commitlog hole could explain (a damaged QUEUEOFFSET) is not filled."""
    from engine.store.consume_queue import FILLER_SIZE, ConsumeQueue
    d = tmp_path / "cq" / "T" / "0"
    cq = ConsumeQueue("T", 0, d, 1000, writable=True)  # 50 units a file
    for q in range(10):
        assert cq.put_unit(1000 * q, 500, 7, q)
    cq._fill_to(cq.queue.last, 120 * 20)  # killed here: fillers up to unit 120, no unit yet
    cq.close()
    cq = ConsumeQueue("T", 0, d, 1000, writable=True)
    cq.recover()
    assert cq.max_offset == 120 and cq.max_physic_offset == 9 * 1000 + 500
    assert cq.put_unit(1_000_000, 300, 7, 200)  # the re-dispatch goes on
    assert cq.max_offset == 201 and cq.unit(200) == (1_000_000, 300, 7)
    assert all(cq.unit(q)[:2] == (0, FILLER_SIZE) for q in range(10, 200))
    assert [cq.unit(q)[0] for q in range(10)] == [1000 * q for q in range(10)]
    assert not cq.put_unit(1_000_000, 300, 7, 200)  # re-dispatch of the same record: skipped
    # QUEUEOFFSET 10^9 right after the last record: no hole holds that many; appended (RocketMQ)
    files = len(cq.queue.files)
    assert cq.put_unit(1_000_300, 300, 7, 10 ** 9)
    assert cq.max_offset == 202 and len(cq.queue.files) == files
    cq.close()


@pytest.mark.parametrize("name", ["consumerOffset.json", "topics.json"])
def test_check_reports_a_damaged_config_json(tmp_path, own_store, name):
    """check after a rebuild of a store whose config JSON is damaged raised CorruptDataError
    (the random-damage run failed); it is a problem to report."""
    root = copy_store(own_store, tmp_path / "s")
    (root / "config").mkdir(exist_ok=True)
    (root / "config" / name).write_text('{"offsetTable": {"a": 1 "b"}}')
    (root / "config" / (name + ".bak")).unlink(missing_ok=True)
    with MessageStore.open(root) as s:
        rep = check_store(s)
    assert not rep["ok"] and any(p["kind"] == "config" and name in p["file"] for p in rep["problems"]), rep["problems"]
