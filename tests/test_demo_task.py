"""The demo store as a task: progress in messages written, cancel leaves no half store, the
old entry points still work, the same seed writes the same messages, the store it writes has
every kind of content it promises and passes `check`, and `rmqstore demo` reports progress
(count, rate, ETA) on stderr only when asked or on a terminal, never on stdout."""
from __future__ import annotations

import io
import json

import pytest

from conftest import as_typed_at_a_terminal
from engine import MessageStore
from engine.format import properties as P
from engine.format.message import SCHEDULE_TOPIC
from engine.store.demo import (MARKER, PROGRESS_EVERY, RETRY_EVERY, demo_data, demo_messages, demo_task,
                               ensure_demo_store, generate_demo_store)
from engine.tasks import Cancelled, CancelToken, Progress, run


def test_progress_counts_the_messages_written(tmp_path):
    seen = []
    root = run(demo_task(tmp_path / "d", messages=1000), seen.append)
    assert root == tmp_path / "d" and (root / MARKER).exists()
    done = [p.done for p in seen]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 1000
    assert {p.total for p in seen} == {1000} and {p.unit for p in seen} == {"messages"}
    assert len(seen) == 1000 // PROGRESS_EVERY + 2 - (1000 % PROGRESS_EVERY == 0)
    with MessageStore.open(root) as store:
        assert sum(q["maxOffset"] for q in store.queue_list()) >= 1000


def test_cancel_stops_the_writer_and_removes_the_half_store(tmp_path):
    cancel = CancelToken()
    task = demo_task(tmp_path / "d", messages=100_000, cancel=cancel)
    seen = []
    with pytest.raises(Cancelled):
        for p in task:
            seen.append(p.done)
            if p.done >= 2 * PROGRESS_EVERY:
                cancel.cancel()
    assert seen[-1] == 2 * PROGRESS_EVERY             # stopped at the next step, not at the end
    assert not (tmp_path / "d").exists()


def test_closing_the_task_removes_the_half_store_too(tmp_path):
    task = demo_task(tmp_path / "d", messages=100_000)
    for p in task:
        if p.done:
            break
    task.close()                                       # what the GUI's runner does on Cancel
    assert not (tmp_path / "d").exists()


def test_wrappers_still_answer(tmp_path):
    assert generate_demo_store(tmp_path / "a", messages=300) == tmp_path / "a"
    assert (tmp_path / "a" / MARKER).exists()
    before = (tmp_path / "a" / MARKER).stat().st_mtime_ns
    assert ensure_demo_store(tmp_path / "a") == tmp_path / "a"
    assert (tmp_path / "a" / MARKER).stat().st_mtime_ns == before   # there already: not written again


def test_cli_demo_progress_goes_to_stderr_when_asked(tmp_path, capsys):
    from engine.cli.app import main as rmqstore
    assert rmqstore(["demo", str(tmp_path / "d"), "--messages", "5000", "--progress"]) == 0
    out = capsys.readouterr()
    assert out.out == f"demo store written to {tmp_path / 'd'}\n"
    lines = out.err.splitlines()
    assert lines[0].startswith("writing the demo store in")
    # not a terminal: whole lines, the last one final with the average rate and the time taken
    assert lines[-1].startswith("demo: 5,000/5,000 messages, ") and lines[-1].endswith(" s")
    assert " messages/s, " in lines[-1]
    assert "\r" not in out.err and len(lines) <= 4     # about one a second, not one per report


def test_cli_demo_json_stays_clean_and_quiet_without_a_terminal(tmp_path, capsys):
    from engine.cli.app import main as rmqstore
    assert rmqstore(["demo", str(tmp_path / "d"), "--messages", "3000", "--json"]) == 0
    out = capsys.readouterr()
    assert out.err == ""                               # stderr is no terminal and --progress not given
    assert json.loads(out.out) == {"store": str(tmp_path / "d"), "messages": 3000, "seed": 7}
    assert rmqstore(["demo", str(tmp_path / "e"), "--messages", "3000", "--json", "--progress"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["store"] == str(tmp_path / "e")   # stdout: the one JSON line only
    assert out.err.splitlines()[-1].startswith("demo: 3,000/3,000 messages, ")


def test_cli_demo_refuses_bad_input_with_one_line(tmp_path, capsys):
    from engine.cli.app import main as rmqstore
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "file").write_text("x")
    for argv in (["demo", str(tmp_path / "full")], ["demo", str(tmp_path / "file")],
                 ["demo", str(tmp_path / "n"), "--messages", "-1"], ["demo", str(tmp_path / "s"), "--seed", "-3"]):
        assert rmqstore(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("rmqstore: error: ") and err.count("\n") == 1
    assert (tmp_path / "full" / "x").read_text() == "x" and (tmp_path / "file").read_text() == "x"
    assert not (tmp_path / "n").exists() and not (tmp_path / "s").exists()


class _Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_rate_progress_on_a_terminal_shows_count_rate_and_eta():
    from engine.cli.output import rate_progress
    out, clock = io.StringIO(), _Clock()
    show = rate_progress(out, tty=True, clock=clock)
    show(Progress(0, 100_000, "demo", "messages", message="writing the demo store in X"))
    clock.now += 2.0
    show(Progress(40_000, 100_000, "demo", "messages"))    # 20,000/s: 60,000 left take 3 s
    clock.now += 0.01
    show(Progress(40_500, 100_000, "demo", "messages"))    # within 0.1 s of the last line: not drawn
    clock.now += 3.0                                   # 5.01 s in all
    show(Progress(100_000, 100_000, "demo", "messages"))
    text = out.getvalue()
    assert text.count("\r") == 3 and text.endswith("\n") and text.count("\n") == 1
    parts = [p.rstrip() for p in text.split("\r")[1:]]
    assert parts[0] == "writing the demo store in X"
    assert parts[1] == "demo: 40,000/100,000 messages (40%), 20,000 messages/s, ETA 0:03"
    assert parts[2] == "demo: 100,000/100,000 messages, 19,960 messages/s, 5.0 s"


def test_same_seed_same_messages_other_seed_other_messages(tmp_path):
    def content(root):
        with MessageStore.open(root) as store:
            rows = []
            for m in (r.message for _, r in store.walk() if r.message is not None):   # BLANKs at file ends
                props = {k: v for k, v in m.properties.items() if k != P.UNIQ_KEY}
                rows.append((m.topic, m.queueId, m.queueOffset, m.body, sorted(props.items())))
            offsets = store.consumer_offsets()
        return rows, offsets
    n = 2 * PROGRESS_EVERY + 1000                       # three draws; more than one commitlog file
    a = content(generate_demo_store(tmp_path / "a", messages=n, seed=11))
    b = content(generate_demo_store(tmp_path / "b", messages=n, seed=11))
    c = content(generate_demo_store(tmp_path / "c", messages=n, seed=12))
    assert len(a[0]) > n and a == b
    assert [r[3] for r in a[0]] != [r[3] for r in c[0]]
    # the bench's reference puts exactly the messages the demo writes
    drawn = [m for chunk in demo_messages(n, seed=11) for m in chunk]
    written = [(t, q, body) for t, q, _, body, _ in a[0] if t != SCHEDULE_TOPIC and body.startswith(b'{"orderId"')]
    assert [(t, q, body) for t, body, q, _, _ in drawn] == written


def test_the_demo_store_has_every_kind_it_promises_and_passes_check(tmp_path, capsys):
    root = generate_demo_store(tmp_path / "d", messages=12000)
    data = demo_data()
    with MessageStore.open(root) as store:
        msgs = [r.message for _, r in store.walk() if r.message is not None]
        lag = store.consumer_lag()
    plain = [m for m in msgs if m.body.startswith(b'{"orderId"') and m.topic != SCHEDULE_TOPIC]
    assert len(plain) == 12000 and {m.topic for m in plain} == set(data["topics"])
    bodies = [json.loads(m.body) for m in plain]        # JSON bodies, cities in UTF-8 (not \u escapes)
    assert [b["seq"] for b in bodies] == list(range(12000))
    assert {b["city"] for b in bodies} == set(data["cities"]) and "東京".encode() in b"".join(m.body for m in plain)
    assert all(m.properties[P.KEYS].split(" ")[0] == b["orderId"] for m, b in zip(plain, bodies))
    assert any(" user-" in m.properties[P.KEYS] for m in plain)
    tags = {m.properties.get(P.TAGS) for m in plain}
    assert {"注册", "激活", "Created", "Alipay"} <= tags and None in tags     # CJK tags; AuditLog has none
    for m in plain:
        spec = data["topics"][m.topic]
        assert m.queueId < spec["queues"] and m.properties.get(P.TAGS) in (spec["tags"] or [None])
    assert 10 <= sum("traceId" in m.properties for m in plain) <= 100        # a tracer's sample
    delayed = [m for m in msgs if m.topic == SCHEDULE_TOPIC]
    assert len(delayed) == len(range(0, 12000, RETRY_EVERY))
    assert {(m.properties[P.REAL_TOPIC], m.properties[P.DELAY], m.queueId) for m in delayed} == \
        {("%RETRY%cg_billing", "3", 2)}
    assert sum(m.topic == "InventorySync" and m.body.startswith(b'{"batch"') for m in msgs) == 5 * 24
    stamps = [m.storeTimestamp for m in msgs]
    assert stamps == sorted(stamps) and stamps[-1] - stamps[0] > 3600 * 1000   # hours of traffic
    assert {r["group"] for r in lag} == set(data["groups"]) and any(r["lag"] > 0 for r in lag)
    assert all(0 <= r["consumerOffset"] <= r["maxOffset"] for r in lag)
    from engine.cli.app import main as rmqstore
    assert rmqstore(["check", str(root)]) == 0
    assert capsys.readouterr().out.startswith(f"OK: {len(msgs)} messages, {len(msgs)} CQ units")


def test_cancel_in_an_empty_folder_the_caller_made_keeps_it_empty(tmp_path):
    cancel = CancelToken()
    target = tmp_path / "mine"
    target.mkdir()
    with pytest.raises(Cancelled):
        for p in demo_task(target, messages=100_000, cancel=cancel):
            if p.done:
                cancel.cancel()
    assert target.is_dir() and list(target.iterdir()) == []


def test_cli_demo_on_a_terminal_keeps_one_line_current(tmp_path):
    """stderr a real terminal (a pty), stdout a pipe: the progress line is redrawn with \\r on
    the terminal, stdout gets the result only."""
    import os
    import pty
    import subprocess
    import sys
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "engine", "demo", str(tmp_path / "d"), "--messages", "10000"],
                              stdout=subprocess.PIPE, stderr=slave, timeout=120)
        os.close(slave)
        err = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:       # EIO: the terminal's other side is closed and drained
                break
            if not chunk:
                break
            err += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0 and proc.stdout == f"demo store written to {tmp_path / 'd'}\n".encode()
    text = err.decode()
    assert text.startswith("\rwriting the demo store in") and text.endswith("\n") and text.count("\n") == 1
    assert "\rdemo: 10,000/10,000 messages, " in text


def test_ctrl_c_in_the_cli_leaves_no_half_store(tmp_path):
    import signal
    import subprocess
    import sys
    target = tmp_path / "d"
    proc = subprocess.Popen([sys.executable, "-m", "engine", "demo", str(target), "--messages", "5000000", "--progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=as_typed_at_a_terminal)
    try:
        lines = [proc.stderr.readline(), proc.stderr.readline()]   # the start, then a count: writing
        assert lines[0].startswith("writing the demo store in") and lines[1].startswith("demo: ")
        assert target.exists()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130 and out == ""
    assert not target.exists()
