"""Concurrency: readers (a read-only MessageStore following with refresh(), and the CLI) beside
a writer process appending at full speed see only whole messages and never fail; a second
writer (another process, the CLI, or this process) is refused with StoreLockedError; a rebuild
refused by the lock deletes nothing.

Nothing here depends on how fast the machine is: the tests wait on the writer's progress (its
READY and acknowledgement lines) and on the readers' own counts, never on a fixed wall-clock
window; a time limit only turns a hang into a failure."""
from __future__ import annotations

import base64
import json
import signal
import subprocess
import threading
import time
import zlib

import pytest

from relsupport import FIGURES, HERE, PY, Ack, child_env, find_lost, run_cli, scale, skip_unless_linux, small_cfg

from engine import MessageStore, StoreLockedError
from engine.analysis.check import check_store
from engine.format.message import RecordStatus

# a bound on waiting for progress that is merely slow (a loaded machine): only a hang reaches it
HANG = 600.0


class Writer:
    """writer_proc appending at full speed (async flush, singles and batches) until stopped."""

    def __init__(self, root, seed: int, flush: str = "async", max_msgs: int = 10_000_000):
        self.p = subprocess.Popen([PY, str(HERE / "writer_proc.py"), str(root), "--flush", flush, "--mode", "mixed",
                                   "--seed", str(seed), "--max", str(max_msgs)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env())
        self.acks: list[Ack] = []
        self.ready = threading.Event()
        self.ended = threading.Event()  # its stdout closed: it exited (or was killed)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.wait_for(self.ready.is_set, "its READY line")

    def wait_for(self, cond, what: str) -> None:
        """Wait until cond() holds; fail if the writer exits first (or after HANG seconds)."""
        limit = time.monotonic() + HANG
        while not cond():
            if self.ended.wait(0.005) and not cond():
                self.p.wait()
                raise AssertionError(f"writer exited ({self.p.returncode}) before {what}: "
                                     f"{self.p.stderr.read().decode(errors='replace')[-3000:]}")
            assert time.monotonic() < limit, f"writer gave no {what} in {HANG:.0f} s"

    def _read(self):
        try:
            for raw in self.p.stdout:
                line = raw.decode()
                if not line.endswith("\n"):
                    break
                parts = line.split()
                if parts[0] == "READY":
                    self.ready.set()
                elif parts[0] == "A":
                    self.acks.append(Ack.parse(parts))
        finally:
            self.ended.set()

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()
        self.t.join(10)
        err = self.p.stderr.read().decode(errors="replace")
        self.p.stdout.close()
        self.p.stderr.close()
        assert self.p.returncode == -signal.SIGKILL, err[-3000:]


def _whole(m, off) -> str | None:
    if m.physicalOffsetField != off:
        return f"PHYSICALOFFSET {m.physicalOffsetField} at {off}"
    if (zlib.crc32(m.body) & 0x7FFFFFFF if m.body else 0) != m.bodyCRC:
        return f"body CRC mismatch at {off}"
    if not m.uniqKey:
        return f"no UNIQ_KEY at {off}"
    return None


def _cli_reader(root, stop: threading.Event, errors: list, counts: dict, writer: Writer):
    """The CLI in a loop: every run exits 0 and prints only whole messages."""
    while not stop.is_set():
        for args in (["dump", "--json"], ["info", "--json"], ["get", "TopicA", "1", "0", "--count", "64", "--json"],
                     ["query-key", "TopicB", "order-3", "--json"], ["cq", "TopicA", "2", "--json"]):
            acks_before = len(writer.acks)
            try:
                code, out, err = run_cli(args[0], root, *args[1:], timeout=HANG)
            except subprocess.TimeoutExpired:
                errors.append(f"cli {args[0]} gave no answer in {HANG:.0f} s")
                return
            except BaseException as e:  # noqa: BLE001 - a dead reader thread must fail the test, not hang it
                errors.append(f"cli {args[0]}: {type(e).__name__}: {e}")
                return
            counts["cli"] += 1
            if len(writer.acks) > acks_before:
                counts["cli_beside_writer"] += 1  # the writer appended while this run read
            if code != 0:
                errors.append(f"cli {args[0]} exit {code}: {err.strip()[-300:]}")
                continue
            for line in out.splitlines():
                doc = json.loads(line)
                msgs = [doc] if args[0] == "dump" else doc.get("messages", [])
                for m in msgs:
                    body = base64.b64decode(m["body"])
                    if (zlib.crc32(body) & 0x7FFFFFFF if body else 0) != m["bodyCRC"]:
                        errors.append(f"cli {args[0]}: torn body at {m['commitLogOffset']}")
                    counts["cli_messages"] += 1
            if stop.is_set():
                break


def test_readers_beside_a_full_speed_writer(request, tmp_path):
    skip_unless_linux()
    root = tmp_path / "s"
    MessageStore.create(root, small_cfg()).close()
    seconds = scale(request, 3, 60)
    w = Writer(root, seed=int(time.time()), max_msgs=scale(request, 8000, 30_000))
    errors: list[str] = []
    counts = {"cli": 0, "cli_messages": 0, "refresh": 0, "records": 0, "queue_reads": 0, "cli_beside_writer": 0}
    stop = threading.Event()
    cli = threading.Thread(target=_cli_reader, args=(root, stop, errors, counts, w), daemon=True)
    cli.start()

    def done() -> bool:
        """At least `seconds` of reading, and as much reading as the checks below ask for: on a
        slow (loaded) machine the readers simply read for longer."""
        return (time.monotonic() >= min_end and counts["records"] > 100 and counts["cli"] >= 3) \
            or time.monotonic() >= hang_end

    try:
        # opened on a store whose first files are being created, open may meet a file sized
        # after it guessed the sizes (ConfigError): wait for the first acknowledged message
        w.wait_for(lambda: bool(w.acks), "acknowledged message")
        r = MessageStore.open(root)
        try:
            seen_end = r.min_offset
            next_q: dict = {}
            min_end, hang_end = time.monotonic() + seconds, time.monotonic() + HANG
            while not done() and not errors:
                r.refresh()
                counts["refresh"] += 1
                for off, rec in r.walk(seen_end):
                    if rec.status is RecordStatus.MESSAGE:
                        why = _whole(rec.message, off)
                        if why:
                            errors.append(why)
                        counts["records"] += 1
                        seen_end = off + rec.size
                    elif rec.status is RecordStatus.END_OF_FILE:
                        seen_end = r.commitlog.roll_next_file(off)
                    else:
                        errors.append(f"{rec.status.value} record at {off} inside the visible log: {rec.reason}")
                        break
                for (topic, qid), cq in list(r.queues.items()):
                    q = next_q.get((topic, qid), cq.min_offset)
                    res = r.get_message(topic, qid, q, 64)
                    for i, m in enumerate(res.messages):
                        if (m.topic, m.queueId) != (topic, qid) or _whole(m, m.commitLogOffset):
                            errors.append(f"{topic}/{qid}@{q}: unit points at {m.topic}/{m.queueId}")
                    if res.skipped:
                        errors.append(f"{topic}/{qid}: skipped units {res.skipped[:3]} in a live queue")
                    counts["queue_reads"] += len(res.messages)
                    next_q[(topic, qid)] = res.nextBeginOffset if res.messages else q
                # everything acknowledged before this refresh is visible to it
                acked = list(w.acks)
                r.refresh()
                for a in acked[-50:]:
                    if r.commitlog.get_message(a.phys) is None:
                        errors.append(f"acknowledged message at {a.phys} not visible after refresh")
        finally:
            r.close()
    finally:
        stop.set()
        cli.join(HANG)
        w.kill()
    assert not cli.is_alive(), "the CLI reader did not stop"
    assert not errors, errors[:5]
    assert counts["records"] > 100 and counts["cli"] >= 3, counts
    with MessageStore.open(root, small_cfg(), read_only=False) as s:  # the writer's crash, recovered
        lost = find_lost(s, w.acks)
        assert not lost, lost[:3]
    with MessageStore.open(root) as s:
        assert check_store(s)["ok"]
    FIGURES.add(request, "concurrency/reader-beside-writer", runs=1, faultsInjected=1,
                messagesChecked=counts["records"] + counts["queue_reads"] + counts["cli_messages"],
                refreshes=counts["refresh"], cliRuns=counts["cli"], cliRunsBesideWriter=counts["cli_beside_writer"],
                writerAcks=len(w.acks))


def test_second_writer_is_refused(request, tmp_path):
    skip_unless_linux()
    root = tmp_path / "s"
    MessageStore.create(root, small_cfg()).close()
    w = Writer(root, seed=3, flush="sync")
    try:
        w.wait_for(lambda: len(w.acks) >= 50, "50 acknowledged messages")
        with pytest.raises(StoreLockedError) as e:
            MessageStore.open(root, small_cfg(), read_only=False)
        assert e.value.path and str(w.p.pid) in str(e.value)
        with MessageStore.open(root) as ro:
            assert ro.broker_holding_lock() == w.p.pid
        cq_files = sorted(str(p) for p in (root / "consumequeue").rglob("0000*"))
        for args in (["send", "TopicA", "--body", "x"], ["recover"], ["rebuild", "--yes"]):
            code, out, err = run_cli(args[0], root, *args[1:])
            assert code == 2 and "locked" in err and len(err.strip().splitlines()) == 1, (args, code, err)
        # the refused rebuild deleted nothing under the writer's feet
        assert set(cq_files) <= {str(p) for p in (root / "consumequeue").rglob("0000*")}
    finally:
        w.kill()
    with MessageStore.open(root, small_cfg(), read_only=False) as s:
        with pytest.raises(StoreLockedError):
            MessageStore.open(root, small_cfg(), read_only=False)  # same process, second open
        assert not find_lost(s, w.acks)
    FIGURES.add(request, "concurrency/second-writer", runs=1, faultsInjected=5, messagesChecked=len(w.acks))


def test_reader_opened_on_an_empty_store_follows_the_writer(tmp_path):
    """Opened before any data file existed, the reader only had default sizes: refresh must
    pick the real ones up once the writer creates files (it raised ConfigError)."""
    root = tmp_path / "s"
    MessageStore.create(root, small_cfg()).close()
    with MessageStore.open(root) as r:
        with MessageStore.open(root, small_cfg(), read_only=False) as w:
            res = [w.put_message("T", b"x" * 300, queue_id=0, keys=f"k{i}") for i in range(400)]
            assert r.refresh()
            assert r.max_offset == w.max_offset and r.find_queue("T", 0).max_offset == 400
            assert [m.commitLogOffset for m in r.query_message("T", "k399").messages] == [res[-1].commitLogOffset]
            w.put_message("T2", b"y", queue_id=1)
            assert r.refresh() and r.find_queue("T2", 1).max_offset == 1
