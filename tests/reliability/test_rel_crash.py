"""Crash during writes: writer processes SIGKILLed at random moments and at named fault points
(inside a record, at roll-over, between commitlog and ConsumeQueue, inside the index, in the
checkpoint, in the topics.json rewrite), many times over the same store. After every crash the
store must open read-only without error, recover read-write, keep every acknowledged message
(commitlog record, CQ unit, and every one of its keys and its UNIQ_KEY findable by query_message)
and pass `check` after a clean shutdown. Unlike RocketMQ (§12.6: without messageIndexSafe the keys
between the surviving index files and the re-dispatch start are lost), no key may go missing."""
from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from relsupport import (FIGURES, HERE, PY, Ack, browse, child_env, find_lost, is_soak, run_cli, scale, seed_for,
                        skip_unless_linux, small_cfg, tree_digest)
from writer_proc import FAULTS

from engine import MessageStore
from engine.analysis.check import check_store
from engine.format.config_json import load_config_json


@dataclass
class WriterRun:
    acks: list
    abnormal: bool
    start: int
    killed_by: str        # "parent" | "fault" | "closed"
    returncode: int


class Harness:
    """One store, many writer lifetimes; remembers every acknowledgement ever printed."""

    def __init__(self, root: Path, seed: int, index_safe: bool = False):
        self.root = root
        self.rng = random.Random(seed)
        self.index_safe = index_safe
        self.acked: dict[int, Ack] = {}
        self.keys: dict[int, list[str]] = {}  # commitLogOffset -> the KEYS tokens of that message
        self.keys_checked = 0
        self.runs = 0
        self.faults = 0
        self.recoveries = {"abnormal": 0, "normal": 0}
        self.truncated_bytes = 0
        self.acked_lost = 0
        MessageStore.create(root, small_cfg()).close()

    def cfg(self):
        return small_cfg(messageIndexSafe=True) if self.index_safe else small_cfg()

    def run_writer(self, flush: str, mode: str, fault: str | None = None, kill_after: int | None = None,
                   close_after: int = 0, max_msgs: int = 400) -> WriterRun:
        seed = self.rng.getrandbits(31)
        cmd = [PY, str(HERE / "writer_proc.py"), str(self.root), "--flush", flush, "--mode", mode,
               "--seed", str(seed), "--max", str(max_msgs)]
        if fault:
            cmd += ["--fault", fault]
        if close_after:
            cmd += ["--close-after", str(close_after)]
        if self.index_safe:
            cmd += ["--index-safe"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
        watchdog = threading.Timer(60, p.kill)
        watchdog.start()
        acks, abnormal, start, by = [], False, 0, "fault"
        n_ack = 0
        try:
            for raw in p.stdout:
                line = raw.decode()
                if not line.endswith("\n"):
                    break  # cut mid-line by the kill: never acknowledged
                parts = line.split()
                if parts[0] == "READY":
                    abnormal, start = parts[1] == "1", int(parts[2])
                    if kill_after == 0:
                        time.sleep(self.rng.random() * 0.01)
                        p.send_signal(signal.SIGKILL)
                        by = "parent"
                elif parts[0] == "A":
                    acks.append(Ack.parse(parts))
                    self.keys[acks[-1].phys] = json.loads(parts[9])
                    n_ack += 1
                    if kill_after is not None and n_ack == kill_after and by != "parent":
                        time.sleep(self.rng.random() * 0.002)  # land anywhere in the next put
                        p.send_signal(signal.SIGKILL)
                        by = "parent"
                elif parts[0] == "IDLE" and by != "parent":
                    p.send_signal(signal.SIGKILL)  # fault point never reached: crash while idle
                    by = "parent"
                elif parts[0] == "CLOSED":
                    by = "closed"
            rc = p.wait()
        finally:
            watchdog.cancel()
            p.stdout.close()
            err = p.stderr.read().decode(errors="replace")
            p.stderr.close()
        assert rc in (0, -signal.SIGKILL), f"writer failed (rc {rc}):\n{err}"
        if rc == -signal.SIGKILL and by == "fault" and fault:
            self.faults += 1
        elif by == "parent":
            self.faults += 1
        self.runs += 1
        if abnormal:
            self.recoveries["abnormal"] += 1
        elif self.runs > 1:
            self.recoveries["normal"] += 1
        for a in acks:
            self.acked[a.phys] = a
        return WriterRun(acks, abnormal, start, by, rc)

    # ---- verification --------------------------------------------------------------------
    def verify(self, deep_ro: bool = True) -> int:
        """Read-only first (no error, no byte changed), then recovery, then every acknowledged
        message, then `check` after a clean shutdown. Returns messages checked."""
        before = tree_digest(self.root)
        with MessageStore.open(self.root) as ro:
            browse(ro, random.Random(self.runs), deep=deep_ro)
        assert tree_digest(self.root) == before, "a read-only open changed the store"
        checked = 0
        with MessageStore.open(self.root, self.cfg(), read_only=False) as s:
            if s.recovery.abnormal:
                self.recoveries["abnormal"] += 1
            checked = len(self.acked)
            lost = find_lost(s, self.acked.values())
            unfound = keys_not_found(s, self.acked.values(), self.keys)
            self.keys_checked += sum(1 + len(self.keys.get(a.phys, ())) for a in self.acked.values())
            self.acked_lost = len(lost) + len({p for _, _, p in unfound})
            assert not lost, f"{len(lost)} acknowledged messages damaged or lost, e.g. {lost[:3]}"
            assert not unfound, (f"{len(unfound)} keys of acknowledged messages not found after recovery "
                                 f"(topic, key, commitLogOffset), e.g. {unfound[:3]}")
        with MessageStore.open(self.root) as ro:
            rep = check_store(ro)
            assert rep["ok"], rep["problems"][:5]
            assert not ro.abort_present
        load_config_json(self.root / "config", "topics.json")  # still parses
        return checked


def keys_not_found(store, acks, keys: dict[int, list[str]]) -> list[tuple[str, str, int]]:
    """Every acknowledged message that is indexed (all but ROLLBACK) must be found by its UNIQ_KEY
    and by each KEYS token: query_message(topic, key, max_num=0) contains its commitLogOffset.
    One query per (topic, key), however many messages share the key."""
    want: dict[tuple[str, str], set[int]] = {}
    for a in acks:
        if a.sys_flag & 0xC == 0xC:
            continue
        for k in [a.uniq, *keys.get(a.phys, ())]:
            want.setdefault((a.topic, k), set()).add(a.phys)
    out = []
    for (topic, key), phys in want.items():
        found = {m.commitLogOffset for m in store.query_message(topic, key, max_num=0).messages}
        out.extend((topic, key, p) for p in sorted(phys - found))
    return out


STORE_LIFETIMES = 8  # writer lifetimes per store before a fresh one (soak runs stay fast to verify)


def _scenario(request, tmp_path, name: str, flush: str, mode: str, cycles: int, index_safe: bool = False):
    seed = seed_for(request, name)
    rng = random.Random(seed)
    done = 0
    while done < cycles:
        n = min(STORE_LIFETIMES, cycles - done)
        h = Harness(tmp_path / f"store{done}", rng.getrandbits(32), index_safe)
        checked = 0
        try:
            for c in range(n):
                kill_after = rng.choice([0, 1, rng.randrange(400), rng.randrange(400), rng.randrange(400)])
                h.run_writer(flush, mode, kill_after=kill_after)
                if rng.random() < 0.5 or c == n - 1:
                    checked += h.verify(deep_ro=c == n - 1)
        except AssertionError:
            FIGURES.add(request, f"crash/{name}", runs=h.runs, faultsInjected=h.faults, messagesChecked=checked,
                        failures=1, ackedLost=h.acked_lost, seeds=[seed])
            raise
        FIGURES.add(request, f"crash/{name}", runs=h.runs, faultsInjected=h.faults, messagesChecked=checked,
                    acked=len(h.acked), keysChecked=h.keys_checked,
                    abnormalRecoveries=h.recoveries["abnormal"])
        done += n


@pytest.mark.parametrize("name,flush,mode,index_safe", [
    ("sync-single", "sync", "single", False),
    ("sync-batch", "sync", "batch", True),
    ("async-mixed", "async", "mixed", False),
    ("sync-mixed-indexsafe", "sync", "mixed", True),
])
def test_sigkill_at_random_moments(request, tmp_path, name, flush, mode, index_safe):
    skip_unless_linux()
    cycles = scale(request, 4 if name.startswith("sync") else 3, 60)
    _scenario(request, tmp_path, name, flush, mode, cycles, index_safe)


def test_sigkill_at_every_fault_point(request, tmp_path):
    """Each named fault point at least once per run (twice, sync and async, in soak mode, and
    many times with random hit numbers)."""
    skip_unless_linux()
    seed = seed_for(request, "faults")
    rng = random.Random(seed)
    rounds = scale(request, 1, 12)
    h = Harness(tmp_path / "store", seed)
    fresh = 0
    nth_range = {"before-write": 300, "batch-torn": 40, "undispatched": 300, "cq-unit": 300, "index-key": 600,
                 "msync": 300, "blank": 3, "roll": 3, "create-empty": 6, "cq-roll": 2, "index-roll": 2,
                 "index-torn": 600, "checkpoint": 4,
                 "topics-json": 1}
    hit = {f: 0 for f in FAULTS}
    checked = 0
    try:
        for r in range(rounds):
            for fault in FAULTS:
                flush = rng.choice(["sync", "async"])
                # async: the run may end before a flush round; its close flushes >= 3 files
                nth = 1 + rng.randrange(nth_range[fault] if (fault, flush) != ("msync", "async") else 3)
                close_after = rng.randrange(1, 200) if fault == "topics-json" else 0
                run = h.run_writer(flush, "mixed", fault=f"{fault}:{nth}", close_after=close_after, max_msgs=700)
                hit[fault] += run.killed_by == "fault"
                if rng.random() < 0.4:
                    checked += h.verify(deep_ro=False)
            if len(h.acked) > 4000:  # a fresh store now and then keeps verification fast
                checked += h.verify()
                fresh += 1
                runs, faults = h.runs, h.faults
                h = Harness(tmp_path / f"store{fresh}", rng.getrandbits(32))
                h.runs, h.faults = runs, faults
        checked += h.verify()
    except AssertionError:
        FIGURES.add(request, "crash/fault-points", runs=h.runs, faultsInjected=h.faults, messagesChecked=checked,
                    failures=1, ackedLost=h.acked_lost, seeds=[seed])
        raise
    FIGURES.add(request, "crash/fault-points", runs=h.runs, faultsInjected=h.faults, messagesChecked=checked,
                acked=len(h.acked), keysChecked=h.keys_checked,
                faultPointsHit={k: v for k, v in hit.items()})
    # the points every run passes through must have been hit (roll-overs depend on sizes drawn)
    for f in ("before-write", "undispatched", "cq-unit", "index-key", "msync", "topics-json"):
        assert hit[f] >= 1, (f, hit)


def test_torn_index_put_that_survives_crash_recovery(tmp_path):
    """A writer killed between writing an index slot and the header's indexCount leaves a slot
    pointing at entry == indexCount. Crash recovery keeps index files whose endTimestamp is not
    past the checkpoint's indexMsgTimestamp (batches share one store time, so the file being
    written can qualify): the next put then overwrote that entry for another key, hijacking
    the slot's chain (check: 'a cycle'; older keys of the slot no longer found)."""
    import struct
    from engine.store.checkpoint import Checkpoint
    from engine.format.javahash import index_key, index_key_hash
    root = tmp_path / "s"
    with MessageStore.create(root, small_cfg()) as s:
        acked = [s.put_message("T", b"m%d" % i, queue_id=i % 4, keys=f"key{i}") for i in range(150)]
    with MessageStore.open(root) as s:
        f = s.index.files[-1]
        name, count, slots = f.name, f.header.indexCount, f.slot_num
        victim = next(m for m in s.iter_messages() if m.keys == "key3")
    # the torn put: entry `count` and its slot written, the header not
    kh = index_key_hash(index_key("T", "key3"))
    p = root / "index" / name
    raw = bytearray(p.read_bytes())
    slot_pos = 40 + 4 * (kh % slots)
    prev = struct.unpack_from(">i", raw, slot_pos)[0]
    struct.pack_into(">iqii", raw, 40 + 4 * slots + 20 * count, kh, victim.commitLogOffset, 0, prev)
    struct.pack_into(">i", raw, slot_pos, count)
    p.write_bytes(bytes(raw))
    cp, _ = Checkpoint.load(root / "checkpoint")
    cp.indexMsgTimestamp = 2 ** 62  # the file survives crash recovery
    cp.store(root / "checkpoint")
    (root / "abort").touch()
    with MessageStore.open(root, small_cfg(), read_only=False) as s:
        more = [s.put_message("T", b"n%d" % i, queue_id=0, keys=f"more{i}") for i in range(100)]
    with MessageStore.open(root) as s:
        rep = check_store(s)
        # the forged indexMsgTimestamp above is itself what check reports about the checkpoint
        real = [p for p in rep["problems"] if not (p["kind"] == "checkpoint" and "indexMsgTimestamp" in p["detail"])]
        assert not real, real[:3]
        for r in acked + more:
            assert r.commitLogOffset in [m.commitLogOffset for m in s.query_message("T", r.uniqKey).messages]


# ---- deterministic: the index after crash recovery has no hole -------------------------------------
def _timed_store(root: Path, n: int, step_ms: int = 50, cfg=None, topics=("T", "U")):
    """n messages with two keys each, store times `step_ms` apart (a fake clock), clean close.
    Returns {(topic, key): {commitLogOffset}} for every UNIQ_KEY and KEYS token."""
    want: dict[tuple[str, str], set[int]] = {}
    with MessageStore.create(root, cfg or small_cfg()) as s:
        t = [1_700_000_000_000]
        s.writer.clock = lambda: t[0]
        for i in range(n):
            t[0] += step_ms
            topic = topics[i % len(topics)]
            r = s.put_message(topic, b"body-%d" % i, queue_id=i % 3, keys=[f"k{i}", f"g{i % 7}"])
            for k in (r.uniqKey, f"k{i}", f"g{i % 7}"):
                want.setdefault((topic, k), set()).add(r.commitLogOffset)
    return want


def _unfound(store, want) -> list:
    out = []
    for (topic, key), offs in want.items():
        got = {m.commitLogOffset for m in store.query_message(topic, key, max_num=0).messages}
        out.extend((topic, key, o) for o in sorted(offs - got))
    return out


def _crash_with_stale_index_timestamp(root: Path, keep: int) -> dict:
    """The state a writer killed at an index roll-over leaves (the new index file is made before
    the checkpoint records the full file's endTimestamp): indexMsgTimestamp is that of index
    file `keep`, every later file has a newer endTimestamp (crash recovery deletes them), and
    physic/logics are recent, so the abnormal recovery start file is far later than the first
    record of the deleted files."""
    from engine.store.checkpoint import Checkpoint
    with MessageStore.open(root) as s:
        files = [(f.name, f.header.endTimestamp, f.header.endPhyOffset) for f in s.index.files]
        last_ts = max(m.storeTimestamp for m in s.iter_messages())
    cp, _ = Checkpoint.load(root / "checkpoint")
    cp.indexMsgTimestamp = files[keep][1]
    cp.physicMsgTimestamp = cp.logicsMsgTimestamp = last_ts
    cp.store(root / "checkpoint")
    (root / "abort").touch()
    return {"deleted": [n for n, ts, _ in files if ts > cp.indexMsgTimestamp], "kept_end": files[keep][2]}


def test_crash_recovery_leaves_no_index_hole(tmp_path):
    """The hole a crash test found (47 acknowledged messages in the commitlog and their queues,
    not in the index): crash recovery deletes the index files newer than indexMsgTimestamp
    (§12.6) but re-dispatches only from the abnormal start file (min(physic, logics) - 3 s,
    §12.4). RocketMQ loses the keys in between unless messageIndexSafe; we index them again
    (MessageStore._dispatch_before)."""
    root = tmp_path / "s"
    want = _timed_store(root, 1500)
    state = _crash_with_stale_index_timestamp(root, keep=2)
    assert len(state["deleted"]) >= 3
    with MessageStore.open(root, small_cfg(), read_only=False) as s:
        rec = s.recovery
        assert rec.abnormal and sorted(rec.deleted_index_files) == sorted(state["deleted"])
        start = int(rec.commitlog.start_file)
        assert start > state["kept_end"] + 20000  # the scenario: re-dispatch starts well after the hole opens
        missing = _unfound(s, want)
        assert not missing, f"{len(missing)} keys lost by crash recovery, e.g. {missing[:3]}"
    with MessageStore.open(root) as s:
        assert not _unfound(s, want)
        rep = check_store(s)
        assert rep["ok"], rep["problems"][:3]


def test_index_file_whose_header_a_crash_never_wrote(tmp_path):
    """A writer killed between creating an index file and writing the header it inherits left
    an all-zero header (endPhyOffset 0): recovery's re-dispatch then indexed every record again
    into it (the file overlapped all older ones, `check` failed) and resumed from offset 0."""
    root = tmp_path / "s"
    want = _timed_store(root, 900)
    with MessageStore.open(root) as s:
        last = s.index.files[-1]
        size, last_end = last.path.stat().st_size, last.header.endTimestamp
        n_before = sum(f.entry_count for f in s.index.files)
    (root / "index" / "29991231235959999").write_bytes(bytes(size))  # created, nothing written
    from engine.store.checkpoint import Checkpoint
    cp, _ = Checkpoint.load(root / "checkpoint")
    cp.indexMsgTimestamp = last_end
    cp.store(root / "checkpoint")
    (root / "abort").touch()
    with MessageStore.open(root, small_cfg(), read_only=False) as s:
        assert s.recovery.index_entries_added < 50, s.recovery  # not the whole log again
        assert not _unfound(s, want)
    with MessageStore.open(root) as s:
        assert sum(f.entry_count for f in s.index.files) <= n_before + 50
        rep = check_store(s)
        assert rep["ok"], rep["problems"][:3]


# ---- rebuild == recovery, also when rebuild is killed ---------------------------------------------
_CHILD_WRITES_NEW_TOPIC = r"""
import os, sys
sys.path.insert(0, sys.argv[2])
from relsupport import small_cfg
from engine import MessageStore
s = MessageStore.open(sys.argv[1], small_cfg(), read_only=False)
t = [1_700_000_300_000]
s.writer.clock = lambda: t[0]
for i in range(500):
    t[0] += 40
    s.put_message("NewT", b"new-%d" % i, queue_id=i % 4, keys=[f"n{i}"])
s.writer.flush()   # the checkpoint says recent: the abnormal start file is one of the last
os._exit(0)        # killed: abort stays
"""


def _old_then_killed_new_topic(root: Path) -> None:
    """The store of the report: topics written and cleanly closed, then a new topic's messages
    written by a writer that is killed (abort present, checkpoint recent)."""
    _timed_store(root, 800, topics=("Old0", "Old1", "Old2"))
    subprocess.run([PY, "-c", _CHILD_WRITES_NEW_TOPIC, str(root), str(HERE)], check=True, env=child_env())
    assert (root / "abort").exists()


def _every_key(root: Path) -> dict:
    with MessageStore.open(root) as s:
        want: dict[tuple[str, str], set[int]] = {}
        for m in s.iter_messages():
            for k in ([m.uniqKey] if m.uniqKey else []) + m.key_list:
                want.setdefault((m.topic, k), set()).add(m.commitLogOffset)
    return want


def _queues_and_index(root: Path) -> tuple[dict, set]:
    with MessageStore.open(root) as s:
        queues = {k: (cq.min_offset, cq.max_offset, cq.units(cq.min_offset, cq.max_offset).tolist())
                  for k, cq in s.queues.items() if cq.max_offset > cq.min_offset}
        entries = set()
        for f in s.index.files:
            e = f.entries[1:f.header.indexCount]
            entries.update(zip(e["keyHash"].tolist(), e["commitLogOffset"].tolist()))
        return queues, entries


def _recovered_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    MessageStore.open(dst, small_cfg(), read_only=False).close()
    return dst


def _assert_same_as_recovery(root: Path, ref: Path, want: dict) -> None:
    q, e = _queues_and_index(root)
    rq, re_ = _queues_and_index(ref)
    assert q.keys() == rq.keys(), sorted(set(q) ^ set(rq))[:5]
    diff = [k for k in rq if q[k] != rq[k]]
    assert not diff, f"queues differ from recovery's: {[(k, q[k][:2], rq[k][:2]) for k in diff[:3]]}"
    assert e == re_, f"index entries differ: {len(e - re_)} extra, {len(re_ - e)} missing"
    with MessageStore.open(root) as s:
        missing = _unfound(s, want)
        assert not missing, f"{len(missing)} keys not found, e.g. {missing[:3]}"
        rep = check_store(s)
        assert rep["ok"], rep["problems"][:3]
        assert not s.abort_present


def _base_and_recovery(tmp_path, crashed: bool):
    """A store of old topics and a new one whose writer was killed (closed cleanly again when
    not `crashed`), every acknowledged key in it, and a copy of it after plain recovery."""
    base = tmp_path / "base"
    _old_then_killed_new_topic(base)
    if not crashed:
        MessageStore.open(base, small_cfg(), read_only=False).close()
    return base, _every_key(base), _recovered_copy(base, tmp_path / "recovered")


@pytest.mark.parametrize("crashed", [True, False])
def test_rebuild_gives_what_recovery_gives(tmp_path, crashed):
    """`rebuild` of a store left by a killed writer made every queue of the older topics vanish
    and the new topic's queues start late (the abnormal recovery re-dispatched only from its
    start file); it also reported "dispatched 0". Now: the same queues, units and index
    entries as recovery, on a crashed and on a clean store, with real counts."""
    base, want, ref = _base_and_recovery(tmp_path, crashed)
    root = tmp_path / "rebuilt"
    shutil.copytree(base, root)
    code, out, err = run_cli("rebuild", root, "--yes", "--json")
    assert code == 0, err
    rep = json.loads(out)
    with MessageStore.open(ref) as s:
        msgs = list(s.iter_messages())
    n, keys = len(msgs), sum(1 + len(m.key_list) for m in msgs)
    assert (rep["dispatched"], rep["unitsWritten"], rep["indexEntries"]) == (n, n, keys), rep
    assert rep["abnormal"] == crashed
    _assert_same_as_recovery(root, ref, want)


REBUILD_KILLS = [  # two killed rebuilds in a row, then a plain read-write open
    (("index-key", 150), ("rename", 1)),
    (("cq-unit", 700), ("index-key", 901)),
    (("rename", 2), ("unlink", 5)),
    (("unlink", 40), ("cq-unit", 1000)),
    (("index-roll", 3), ("create-empty", 5)),
    (("index-torn", 333), ("checkpoint", 1)),
]


@pytest.mark.parametrize("crashed", [True, False])
def test_killed_rebuilds_then_open_restore_everything(request, tmp_path, crashed):
    """`rebuild` killed twice, then a normal read-write open: the index lacked the keys of one
    message (its CQ unit was written, its index entries not: the next open resumed after the
    CQ), and a rebuild killed while deleting left queues and index files missing from the
    middle. Each kill point, then the open, must give what recovery gives."""
    skip_unless_linux()
    rng = random.Random(seed_for(request, f"rebuild-kills-{crashed}"))
    base, want, ref = _base_and_recovery(tmp_path, crashed)
    kills = REBUILD_KILLS if is_soak(request) else rng.sample(REBUILD_KILLS, 3)
    for i, pair in enumerate(kills):
        root = tmp_path / f"k{i}"
        shutil.copytree(base, root)
        for fault, nth in pair:
            p = subprocess.run([PY, str(HERE / "writer_proc.py"), str(root), "--rebuild", "--fault", f"{fault}:{nth}"],
                               capture_output=True, text=True, env=child_env(), timeout=120)
            assert p.returncode == -signal.SIGKILL, (fault, nth, p.returncode, p.stdout, p.stderr[-2000:])
        MessageStore.open(root, small_cfg(), read_only=False).close()
        _assert_same_as_recovery(root, ref, want)
        FIGURES.add(request, "crash/rebuild-kills", runs=1, faultsInjected=len(pair), failures=0)
