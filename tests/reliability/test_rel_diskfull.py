"""Disk full while appending: the put is refused with a typed StoreFullError naming the file,
the writer never dies of SIGBUS, nothing acknowledged is lost, and the store recovers to a
consistent state once there is room again.

Two ways to fill the disk: RLIMIT_FSIZE (no file may grow past N bytes: hits the creation of
a commitlog, index or ConsumeQueue file) and, where mounts are allowed (root or user
namespaces), a real tiny tmpfs that runs out of blocks wherever it happens to."""
from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from relsupport import (FIGURES, HERE, PY, Ack, child_env, find_lost, scale, seed_for, skip_unless_linux, small_cfg)

from engine import MessageStore
from engine.analysis.check import check_store


def _parse(out: str):
    acks, refused, closed = [], [], None
    for line in out.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "A":
            acks.append(Ack.parse(parts))
        elif parts[0] in ("E", "O"):
            refused.append((parts[1], parts[2] if len(parts) > 2 else None))
        elif parts[0] == "C":
            closed = parts[1]
    return acks, refused, closed


def _verify(root, acks, refused, what):
    assert refused, f"the disk never filled [{what}]"
    for cls, path in refused:
        assert cls == "StoreFullError" and path, (cls, path, what)
    with MessageStore.open(root, small_cfg(), read_only=False) as s:  # recovery, with room again
        lost = find_lost(s, acks)
        assert not lost, f"{len(lost)} acknowledged messages lost, e.g. {lost[:3]} [{what}]"
        s.put_message("TopicA", b"after", queue_id=0)  # writable again
    with MessageStore.open(root) as s:
        rep = check_store(s)
        assert rep["ok"], (rep["problems"][:5], what)


def _prefill(root):
    """A store whose first commitlog, CQ and index files already exist (created without a limit)."""
    with MessageStore.create(root, small_cfg()) as s:
        s.put_message("TopicA", b"seed", queue_id=0, keys="seed")


@pytest.mark.parametrize("limit,where", [(10_000, "commitlog"), (3_000, "index"), (800, "consumequeue")])
@pytest.mark.parametrize("flush", ["sync", "async"])
def test_file_size_limit_refuses_cleanly(request, tmp_path, limit, where, flush):
    skip_unless_linux()
    root = tmp_path / "s"
    _prefill(root)
    seed = seed_for(request, f"fsize{limit}{flush}")
    p = subprocess.run([PY, str(HERE / "fill_proc.py"), str(root), "--flush", flush, "--seed", str(seed),
                        "--fsize", str(limit)], capture_output=True, text=True, timeout=120, env=child_env())
    assert p.returncode == 0, p.stderr[-3000:]
    acks, refused, closed = _parse(p.stdout)
    assert closed is not None, "close() raised"
    assert where in (refused[0][1] or ""), refused[:2]
    _verify(root, acks, refused, f"RLIMIT_FSIZE={limit} {flush} seed={seed}")
    FIGURES.add(request, "disk-full/file-size-limit", runs=1, faultsInjected=len(refused), messagesChecked=len(acks))


def _can_mount() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    p = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                        "mount -t tmpfs -o size=64k tmpfs /tmp"], capture_output=True)
    if p.returncode == 0:
        return True
    p = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                        "mount -t tmpfs -o size=64k tmpfs /tmp"], capture_output=True)
    return p.returncode == 0


def test_tiny_tmpfs_runs_out_of_blocks(request, tmp_path):
    """A real full filesystem: with sparse files this was SIGBUS (the writer died); now every
    file's blocks are reserved when it is created, so the put in flight gets StoreFullError."""
    skip_unless_linux()
    if not _can_mount():
        pytest.skip("cannot mount a tmpfs here (needs root or user namespaces)")
    seed = seed_for(request, "tmpfs")
    rng = random.Random(seed)
    runs = scale(request, 3, 60)
    mnt = tmp_path / "mnt"
    checked = refusals = 0
    for i in range(runs):
        size_k = rng.randrange(100, 600)
        flush = rng.choice(["sync", "async"])
        out_dir = tmp_path / f"run{i}"
        out_dir.mkdir()
        mnt.mkdir(exist_ok=True)
        script = (f"mount -t tmpfs -o size={size_k}k tmpfs {mnt} || exit 99; "
                  f"{PY} {HERE / 'fill_proc.py'} {mnt / 's'} --flush {flush} --seed {rng.getrandbits(31)} "
                  f"> {out_dir / 'out.txt'} 2> {out_dir / 'err.txt'}; echo $? > {out_dir / 'rc'}; "
                  f"cp -a {mnt / 's'} {out_dir / 's'}")
        cmd = ["unshare", "--mount", "sh", "-c", script]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=child_env())
        if p.returncode == 99 or not (out_dir / "rc").exists():
            cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=child_env())
        rc = int((out_dir / "rc").read_text())
        what = f"tmpfs {size_k}k {flush} seed={seed} run={i}"
        assert rc == 0, f"writer died (rc {rc}, 135 = SIGBUS) [{what}]\n{(out_dir / 'err.txt').read_text()[-3000:]}"
        acks, refused, closed = _parse((out_dir / "out.txt").read_text())
        _verify(out_dir / "s", acks, refused, what)
        checked += len(acks)
        refusals += len(refused)
    FIGURES.add(request, "disk-full/tmpfs", runs=runs, faultsInjected=refusals, messagesChecked=checked)
