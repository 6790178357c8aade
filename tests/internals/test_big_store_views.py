"""Big stores feel small (issue 20): the segment fill view draws file by file and Cancel keeps
what it drew; the Scan tab's local job answers what the CLI answers, with its progress
coalesced. Small stores, real files, real Qt offscreen."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import Qt  # noqa: E402

from conftest import unpack  # noqa: E402
from engine import MessageStore, StoreConfig  # noqa: E402
from engine import analysis as A  # noqa: E402
from gui.internals.segment_fill import SegmentFillView  # noqa: E402

SHOTS = Path(__file__).resolve().parents[2] / "build" / "screenshots"
FILE = 64 << 10


@pytest.fixture(scope="module")
def many_files(tmp_path_factory):
    """11 commitlog files of 64 KiB: 4 topics x 4 queues in batches (queues interleave in
    the log), a second of single puts round robin, so each file's units come from many queues."""
    root = tmp_path_factory.mktemp("fill") / "store"
    cfg = StoreConfig.from_mapping(dict(mappedFileSizeCommitLog=FILE, mappedFileSizeConsumeQueue=300 * 20))
    with MessageStore.create(root, cfg) as s:
        for b in range(120):
            s.put_messages(f"Topic{b % 4}", [bytes([b]) * (100 + b)] * 8, queue_id=(b // 4) % 4, tags="t")
        for i in range(1200):
            s.put_message(f"Topic{i % 3}", b"x" * (i % 300), tags="u", keys=[f"k{i}"])
    return root


def test_fill_is_the_engine_walk_file_by_file(many_files):
    """The fill from CQ units (cut per commitlog file) records exactly what the engine's walk reads."""
    with MessageStore.open(many_files) as s:
        assert len(s.commitlog.files) >= 10
        parts = []
        task = A.store_fill_task(s, A.CommitLogFillCache())
        while True:
            try:
                p = next(task)
            except StopIteration as stop:
                fill = stop.value
                break
            if isinstance(p, A.FillProgress):
                parts.append(p.fill)
        walked = [(o, r.size, r.message.topic) for o, r in s.walk() if r.message is not None]
        mine = [(c.file_from_offset + int(p), int(z), c.topics[int(t)])
                for c in fill.commitlog for p, z, t in zip(c.record_starts, c.record_sizes, c.record_topics)]
        assert mine == walked
        # a partial fill per file, each the final one's prefix; the queue and index files from the first
        assert [len(p.commitlog) for p in parts] == list(range(len(s.commitlog.files) + 1))
        assert all(p.commitlog == fill.commitlog[:len(p.commitlog)] for p in parts)
        assert len(parts[0].queues) == sum(len(cq.queue.files) for cq in s.queues.values())
        assert len(parts[0].index) == len(s.index.files)
        # every byte of a full file is a topic's run or the blank tail, and the runs add up
        for c in fill.commitlog[:-1]:
            by = c.segments.bytes_by_id()
            assert sum(v for k, v in by.items() if k >= 0) == c.message_bytes
            assert by.get(A.BLANK, 0) == c.blank_tail and sum(by.values()) == c.file_size
            assert A.DAMAGED not in by


def test_segment_fill_view_draws_files_as_they_complete(qtbot, many_files):
    store = MessageStore.open(many_files)
    v = SegmentFillView()
    qtbot.addWidget(v)
    v.resize(1280, 860)
    drawn = []
    v.partial.connect(lambda: drawn.append((len(v.rows("commitlog")), len(v.rows("queue")), v.progress.value())))
    try:
        with qtbot.waitSignal(v.updated, timeout=30000):
            v.set_store(store)
            v.show()
        n = len(store.commitlog.files)
        nq = sum(len(cq.queue.files) for cq in store.queues.values())
        # the queue bars came with the first drawing, before the commitlog was read
        assert drawn and drawn[0] == (0, nq, drawn[0][2])
        assert [d[0] for d in drawn] == sorted(d[0] for d in drawn)
        assert len(v.rows("commitlog")) == n and v.fill is not None and not v.progress.isVisible()
        # the bars drawn are the engine's numbers
        want = A.store_fill(store, A.CommitLogFillCache())
        got = [r.numbers for r in v.rows("commitlog")]
        assert [g["messages"] for g in got] == [c.message_count for c in want.commitlog]
        assert [g["topicBytes"] for g in got] == [c.topic_bytes() for c in want.commitlog]
        assert f"{sum(c.message_count for c in want.commitlog):,} messages" in v.summary.text()
    finally:
        v.background.wait()
        store.close()


def test_segment_fill_cancel_keeps_what_was_drawn(qtbot, many_files):
    """Cancel at the first drawing (the queue and index bars, before any commitlog file: that
    one is always drawn at once): the worker stops, nothing more is drawn, what is there stays."""
    store = MessageStore.open(many_files)
    v = SegmentFillView()
    qtbot.addWidget(v)
    v.resize(1280, 860)
    seen = []

    def on_partial():
        seen.append((len(v.rows("commitlog")), len(v.rows("queue"))))
        if len(seen) == 1:
            v.cancel_button.click()
    v.partial.connect(on_partial)
    try:
        v.set_store(store)
        v.show()
        qtbot.waitUntil(lambda: bool(seen), timeout=30000)
        qtbot.waitUntil(lambda: not v.background.busy, timeout=30000)
        qtbot.wait(200)             # partials or a result still queued for the UI thread are dropped
        nq = sum(len(cq.queue.files) for cq in store.queues.values())
        assert seen == [(0, nq)] and v.fill is None and not v.progress.isVisible()
        assert "cancelled" in v.summary.text() and len(v.rows("queue")) == nq and not v.rows("commitlog")
        with qtbot.waitSignal(v.updated, timeout=30000):
            v.refresh()              # computing again completes
        assert len(v.rows("commitlog")) == len(store.commitlog.files) and v.fill is not None
        SHOTS.mkdir(parents=True, exist_ok=True)
        assert v.grab().save(str(SHOTS / "segment-fill-many-files.png"))
    finally:
        v.background.wait()
        store.close()


def _cli_topic_stats(root, *extra) -> list[dict]:
    p = subprocess.run([sys.executable, "-m", "engine", "scan", "--local", str(root), "topic-stats", "--json", *extra],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["rows"]


@pytest.mark.parametrize("by_queue", [False, True])
def test_scan_tab_local_job_answers_as_the_cli(qtbot, many_files, by_queue):
    """The Scan tab's local topic-stats over the same store is the CLI's answer, row for row;
    per-slice progress (one report per slice here) is drawn coalesced, never once per report."""
    from gui.scan_panel import ScanPanel
    from gui.session import StoreSession
    session = StoreSession()
    session.open_blocking(many_files)
    p = ScanPanel(session)
    qtbot.addWidget(p)
    p.resize(1280, 800)
    p.show()
    received = []
    orig = p._on_progress
    p._on_progress = lambda pr: (received.append(pr), orig(pr))
    try:
        p.engine_box.setCurrentIndex(p.engine_box.findData("local"))
        p.job_box.setCurrentText("topic-stats")
        p.by_queue.setChecked(by_queue)
        p.split_bytes = 4096            # many slices: many progress reports
        with qtbot.waitSignal(p.finished, timeout=60000) as blocker:
            qtbot.mouseClick(p.run_button, Qt.LeftButton)
        gui_rows = blocker.args[0].rows
        cli_rows = _cli_topic_stats(many_files, *(["--by-queue"] if by_queue else []))
        assert gui_rows == cli_rows and len(gui_rows) == (16 if by_queue else 4)
        with MessageStore.open(many_files) as s:
            assert sum(r["messages"] for r in gui_rows) == sum(1 for _, r in s.walk() if r.message is not None)
        assert len(received) > 30 and 1 <= p.progress_shown < len(received)
        assert p.progress_bar.format() == "done" and p.model.rowCount() == len(cli_rows)
    finally:
        session.close()
        assert not p.lane.busy


def test_fill_of_a_fixture_is_unchanged_by_the_file_cut():
    """The default fixture (real RocketMQ files): per-file units give the engine walk's records."""
    with MessageStore.open(unpack("default")) as s:
        fill = A.store_fill(s)
        walked = [(o, r.size) for o, r in s.walk() if r.message is not None]
        mine = [(c.file_from_offset + int(p), int(z)) for c in fill.commitlog
                for p, z, t in zip(c.record_starts, c.record_sizes, c.record_topics) if t >= 0]
        assert mine == walked
        assert np.all(np.diff([c.file_from_offset for c in fill.commitlog]) > 0)


def test_fill_with_a_queue_file_out_of_order(many_files, tmp_path):
    """A damaged queue file whose units do not ascend (two swapped) and one unit pointing at a
    record another queue names: the fill still records exactly what the engine's walk reads."""
    import shutil
    root = tmp_path / "store"
    shutil.copytree(many_files, root)
    q = root / "consumequeue" / "Topic1" / "2" / "00000000000000000000"
    b = bytearray(q.read_bytes())
    b[20 * 3:20 * 4], b[20 * 7:20 * 8] = b[20 * 7:20 * 8], b[20 * 3:20 * 4]       # units 3 and 7 swapped
    other = (root / "consumequeue" / "Topic0" / "0" / "00000000000000000000").read_bytes()
    b[20 * 10:20 * 10 + 12] = other[20 * 5:20 * 5 + 12]                          # unit 10 = Topic0/0's unit 5
    q.write_bytes(bytes(b))
    with MessageStore.open(root) as s:
        fill = A.store_fill(s)
        walked = [(o, r.size, r.message.topic) for o, r in s.walk() if r.message is not None]
        mine = [(c.file_from_offset + int(p), int(z), c.topics[int(t)])
                for c in fill.commitlog for p, z, t in zip(c.record_starts, c.record_sizes, c.record_topics)]
        assert mine == walked
