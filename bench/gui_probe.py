"""Run in a fresh process (offscreen Qt): the browser window on a store; prints one JSON line.

    python -m bench.gui_probe STORE TOPIC QUEUE_ID   # open read-only, show the queue, paint it
    python -m bench.gui_probe --first-page STORE     # open as a user does: the window's own first
                                                     # queue in the Messages tab, until its rows paint
    python -m bench.gui_probe --fill STORE           # Internals > segment fill, until drawn
    python -m bench.gui_probe --scan STORE [N]       # Scan tab: local topic-stats, N runs
    python -m bench.gui_probe --first-spark-job STORE [DELAY]   # Scan tab shown at the open, Spark
                                                     # topic-stats run DELAY s (10) after the open,
                                                     # against the same job from the CLI (twice)

Times run from the action (open, show, Run) to what the user sees, on the UI thread's clock."""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def _app():
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication
    return QApplication.instance() or QApplication([])


def _window(tmp: str):
    from PySide6.QtCore import QSettings
    from gui.main_window import MainWindow
    w = MainWindow(settings=QSettings(os.path.join(tmp, "settings.ini"), QSettings.IniFormat))
    w.resize(1440, 900)
    w.show()
    return w


def _open(w, root: str) -> float:
    """Open read-only and wait for the window's storeOpened; seconds."""
    from PySide6.QtCore import QEventLoop, QTimer
    loop = QEventLoop()
    opened = []
    w.storeOpened.connect(lambda s: (opened.append(s), loop.quit()))
    QTimer.singleShot(3_600_000, loop.quit)
    t0 = time.perf_counter()
    w.open_store(root, read_only=True)
    if not opened:
        loop.exec()
    return time.perf_counter() - t0


def _quiet(w, app, timeout: float = 300) -> dict | None:
    """Wait until the window's own background work after the open (the index chain copies,
    gui/chain_copies.py) is done, so the action that follows is timed alone, its CPU included.
    Returns what that work reported."""
    end = time.perf_counter() + timeout
    while w.chain_copies.busy and time.perf_counter() < end:
        app.processEvents()
        time.sleep(0.01)
    return w.chain_copies.result


def main(root: str, topic: str, qid: int) -> None:
    t_process = time.perf_counter()
    app = _app()
    with tempfile.TemporaryDirectory() as tmp:
        w = _window(tmp)
        app.processEvents()
        t_imports = time.perf_counter()
        t0 = time.perf_counter()
        t_open = _open(w, root) + t0
        w.show_queue(topic, qid, None)
        w.browser.table.viewport().grab()  # paints the visible page now
        t_paint = time.perf_counter()
        model = w.browser.model
        rows, loaded = model.rowCount(), model.is_loaded(0)
        w.session.close()
        w.session.wait_open()
    print(json.dumps({"openToFirstPaintSeconds": t_paint - t0, "openSeconds": t_open - t0,
                      "startupSeconds": t_imports - t_process, "rows": rows, "firstPageLoaded": loaded}))


def first_page(root: str) -> dict:
    """Open from the window and wait for the Messages table's first paint with its first page
    loaded: the queue the window picks itself (the biggest of the biggest topic)."""
    from PySide6.QtCore import QEvent, QEventLoop, QObject, QTimer
    t_process = time.perf_counter()
    app = _app()
    with tempfile.TemporaryDirectory() as tmp:
        w = _window(tmp)
        w.tabs.setCurrentWidget(w.browser)
        app.processEvents()
        t_imports = time.perf_counter()
        loop = QEventLoop()
        painted: list[float] = []
        model = w.browser.model

        class Painted(QObject):
            def eventFilter(self, obj, ev):
                if ev.type() == QEvent.Paint and not painted and model.rowCount() and model.is_loaded(0):
                    QTimer.singleShot(0, lambda: (painted.append(time.perf_counter()), loop.quit()))
                return False
        spy = Painted()
        w.browser.table.viewport().installEventFilter(spy)
        QTimer.singleShot(600_000, loop.quit)
        t0 = time.perf_counter()
        t_open = _open(w, root)
        if not painted:
            loop.exec()
        out = {"openToFirstPaintSeconds": (painted[0] - t0) if painted else None, "openSeconds": t_open,
               "startupSeconds": t_imports - t_process, "topic": model.topic, "queueId": model.queue_id,
               "rows": model.rowCount(), "firstPageLoaded": model.is_loaded(0)}
        w.session.close()
        w.session.wait_open()
    return out


def fill(root: str) -> dict:
    """Internals > segment fill on the open store: to the first drawing, to the first commitlog
    file drawn, and to the whole fill drawn."""
    from PySide6.QtCore import QEventLoop, QTimer
    app = _app()
    from engine import MessageStore
    from gui.internals.segment_fill import SegmentFillView
    store = MessageStore.open(root)
    v = SegmentFillView()
    v.resize(1400, 900)
    v.show()
    app.processEvents()
    loop = QEventLoop()
    marks: list[tuple[float, int]] = []
    t0 = 0.0
    v.partial.connect(lambda: marks.append((time.perf_counter() - t0, len(v.rows("commitlog")))))
    v.updated.connect(loop.quit)
    QTimer.singleShot(600_000, loop.quit)
    t0 = time.perf_counter()
    v.set_store(store)
    loop.exec()
    done = time.perf_counter() - t0
    first_file = next((t for t, n in marks if n >= 1), done)
    out = {"fillSeconds": done, "firstDrawingSeconds": marks[0][0] if marks else None,
           "firstCommitLogFileSeconds": first_file, "partialDrawings": len(marks),
           "commitlogFiles": len(v.rows("commitlog")), "queueFiles": len(v.rows("queue")),
           "messages": sum(r.numbers["messages"] for r in v.rows("commitlog"))}
    v.background.wait()
    store.close()
    return out


def scan(root: str, runs: int = 1) -> dict:
    """The Scan tab, local engine, topic-stats: Run click to the rows in the table."""
    from PySide6.QtCore import QEventLoop, QTimer
    app = _app()
    with tempfile.TemporaryDirectory() as tmp:
        w = _window(tmp)
        _open(w, root)
        copies = _quiet(w, app)
        w.tabs.setCurrentWidget(w.scans)
        app.processEvents()
        p = w.scans.ensure()
        p.engine_box.setCurrentIndex(p.engine_box.findData("local"))
        p.job_box.setCurrentText("topic-stats")
        walls, jobs, cpus = [], [], []
        for _ in range(runs):
            loop = QEventLoop()
            p.finished.connect(loop.quit)
            QTimer.singleShot(3_600_000, loop.quit)
            t0, c0 = time.perf_counter(), time.process_time()   # every thread of the process: UI's too
            p.run()
            loop.exec()
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
            jobs.append(p.last_result.seconds)
            p.finished.disconnect(loop.quit)
        rows = p.last_result.rows
        out = {"seconds": min(walls), "runs": [round(x, 3) for x in walls], "jobSeconds": min(jobs), "cpu": min(cpus),
               "messages": sum(r["messages"] for r in rows), "rows": rows, "progressShown": p.progress_shown,
               "chainCopiesBeforeRun": copies}
        w.session.close()
        w.session.wait_open()
    return out


def first_spark_job(root: str, delay: float = 10.0, job: str = "topic-stats") -> dict:
    """The issue's measure: the store opened, the Scan tab shown (the local Spark starts in the
    background), the job run `delay` seconds after the open began; its wall time from Run to
    the rows (firstGuiJobSeconds), then the same job again (secondGuiJobSeconds). Then the same
    job from the CLI, twice, each a process of its own that starts its own Spark (cliJobSeconds:
    the second, warm run's wall time; cliColdJobSeconds the first's; cliReportedJobSeconds what
    the warm run reports for the job itself, without Python's and Spark's start)."""
    import re
    import subprocess
    from PySide6.QtCore import QEventLoop, QTimer
    app = _app()
    from gui import spark_warmup
    warm = spark_warmup.instance()
    warm.enabled = True
    out: dict = {"job": job, "delaySeconds": delay}
    with tempfile.TemporaryDirectory() as tmp:
        w = _window(tmp)
        app.processEvents()
        t0 = time.perf_counter()
        out["openSeconds"] = _open(w, root)
        w.tabs.setCurrentWidget(w.scans)
        p = w.scans.ensure()
        p.job_box.setCurrentText(job)
        app.processEvents()
        while time.perf_counter() < t0 + delay:
            app.processEvents()
            time.sleep(0.01)
        out["sparkStateAtRun"] = warm.state
        walls = []
        for _ in range(2):
            loop = QEventLoop()
            p.finished.connect(loop.quit)
            QTimer.singleShot(1_800_000, loop.quit)
            t = time.perf_counter()
            p.run()
            loop.exec()
            walls.append(time.perf_counter() - t)
            p.finished.disconnect(loop.quit)
        out.update({"firstGuiJobSeconds": walls[0], "secondGuiJobSeconds": walls[1],
                    "firstGuiJobReportedSeconds": p.last_result.seconds if p.last_result else None,
                    "sparkStartSeconds": warm.seconds, "sparkSessionUpSeconds": warm.jvm_seconds, "master": p.last_result.master if p.last_result else None,
                    "rows": len(p.last_result.rows) if p.last_result else None})
        w.session.close()
        w.session.wait_open()
    from engine.scan.api import stop_spark
    stop_spark()   # the CLI's runs below have the machine to themselves
    cli = []
    for _ in range(2):
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "engine", "scan", root, job], capture_output=True, text=True)
        wall = time.perf_counter() - t
        m = re.search(r"in ([0-9.]+) s\s*$", r.stdout.strip())
        cli.append((wall, float(m.group(1)) if m else None, r.returncode))
    out.update({"cliColdJobSeconds": cli[0][0], "cliJobSeconds": cli[1][0], "cliReportedJobSeconds": cli[1][1],
                "cliExit": cli[1][2]})
    out["firstGuiToCliRatio"] = out["firstGuiJobSeconds"] / out["cliJobSeconds"]
    return out


if __name__ == "__main__":
    a = sys.argv[1:]
    if a and a[0] == "--first-page":
        print(json.dumps(first_page(a[1])))
    elif a and a[0] == "--fill":
        print(json.dumps(fill(a[1])))
    elif a and a[0] == "--first-spark-job":
        print(json.dumps(first_spark_job(a[1], float(a[2]) if len(a) > 2 else 10.0)))
    elif a and a[0] == "--scan":
        print(json.dumps(scan(a[1], int(a[2]) if len(a) > 2 else 1)))
    else:
        main(a[0], a[1], int(a[2]))
