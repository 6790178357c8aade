"""The demo store as a task: progress in messages written, cancel leaves no half store, the
old entry points still work, and `rmqstore demo` reports progress on stderr."""
from __future__ import annotations

import pytest

from engine import MessageStore
from engine.store.demo import MARKER, PROGRESS_EVERY, demo_task, ensure_demo_store, generate_demo_store
from engine.tasks import Cancelled, CancelToken, run


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


def test_cli_demo_prints_progress_on_stderr(tmp_path, capsys):
    from engine.cli.app import main as rmqstore
    assert rmqstore(["demo", str(tmp_path / "d"), "--messages", "2000"]) == 0
    out = capsys.readouterr()
    assert "demo store written to" in out.out
    lines = out.err.splitlines()
    assert lines[0].startswith("writing the demo store in")
    assert lines[-1] == "demo: 2,000/2,000 messages"   # not a terminal: whole lines, the last one final
    assert "\r" not in out.err and len(lines) <= 4     # about one a second, not one per report
