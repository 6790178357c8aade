"""Ctrl-C in the CLI (engine.cli.output.cancel_on_sigint): the first SIGINT sets the running
task's CancelToken, the task stops at its next poll and the command exits 130 with one line on
stderr; a writing command leaves the store as RocketMQ's recovery expects it. Real processes
(`python -m engine ...`) and real signals; the demo's own test is in test_demo_task.py."""
from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import as_typed_at_a_terminal
from engine import MessageStore
from engine.cli.output import EXIT_CANCELLED, cancel_on_sigint
from engine.store.demo import demo_task
from engine.tasks import CancelToken, run


# ---- the context manager ---------------------------------------------------------------------
def _wait_for(cond, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_first_sigint_sets_the_token_a_second_raises_and_the_old_handler_comes_back():
    seen = []
    before = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        token = CancelToken()
        with cancel_on_sigint(token) as got:
            assert got is token and signal.getsignal(signal.SIGINT) is not before
            os.kill(os.getpid(), signal.SIGINT)   # nothing raised here
            assert _wait_for(lambda: token.cancelled)
            with pytest.raises(KeyboardInterrupt):   # pressed twice: out now
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
        assert seen == []
        os.kill(os.getpid(), signal.SIGINT)   # the previous handler is back
        assert _wait_for(lambda: seen == [signal.SIGINT])
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_block_left_by_an_error_puts_the_handler_back_and_an_untouched_token_stays_unset():
    before = signal.getsignal(signal.SIGINT)
    token = CancelToken()
    with pytest.raises(RuntimeError):
        with cancel_on_sigint(token):
            raise RuntimeError("boom")
    assert signal.getsignal(signal.SIGINT) is before and not token.cancelled


def test_off_the_main_thread_and_under_an_ignored_sigint_nothing_is_installed():
    before = signal.getsignal(signal.SIGINT)
    inside = []

    def worker():
        with cancel_on_sigint(CancelToken()):   # signal.signal would raise ValueError here
            inside.append(signal.getsignal(signal.SIGINT))
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert inside == [before]
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a background job: SIGINT stays ignored
    try:
        token = CancelToken()
        with cancel_on_sigint(token):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert not token.cancelled
    finally:
        signal.signal(signal.SIGINT, before)


# ---- the commands, in real processes -----------------------------------------------------------
def _cli(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "engine", *map(str, args)], capture_output=True, text=True,
                          timeout=120, **kw)


def _files(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def _queue_ends(root: Path) -> dict:
    with MessageStore.open(root) as s:
        return {k: (cq.min_offset, cq.max_offset) for k, cq in s.queues.items()}


@pytest.fixture(scope="module")
def big_store(tmp_path_factory) -> Path:
    """A demo store check needs a few seconds for (500,000 messages, 150 MB: written in ~3 s)."""
    return run(demo_task(tmp_path_factory.mktemp("ctrl_c") / "big", messages=500_000))


def test_ctrl_c_cancels_check(big_store):
    before = _files(big_store)
    proc = subprocess.Popen([sys.executable, "-m", "engine", "check", str(big_store), "--progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_typed_at_a_terminal)
    try:
        first = proc.stderr.readline()   # its first progress line: the commitlog walk has begun
        assert first.startswith("check: commitlog"), first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = err.splitlines()
    assert proc.returncode == EXIT_CANCELLED and out == ""
    assert lines[-1] == "rmqstore: check cancelled; nothing was written", err
    assert not any(x.startswith("check: done") for x in lines)
    assert _files(big_store) == before


def _run_on_a_terminal_until(args: list, shown: str) -> tuple[int, str]:
    """`python -m engine ARGS` with stderr on a pty (rebuild and recover show progress only on
    a terminal); SIGINT once `shown` is on it; (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "engine", *map(str, args)], stdin=subprocess.DEVNULL,
                            preexec_fn=as_typed_at_a_terminal,
                            stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got, sent = b"", False
    try:
        end = time.monotonic() + 90
        while time.monotonic() < end:
            if not sent and shown.encode() in got:
                proc.send_signal(signal.SIGINT)
                sent = True
            if select.select([master], [], [], 0.05)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:   # EIO: the other side is closed and drained
                    break
                if not chunk:
                    break
                got += chunk
            elif proc.poll() is not None and sent:
                break
        out = proc.communicate(timeout=60)[0]
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert sent, f"never saw {shown!r}: {got!r}"
    assert out == b""
    return proc.returncode, got.decode(errors="replace")


def _pending_only(root: Path) -> dict:
    """check's report of a store whose re-dispatch was cut short: OK (exit 0) with recovery
    pending and no problem. Consumer offsets past a queue's current end that the re-dispatch
    grows back to are pending too (kind "config"); the checkpoint never names index files the
    rebuild deleted (it forgets them before deleting). The commitlog, the units and entries
    written are sound."""
    r = _cli("check", root, "--json")
    assert r.returncode in (0, 1), r.stderr
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["ok"], report["problems"]
    assert report["problems"] == [] and report["problemCount"] == 0
    assert {p["kind"] for p in report["recoveryPending"]} >= {"abort", "cq-behind"}
    return report


def test_ctrl_c_cancels_rebuild_and_recover_and_the_next_open_finishes(tmp_path):
    root = run(demo_task(tmp_path / "s", messages=100_000))
    want = _queue_ends(root)
    rc, shown = _run_on_a_terminal_until(["rebuild", root, "--yes"], "rebuild: commitlog")   # re-dispatching
    assert rc == EXIT_CANCELLED, shown
    assert shown.rstrip().endswith("rmqstore: rebuild cancelled; the ConsumeQueues and the index are rebuilt in "
                                   "part; the next read-write open (or rebuild) re-dispatches the rest from the "
                                   "commitlog"), shown
    assert (root / "abort").exists() and not (root / ".rmqstore-rebuild-trash").exists()
    units = _pending_only(root)["cqUnits"]
    assert 0 < units < 100_000

    rc, shown = _run_on_a_terminal_until(["recover", root], "recover: commitlog")   # its re-dispatch, cut too
    assert rc == EXIT_CANCELLED, shown
    assert shown.rstrip().endswith("rmqstore: recover cancelled; the next read-write open (or recover) runs "
                                   "recovery again"), shown
    assert _pending_only(root)["cqUnits"] >= units

    r = _cli("recover", root)
    assert r.returncode == 0, r.stderr
    r = _cli("check", root)
    assert r.returncode == 0 and r.stdout.startswith("OK: ") and "recovery pending" not in r.stdout, r.stdout
    assert _queue_ends(root) == want


def test_diff_stops_at_its_next_step_after_a_cancel_in_any_phase():
    """A cancel between two progress reports stops diff before the next one, in every phase
    (its walk once polled only inside files of 4096 records or more, and its listing not at
    all: Ctrl-C let a diff of two demo stores run its 40 s to the end)."""
    from conftest import unpack
    from engine.analysis.diff import diff_task
    from engine.tasks import Cancelled
    with MessageStore.open(unpack("small")) as a, MessageStore.open(unpack("crashed")) as b:
        phases = [p.phase for p in diff_task(a, b)]
        assert {"compare", "records", "match"} <= set(phases)
        for k in range(len(phases) - 1):   # (after the last report the work is done)
            token = CancelToken()
            task = diff_task(a, b, cancel=token)
            for _ in range(k + 1):
                next(task)
            token.cancel()
            with pytest.raises(Cancelled):
                next(task)
