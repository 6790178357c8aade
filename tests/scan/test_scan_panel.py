"""The scan panel driven with qtbot: a Spark job runs off the UI thread and its rows and plot
show; Cancel stops a slow job; a local job works without Spark; a screenshot for review."""
import pytest

pytest.importorskip("PySide6")
from PySide6.QtCore import Qt  # noqa: E402

from conftest import manifest, unpack  # noqa: E402
from gui.scan_panel import CategoryAxis  # noqa: E402
from scan_support import SHOTS, SPARK_MASTER, panel, spark  # noqa: E402,F401


def test_local_job_without_spark(qtbot, panel):
    panel.engine_box.setCurrentIndex(panel.engine_box.findData("local"))
    panel.job_box.setCurrentText("size-histogram")
    with qtbot.waitSignal(panel.finished, timeout=30_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    assert blocker.args[0].engine == "local"
    assert sum(r["messages"] for r in panel.model.rows) == len(manifest("small")["messages"])
    assert panel.plot.isVisible() and panel.run_button.isEnabled() and not panel.cancel_button.isEnabled()


def test_cancel_stops_a_slow_local_scan(qtbot, panel):
    """Progress is shown while a local scan runs, and Cancel stops its thread, not just the view."""
    import threading
    panel.engine_box.setCurrentIndex(panel.engine_box.findData("local"))
    panel.job_box.setCurrentText("topic-stats")
    panel.split_bytes, panel.throttle_ms = 4096, 100     # many slices, each slow
    qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.progress_bar.value() >= 2, timeout=30_000)
    assert panel.progress_bar.maximum() > 2 and "slices" in panel.progress_bar.format()
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(SHOTS / "scan-panel-progress.png"))
    scanning = [t for t in threading.enumerate() if t.name.startswith("rmqstore-scan-")]
    assert scanning and panel.cancel_button.isEnabled()
    qtbot.mouseClick(panel.cancel_button, Qt.LeftButton)
    # (the task's end reaches the lane a signal after its "Cancelled": both are waited for)
    qtbot.waitUntil(lambda: panel.status_label.text() == "Cancelled" and not panel.lane.busy, timeout=10_000)
    assert not any(t.is_alive() for t in scanning)    # the job's own thread has stopped
    assert panel.run_button.isEnabled() and panel.last_result is None and not panel.lane.busy


@pytest.mark.spark
def test_spark_job_shows_rows_plot_and_screenshot(qtbot, panel, spark):
    panel.job_box.setCurrentText("traffic")
    panel.bucket_box.setCurrentText("1s")
    assert panel.fields["bucket"][1].isVisible() and not panel.fields["body"][1].isVisible()
    with qtbot.waitSignal(panel.finished, timeout=120_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
        assert panel.cancel_button.isEnabled() and not panel.run_button.isEnabled()
    result = blocker.args[0]
    assert result.engine == "spark" and result.master == SPARK_MASTER
    assert panel.model.rowCount() == len(result.rows) == 92
    assert panel.model.columns == ["topic", "bucketStart", "messages", "bytes"]
    assert "92 row(s)" in panel.status_label.text()
    assert panel.plot.isVisible() and len(panel.plot.listDataItems()) == 9
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(SHOTS / "scan-panel.png"))


@pytest.mark.spark
def test_cancel_button_stops_a_slow_spark_job(qtbot, panel, spark):
    panel.job_box.setCurrentText("topic-stats")
    panel.split_bytes, panel.throttle_ms = 4096, 400     # hundreds of slow tasks
    qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.progress_bar.maximum() >= 100 and panel.progress_bar.value() > 0, timeout=60_000)
    qtbot.mouseClick(panel.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: panel.status_label.text() == "Cancelled", timeout=10_000)
    assert panel.run_button.isEnabled() and panel.last_result is None
    panel.split_bytes, panel.throttle_ms = None, 0
    panel.job_box.setCurrentText("top-tags")
    with qtbot.waitSignal(panel.finished, timeout=60_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    assert len(blocker.args[0].rows) == 20 and panel.model.rowCount() == 20


def test_via_consume_queue_checkbox(qtbot, panel):
    """The checkbox reads the chosen queues through their ConsumeQueue units: the rows are
    what the real store dispatched (no PREPARED/ROLLBACK or undispatched records); it is
    offered only with a topic or queue ids, and not for consistency."""
    panel.engine_box.setCurrentIndex(panel.engine_box.findData("local"))
    panel.job_box.setCurrentText("topic-stats")
    assert panel.via_cq.isVisible() and not panel.via_cq.isEnabled()
    panel.queue_edit.setText("1")
    assert panel.via_cq.isEnabled()
    want, everything = {}, {}
    for m in manifest("small")["messages"]:
        if m["queueId"] == 1:
            everything[m["topic"]] = everything.get(m["topic"], 0) + 1
            if m["consumeQueueEntries"]:
                want[m["topic"]] = want.get(m["topic"], 0) + 1
    assert want != everything   # the fixture has records in queue 1 no ConsumeQueue names
    for checked, expected in ((True, want), (False, everything)):
        panel.via_cq.setChecked(checked)
        with qtbot.waitSignal(panel.finished, timeout=30_000):
            qtbot.mouseClick(panel.run_button, Qt.LeftButton)
        assert {r["topic"]: r["messages"] for r in panel.model.rows} == expected, checked
    panel.job_box.setCurrentText("consistency")
    assert not panel.via_cq.isVisible() and not panel.params().via_consume_queue


def test_topic_bars_are_named_without_overlap(qtbot, panel):
    panel.engine_box.setCurrentIndex(panel.engine_box.findData("local"))
    panel.job_box.setCurrentText("topic-stats")
    with qtbot.waitSignal(panel.finished, timeout=30_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    rows = blocker.args[0].rows
    axis = panel.plot.getAxis("bottom")
    assert isinstance(axis, CategoryAxis) and axis.labels == [r["topic"] for r in rows]
    qtbot.wait(50)
    shown = axis.tickStrings(axis.tickValues(*panel.plot.viewRange()[0], axis.geometry().width())[0][1], 1, 1)
    assert len(shown) == len(rows) and any("…" in t for t in shown)   # every bar named, long ones elided
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(SHOTS / "scan-panel-topics.png"))


def test_every_result_column_is_reachable(qtbot, panel):
    """A filter's rows are wider than the view: each column is sized to its contents (header
    included, within the panel's bounds), the last one is not stretched over the others, and
    the table scrolls sideways to the last column."""
    from gui.scan_panel import MAX_COLUMN, MIN_COLUMN
    panel.engine_box.setCurrentIndex(panel.engine_box.findData("local"))
    panel.job_box.setCurrentText("filter")
    panel.topic_edit.setText("TopicTest")
    with qtbot.waitSignal(panel.finished, timeout=30_000):
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    table, header = panel.table, panel.table.horizontalHeader()
    cols = panel.model.columns
    assert len(cols) >= 10 and panel.model.rowCount() > 0
    widths = [header.sectionSize(c) for c in range(len(cols))]
    assert all(MIN_COLUMN <= w <= MAX_COLUMN for w in widths), dict(zip(cols, widths))
    assert not header.stretchLastSection()
    fm = header.fontMetrics()
    for c, name in enumerate(cols):   # every header readable (names are short)
        assert header.sectionSize(c) >= min(MAX_COLUMN, fm.horizontalAdvance(name)), name
    bar = table.horizontalScrollBar()
    assert sum(widths) > table.viewport().width()
    qtbot.waitUntil(lambda: bar.maximum() > 0, timeout=2000)   # the scroll range follows the layout
    bar.setValue(bar.maximum())
    qtbot.wait(20)
    last = len(cols) - 1
    x = table.columnViewportPosition(last)
    assert 0 <= x and x + header.sectionSize(last) <= table.viewport().width() + 1   # the last column in view
    SHOTS.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(SHOTS / "scan-panel-columns.png"))


@pytest.mark.spark
@pytest.mark.restarts_spark
def test_spark_starts_in_the_background_and_is_reused(qtbot, panel, spark, monkeypatch, tmp_path, capfd):
    """Shown with a store open, the tab starts Spark in the background (the status bar says so,
    with Cancel) while the UI thread keeps serving events; a job submitted meanwhile shows
    "starting Spark…" and runs on that session; another store reuses it; a cancelled start
    ends the JVM once it is up. The JVM's output goes to the Spark log, not the terminal."""
    import time

    from PySide6.QtCore import QTimer

    from engine.scan.api import spark_state, stop_spark
    from engine.scan.spark_session import running_session
    from gui import spark_warmup
    log = tmp_path / "spark.log"
    monkeypatch.setenv("RMQSTORE_SPARK_LOG", str(log))
    stop_spark()                                     # the run's session, started again below
    assert spark_state() is None
    warm = spark_warmup.instance()
    monkeypatch.setattr(warm, "enabled", True)
    status = spark_warmup.SparkStatus(warm)
    qtbot.addWidget(status)
    status.show()
    panel.memory_edit.setText("512m")                # the run's session size (scan_support)

    gaps, last = [], [time.perf_counter()]
    ticker = QTimer()
    ticker.timeout.connect(lambda: (gaps.append(time.perf_counter() - last[0]), last.__setitem__(0, time.perf_counter())))
    ticker.start(20)
    assert panel.warm_up() and warm.state == spark_warmup.STARTING
    assert status.isVisible() and status.cancel_button.isVisible() and "starting" in status.label.text()
    qtbot.wait(1500)
    panel.job_box.setCurrentText("topic-stats")
    # listen before the click: a job on a session that came up meanwhile can finish before a later wait starts
    with qtbot.waitSignal(panel.finished, timeout=240_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: "starting Spark" in panel.status_label.text() or panel.last_result is not None,
                        timeout=5000)
    ticker.stop()
    assert blocker.args[0].engine == "spark" and blocker.args[0].master == SPARK_MASTER
    assert max(gaps) < 1.0, f"the UI thread stalled {max(gaps):.2f} s while Spark started"
    qtbot.waitUntil(lambda: warm.state == spark_warmup.READY, timeout=60_000)
    app_id = running_session().sparkContext.applicationId

    panel.session.close()                            # another store: the same session
    panel.session.open_blocking(unpack("v5"))
    assert panel.warm_up() and warm.state == spark_warmup.READY and not warm.busy
    with qtbot.waitSignal(panel.finished, timeout=120_000) as blocker:
        qtbot.mouseClick(panel.run_button, Qt.LeftButton)
    assert blocker.args[0].engine == "spark" and running_session().sparkContext.applicationId == app_id

    stop_spark()                                     # a cancelled start: the JVM is ended once up
    assert panel.warm_up() and warm.state == spark_warmup.STARTING
    qtbot.mouseClick(status.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: warm.state == spark_warmup.CANCELLED, timeout=240_000)
    assert status.label.text() == "Spark start cancelled" and not status.cancel_button.isVisible()
    assert warm.wait(120_000)
    assert spark_state() is None

    err = capfd.readouterr().err
    assert "Traceback" not in err and "WARNING: Using incubator modules" not in err, err[-2000:]
    assert log.exists() and "incubator" in log.read_text(errors="replace")   # the JVM's stderr, kept


def test_scan_of_a_crashed_dledger_store_reads_its_files(qtbot):
    """The session serves a crashed DLedger store as the restarted broker would (units and an
    index file only memory holds: engine.store.dledger_reput); the Scan tab reads the files, as
    the CLI's scan does, so its consistency rows are the CLI's."""
    from gui.scan_panel import ScanPanel
    from gui.session import StoreSession
    from engine.scan.api import JobParams, open_scan_store, run_job
    root = unpack("dledger_crashed")
    session = StoreSession()
    session.open_blocking(root)
    assert session.store.commitlog.restart is not None and session.store.commitlog.restart.units
    p = ScanPanel(session)
    qtbot.addWidget(p)
    p.show()
    try:
        p.engine_box.setCurrentIndex(p.engine_box.findData("local"))
        p.job_box.setCurrentText("consistency")
        with qtbot.waitSignal(p.finished, timeout=60_000):
            qtbot.mouseClick(p.run_button, Qt.LeftButton)
        with open_scan_store(str(root)) as files:
            want = run_job(files, "consistency", JobParams(), engine="local").rows
        assert p.model.rows == want and want   # the reput's units are missing from the files
    finally:
        p.cancel()
        session.close()
