"""Power loss, not just SIGKILL (powerloss.py: ALICE/CrashMonkey-style record and replay).

A writer's run is recorded (every page it changes, every msync/fsync, every metadata operation,
every acknowledgement under SYNC_FLUSH); the states a power cut could leave at any point of the
run are rebuilt (unsynced 4 KiB pages dropped, kept, or any version they had in between; of the
metadata not yet committed, a journal's prefix or, POSIX-strict, any per-name ordered subset);
each state is recovered read-write and then judged: `check` OK, and every acknowledged message
present, readable at its queue offset and found by every key and its UNIQ_KEY.

States that fail only because recovery kept a torn record are counted apart (KNOWN, strict xfail)."""
from __future__ import annotations

import collections
import os
import random
import shutil
import subprocess
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

import powerloss
from relsupport import FIGURES, HERE, PY, child_env, scale, seed_for, skip_unless_linux

# Open engine bugs the state sweep tolerates (by their signature) and demonstrates by strict xfails.
# Found by this harness and fixed in 700fbb0 (the tests below now guard them): IndexFile.flush
# msynced an index file only once; recovery's CQ truncation / tail zeroing was not msynced
# before new writes reused the offsets; `abort` was not created durably (file + folder fsync);
# an index roll let the checkpoint vouch for the full file before the commitlog record was msynced.
# Powerloss.Recording.state(trust_index_flush/trust_abort/trust_recovery=True) still models
# those fixes, to look past them on an older engine.
KNOWN = {
    "open-writes-before-abort": "a read-write open after a clean shutdown writes the index (recovery's re-added "
                                "entries / slot repairs) before `abort` exists: a cut there leaves no abort, a new "
                                "slot page on disk and its entry page not; the next open trusts that index "
                                "(clean-shutdown recovery) and keys of acknowledged messages are lost",
    "recovery-unlink-not-durable": "crash recovery deletes the index files newer than the checkpoint (and empty "
                                   "files) without an fsync of their folder: under POSIX metadata a cut brings a "
                                   "deleted index file back beside the one rebuilt after it (check: overlapping "
                                   "index files)",
    "torn-record-accepted": "a record torn by the cut past its body (properties half written: the body CRC does not "
                            "cover them, records without __CRC32#) passes recovery as whole; the index keeps the "
                            "entries of its real keys: check fails (index-entry), and the record's UNIQ_KEY/KEYS "
                            "are garbage",
}


def _record(store: Path, log: Path, geometry: str, seed: int, n: int, close: bool = False, reopen: float = 0.0,
            prior: Path | None = None, flush_chance: float = 0.06) -> powerloss.Recording:
    cmd = [PY, str(HERE / "powerloss.py"), "record", str(store), str(log), "--geometry", geometry,
           "--seed", str(seed), "-n", str(n), "--reopen", str(reopen), "--flush-chance", str(flush_chance)]
    if close:
        cmd.append("--close")
    if prior is not None:
        cmd += ["--prior", str(prior)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=child_env())
    assert p.returncode == 0, p.stderr[-4000:]
    return powerloss.Recording.load(log)


def _jobs(rec: powerloss.Recording, log: Path, rng: random.Random, n: int, posix_share: float) -> list[tuple]:
    """n states of one recording: after every sync point all-dropped (what the engine made
    durable, exactly), the last point all-kept, the rest random points and choices."""
    jobs = []
    syncs = rec.sync_points()
    end = len(rec.events)
    picks = [(k, "drop") for k in rng.sample(syncs, min(len(syncs), n // 4))]
    picks += [(end, "keep"), (end, "drop")]
    picks += [(rng.randrange(end + 1), rng.choice(["keep", "drop"])) for _ in range(n // 8)]
    while len(picks) < n:
        picks.append((rng.randrange(end + 1), "random"))
    for k, policy in picks[:n]:
        meta = "posix" if rng.random() < posix_share else "journal"
        jobs.append((str(log), k, rng.getrandbits(48), policy, meta))
    return jobs


def _run_jobs(jobs: list[tuple], work: Path) -> list[dict]:
    workers = 2 if (os.cpu_count() or 1) > 1 else 1
    args = [(*j, str(work / f"s{i}")) for i, j in enumerate(jobs)]
    if workers == 1:
        return [powerloss.check_state(*a) for a in args]
    with ProcessPoolExecutor(workers) as ex:
        return list(ex.map(powerloss.check_state, *zip(*args), chunksize=8))


def _summarize(results: list[dict]) -> tuple[int, dict]:
    lost = sum(len({u for u, _ in r["lost"]}) for r in results)
    classes = collections.Counter()
    example = {}
    for r in results:
        if r["ok"]:
            continue
        key = (r["error"] or "") + "|" + ",".join(r["problems"]) + "|" + \
            ",".join(sorted({w.split(" ")[0] + (" " + w.split(" ")[1] if w.startswith("key") else "")
                             for _, w in r["lost"]}))[:80]
        classes[key] += 1
        example.setdefault(key, {k: r[k] for k in ("log", "k", "seed", "policy", "metadata", "details")}
                           | {"lost": r["lost"][:3]})
    return lost, {"classes": dict(classes), "examples": example}


def test_power_loss_states(request, tmp_path):
    """Recorded runs (fresh store; clean restarts inside; a chained run that starts from a
    power-loss state, so recovery itself is cut) and their power-loss states."""
    skip_unless_linux()
    # the normal suite replays a fixed sample (an open engine bug found by chance must not fail an
    # unrelated CI run); --soak draws fresh seeds (RMQ_SEED replays one)
    seed = seed_for(request, "powerloss") if request.config.getoption("--soak") or os.environ.get("RMQ_SEED") \
        else 20261125
    rng = random.Random(seed)
    runs = scale(request, 2, 16)
    per_run = scale(request, 110, 320)
    results, states = [], 0
    acked = 0
    for r in range(runs):
        geometry = ["small", "pages"][r % 2]
        store, log = tmp_path / f"run{r}", tmp_path / f"run{r}.log"
        rec = _record(store, log, geometry, rng.getrandbits(31), rng.choice([120, 160, 200]),
                      close=rng.random() < 0.5, reopen=0.02)
        jobs = _jobs(rec, log, rng, per_run, posix_share=0.25)
        # chained: a power-loss state of this run, recovered by the next recorded writer, cut again
        k = rng.randrange(len(rec.events) + 1)
        base = tmp_path / f"chain{r}"
        powerloss.materialize(rec.state(k, random.Random(rng.getrandbits(48)), "random",
                                        trust_index_flush=True, trust_abort=True), base)
        prior = tmp_path / f"chain{r}.prior"
        _write_prior(rec, k, prior)
        log2 = tmp_path / f"chain{r}.log"
        rec2 = _record(base, log2, geometry, rng.getrandbits(31), 60, prior=prior)
        jobs += _jobs(rec2, log2, rng, per_run // 2, posix_share=0.25)
        out = _run_jobs(jobs, tmp_path / "work")
        results += out
        states += len(out)
        acked += len(rec.acks_before(len(rec.events))) + len(rec2.acks_before(len(rec2.events))) - len(rec2.prior_acks)
        shutil.rmtree(store, ignore_errors=True)
        shutil.rmtree(base, ignore_errors=True)
    # failures explained by an open engine bug (KNOWN) are counted apart
    known_by = collections.Counter()
    failed = []
    for r in results:
        if r["ok"]:
            continue
        why = _known_cause(r)
        if why:
            known_by[why] += 1
        else:
            failed.append(r)
    known = [r for r in results if not r["ok"] and r not in failed]
    lost, summary = _summarize(failed)
    FIGURES.add(request, "powerloss/states", runs=runs * 2, faultsInjected=states, messagesChecked=sum(
        r["acks"] for r in results), failures=len(failed), ackedLost=lost, statesTried=states,
        statesPosix=sum(r["metadata"] == "posix" for r in results), acknowledged=acked,
        statesTornRecordKept=sum(bool(r.get("torn")) for r in results), statesFailedKnown=len(known),
        statesFailedKnownBy=dict(known_by),
        failureClasses=summary["classes"], **({"seeds": [seed]} if failed else {}))
    assert not failed, (f"{len(failed)} of {states} power-loss states failed (seed {seed}), "
                        f"{lost} acknowledged messages lost: {summary}")


def _known_cause(r: dict) -> str | None:
    """The KNOWN bug a failed state shows, if any: replayed with that bug's fix modelled, or by
    where the cut fell."""
    if r["error"]:
        return None
    if r.get("torn") and not r["lost"]:
        return "torn-record-accepted"
    rec = powerloss.Recording.load(Path(r["log"]))
    if r["metadata"] == "posix" and set(r["problems"]) == {"index-file"} and not r["lost"]:
        v = powerloss.check_state(r["log"], r["k"], r["seed"], r["policy"], r["metadata"], r["log"] + ".w",
                                  trust_recovery=True)
        if v["ok"]:
            return "recovery-unlink-not-durable"
    # the cut fell inside a reopen: after the close removed abort, before the new abort was fsynced
    last_remove = max((i for i, e in enumerate(rec.events[:r["k"]]) if e[:2] == ("remove", "abort")), default=None)
    if last_remove is not None and not any(e[:2] == ("fsync", "abort") for e in rec.events[last_remove:r["k"]]):
        if any(e[0] == "pages" and e[1].startswith("index/") for e in rec.events[last_remove:r["k"]]):
            return "open-writes-before-abort"
    return None


def _write_prior(rec: powerloss.Recording, k: int, path: Path) -> None:
    """A log holding only the acknowledgements made before the cut (the chained run's prior)."""
    import pickle
    with open(path, "wb") as fh:
        pickle.dump({"geometry": rec.geometry, "seed": rec.seed, "initial": {},
                     "events": [("ack", a) for a in rec.acks_before(k)]}, fh)


# ---- the engine bugs, as strict xfails ----------------------------------------------------------
def _sweep(log: Path, rec: powerloss.Recording, work: Path, metadata: str, n_random: int, **trust) -> list:
    """Drop-everything states after every checkpoint fsync, then n_random random states (fixed
    seeds): the failures."""
    points = [i + 1 for i, e in enumerate(rec.events) if e[0] == "fsync" and e[1] == "checkpoint"]
    jobs = [(k, 0, "drop") for k in points]
    jobs += [(random.Random(s).randrange(len(rec.events) + 1), s, "random") for s in range(n_random)]
    bad = []
    for k, s, policy in jobs:
        v = powerloss.check_state(str(log), k, s, policy, metadata, str(work), **trust)
        if not v["ok"]:
            bad.append((k, s, policy, v["problems"], v["details"][:2], v["lost"][:2]))
    return bad


def test_index_flush_makes_full_index_files_durable(tmp_path):
    """Flushes every few puts (the flush service), index files filling up: with the engine's own
    msyncs (not modelled as fixed), every state must recover to a store `check` calls OK with
    every acknowledged key."""
    skip_unless_linux()
    rec = _record(tmp_path / "s", tmp_path / "r.log", "small", 17, 160, flush_chance=0.3)
    bad = _sweep(tmp_path / "r.log", rec, tmp_path / "w", "journal", 40, trust_index_flush=False)
    assert not bad, bad[:3]


def test_abort_is_durable_before_the_first_write(tmp_path):
    """A clean store reopened; the writer creates a new topic's queues and appends, no flush.
    Power cut under POSIX metadata (a new directory entry is durable only by an fsync of its
    folder, or of the file itself): every written page reached the disk, no directory entry
    that was not fsynced did -- neither `abort` nor the new ConsumeQueue files. Recovery must
    still rebuild the new queues of the acknowledged messages."""
    skip_unless_linux()
    _record(tmp_path / "s", tmp_path / "r1.log", "small", 11, 120, close=True)
    rec = _record(tmp_path / "s", tmp_path / "r2.log", "small", 61, 40, prior=tmp_path / "r1.log", flush_chance=0.0)
    files = rec.state(len(rec.events), random.Random(0), "pick", "posix", trust_index_flush=True,
                      pick=lambda rel, page, versions: versions[-1])
    root = tmp_path / "w"
    powerloss.materialize(files, root)
    v = powerloss.verify(root, rec.geometry, rec.acks_before(len(rec.events)))
    assert v["ok"], (v["problems"], v["details"][:2], v["lost"][:3])


@pytest.mark.xfail(strict=True, reason=KNOWN["torn-record-accepted"])
def test_recovery_drops_a_record_torn_past_its_body(tmp_path):
    """The state the harness found, by hand: the last record's properties half on disk (the
    page after its body never written back), the checkpoint's indexMsgTimestamp at its store
    time (stored at an index roll inside the put), abort present. After recovery `check` must
    be OK: the torn record dropped (or its index entries made to agree with it)."""
    import struct
    from engine import MessageStore
    from engine.analysis.check import check_store
    root = tmp_path / "s"
    cfg = powerloss.store_cfg("small")
    with MessageStore.create(root, cfg) as s:
        s.put_message("TopicA", b"x" * 100, 0, "TagA", ["k1"])
        r = s.put_message("TopicA", b"y" * 100, 0, "TagA", ["k2", "k3"])
    path = root / "commitlog" / f"{0:020d}"
    data = bytearray(path.read_bytes())
    end = r.commitLogOffset + r.storeSize
    cut = data.index(r.uniqKey.encode(), r.commitLogOffset) + 10
    data[cut:end] = bytes(end - cut)                     # from inside its UNIQ_KEY value on: never reached the disk
    path.write_bytes(bytes(data))
    cp = root / "checkpoint"
    raw = bytearray(cp.read_bytes())
    struct.pack_into(">q", raw, 16, r.storeTimestamp)    # indexMsgTimestamp: the index file vouched for
    cp.write_bytes(bytes(raw))
    (root / "abort").touch()
    with MessageStore.open(root, cfg, read_only=False):
        pass
    with MessageStore.open(root, cfg) as ro:
        rep = check_store(ro)
    assert rep["ok"], rep["problems"][:3]


def test_recovery_changes_are_durable_before_new_writes(tmp_path):
    """Run 1 is cut between a put's dispatch and its msync (CQ units on disk, the record not);
    run 2 recovers that state (truncating the dirty units) and appends a few messages, with no
    flush; run 2 is cut, keeping only what was synced."""
    skip_unless_linux()
    rec = _record(tmp_path / "s", tmp_path / "r1.log", "small", 31, 60, flush_chance=0.0)
    k = max(i for i, e in enumerate(rec.events) if e[0] == "sync" and e[1].startswith("commitlog/"))

    def pick(rel, page, versions):
        return None if rel.startswith("commitlog/") else versions[-1]
    base = tmp_path / "base"
    powerloss.materialize(rec.state(k, random.Random(0), "pick", trust_index_flush=True, trust_abort=True,
                                    pick=pick), base)
    _write_prior(rec, k, tmp_path / "prior")
    rec2 = _record(base, tmp_path / "r2.log", "small", 32, 6, prior=tmp_path / "prior", flush_chance=0.0)
    v = powerloss.check_state(str(tmp_path / "r2.log"), len(rec2.events), 0, "drop", "journal", str(tmp_path / "w"),
                              trust_recovery=False)
    assert v["ok"], (v["problems"], v["details"][:3], v["lost"][:3])


def test_open_after_clean_shutdown_writes_nothing_before_abort(tmp_path):
    """The state the soak found (a writer with clean restarts; cut inside a reopen)."""
    skip_unless_linux()
    rec = _record(tmp_path / "s", tmp_path / "r.log", "pages", 1841059714, 200, close=True, reopen=0.02)
    bad = []
    opens = [i for i, e in enumerate(rec.events) if e[:2] == ("remove", "abort")]
    for i in opens:
        end = next((j for j in range(i, len(rec.events)) if rec.events[j][:2] == ("fsync", "abort")), len(rec.events))
        for k in range(i + 1, end + 1):
            for seed in range(6):
                v = powerloss.check_state(str(tmp_path / "r.log"), k, seed, "random", "journal", str(tmp_path / "w"))
                if not v["ok"]:
                    bad.append((k, seed, v["problems"], v["lost"][:2]))
    assert opens
    assert not bad, bad[:3]


def test_model_replays_a_run_exactly(tmp_path):
    """The recorder misses nothing: keeping every page and every metadata operation at the end
    of a run rebuilds exactly the files the writer left."""
    skip_unless_linux()
    rec = _record(tmp_path / "s", tmp_path / "r.log", "pages", 5, 80, close=True, reopen=0.05)
    files = rec.state(len(rec.events), random.Random(0), "keep")
    on_disk = powerloss.read_tree(tmp_path / "s")
    files.pop("lock", None)
    assert sorted(files) == sorted(on_disk)
    for rel, data in on_disk.items():
        assert files[rel] == data, rel
    assert any(e[0] == "rename" for e in rec.events) and any(e[0] == "remove" for e in rec.events)
