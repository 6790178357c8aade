"""Spark started before the user asks for it: the Scan tab's local SparkSession is started in
the background as soon as a store is open and the tab is shown (engine.scan's warm_up_task:
the JVM, then one tiny job so the Python workers and the data sources are warm too).

There is one per process (one JVM per process: pyspark's rule), shared by every window and
every store: the session outlives the store that was open when it started. It runs on a
daemon thread of its own, never the session's runner, so browsing never waits for it, and
quitting never waits for a JVM still starting (the JVM ends with the process).
Its state is a label in the status bar with a Cancel button. A job submitted while Spark
starts waits for the same session (it shows "starting Spark…"); a cancel with no job
waiting ends the JVM once it is up (starting it cannot be interrupted).

Only the application (gui.app) turns it on, or RMQSTORE_SPARK_WARMUP=1; RMQSTORE_SPARK_WARMUP=0
turns it off. Tests and embedders that build windows get no JVM they did not ask for."""
from __future__ import annotations

import os
import threading
import time

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication, QHBoxLayout, QLabel, QToolButton, QWidget

from engine.tasks import Cancelled, CancelToken

IDLE, STARTING, READY, FAILED, CANCELLED = "idle", "starting", "ready", "failed", "cancelled"


def enabled_by_env(default: bool) -> bool:
    v = os.environ.get("RMQSTORE_SPARK_WARMUP", "").strip()
    return default if not v else v not in ("0", "false", "no", "off")


def warmable(master: str) -> bool:
    """A local master (a JVM in this process); clusters and Spark Connect are not started here."""
    return (master or "local[*]").startswith("local")


class SparkWarmup(QObject):
    """The process's background Spark start. `state` is one of IDLE, STARTING, READY, FAILED,
    CANCELLED; `text` what the status bar says; `changed` fires with both."""
    changed = Signal(str, str)
    _event = Signal(int, str, object)   # from the thread: (run, kind, value), delivered on the UI thread

    def __init__(self, parent: QObject | None = None, enabled: bool | None = None):
        super().__init__(parent)
        self._event.connect(self._on_event)
        self._run = 0                # the current start; events of older ones are dropped
        self._thread: threading.Thread | None = None
        self._stopper: threading.Thread | None = None
        self.enabled = enabled_by_env(False) if enabled is None else enabled
        self.state = IDLE
        self.text = ""
        self.detail = ""             # the full reason of a failure (the label's tooltip)
        self.master: str | None = None
        self.seconds: float | None = None   # start to ready, the last time
        self.jvm_seconds: float | None = None   # start to the session up (before the tiny job)
        self.cancel_token: CancelToken | None = None
        self._claimed = False        # a job waits for (or runs on) the session being started
        self._warming = False        # the JVM is up, the tiny job runs
        self._t0 = 0.0

    def _set(self, state: str, text: str, detail: str = "") -> None:
        self.state, self.text, self.detail = state, text, detail
        self.changed.emit(state, text)

    @property
    def busy(self) -> bool:
        return self.state == STARTING

    def start(self, master: str = "local[*]", memory: str | None = None) -> bool:
        """Start the session on `master` in the background unless it runs or is starting
        (or the warm-up is off, or the master is not local). True when Spark is up or coming."""
        master = master or "local[*]"
        if not self.enabled or not warmable(master):
            return False
        if self.state == STARTING:
            return True
        from engine.scan.api import spark_state
        if spark_state() == master:
            if self.state != READY:
                self._set(READY, f"Spark ready ({master})")
            return True
        from engine.scan.api import warm_up_task
        self.master, self._claimed, self._warming, self._t0 = master, False, False, time.perf_counter()
        self.seconds = self.jvm_seconds = None
        self._set(STARTING, f"Spark: starting {master}…")
        self._run += 1
        self.cancel_token = CancelToken()
        self._thread = threading.Thread(target=self._drive, name="rmqstore-spark-warm-up", daemon=True,
                                        args=(self._run, warm_up_task(master, memory or None, cancel=self.cancel_token),
                                              self.cancel_token))
        self._thread.start()
        return True

    def _drive(self, run: int, gen, cancel: CancelToken) -> None:
        """On the warm-up's thread: step the task, hand each report and the end to the UI thread."""
        try:
            while True:
                p = next(gen)
                if cancel.cancelled:
                    gen.close()
                    raise Cancelled()
                self._post(run, "progress", p)
        except StopIteration as stop:
            self._post(run, "ready", stop.value)
        except Cancelled:
            self._post(run, "cancelled", None)
        except BaseException as exc:   # shown in the status bar
            self._post(run, "cancelled" if cancel.cancelled else "failed", exc)

    def _post(self, run: int, kind: str, value) -> None:
        try:
            self._event.emit(run, kind, value)
        except RuntimeError:   # the application is gone (quitting while Spark started)
            pass

    def _on_event(self, run: int, kind: str, value) -> None:
        if run != self._run:
            return
        {"progress": self._on_progress, "ready": self._on_ready, "failed": self._on_failed,
         "cancelled": lambda _v: self._on_cancelled()}[kind](value)

    def claim(self) -> None:
        """A Spark job is being submitted: it will use the session being started (so a
        Cancel no longer ends the JVM). While the JVM is still starting, the warm-up's own
        tiny job is skipped; once it runs, it is left to finish beside the job (stopping it
        would end the Python workers it started for the job to reuse)."""
        self._claimed = True
        if self.state == STARTING and self.cancel_token is not None and not self._warming:
            self.cancel_token.cancel()   # the job would only run beside the tiny one: skip it
            self._set(STARTING, f"Spark: starting {self.master} for the job…")

    def cancel(self) -> None:
        """Cancel the start: once the JVM is up (its start cannot be interrupted) it is ended
        again, unless a job is waiting for it."""
        if self.state != STARTING or self.cancel_token is None:
            return
        self._claimed = False
        self.cancel_token.cancel()
        self._set(STARTING, "Spark: cancelling the start…")

    def wait(self, msecs: int = -1) -> bool:
        """Until the warm-up's thread (and a stop after a cancel) has ended; False on timeout."""
        for t in (self._thread, self._stopper):
            if t is not None:
                t.join(None if msecs < 0 else msecs / 1000)
                if t.is_alive():
                    return False
        return True

    # ---- outcomes, on the UI thread ------------------------------------------------------
    def _on_progress(self, p) -> None:
        if p.done >= 1 and not self._warming:
            self.jvm_seconds = time.perf_counter() - self._t0
        self._warming = p.done >= 1
        if self.state == STARTING and p.message and not self.cancel_token.cancelled:
            self._set(STARTING, p.message[:1].upper() + p.message[1:])   # "Starting Spark…", "Warming up Spark on …"

    def _on_ready(self, master: str) -> None:
        self.seconds = time.perf_counter() - self._t0
        self._set(READY, f"Spark ready ({master}, started in {self.seconds:.1f} s)")

    def _on_failed(self, exc: BaseException) -> None:
        from .views.dialogs import one_line
        self._set(FAILED, "Spark unavailable", one_line(exc))

    def _on_cancelled(self) -> None:
        from engine.scan.api import spark_state, stop_spark
        running = spark_state() is not None
        if self._claimed:   # the job takes the session over
            if running:
                self.seconds = time.perf_counter() - self._t0
                self._set(READY, f"Spark ready ({self.master})")
            else:
                self._set(IDLE, "")
            return
        if running:   # off the UI thread: stopping takes a second
            self._stopper = threading.Thread(target=stop_spark, name="rmqstore-spark-stop", daemon=True)
            self._stopper.start()
        self._set(CANCELLED, "Spark start cancelled")


_instance: list[SparkWarmup] = []


def instance() -> SparkWarmup:
    """The process's warm-up (created on first use, owned by the QApplication)."""
    if not _instance:
        _instance.append(SparkWarmup(QApplication.instance()))
    return _instance[0]


class SparkStatus(QWidget):
    """The status bar's part: the warm-up's text and, while Spark starts, a Cancel button.
    Hidden while nothing was started."""

    def __init__(self, warmup: SparkWarmup | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.warmup = warmup or instance()
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 0, 6, 0)
        lay.setSpacing(4)
        self.label = QLabel(self)
        self.label.setTextFormat(Qt.PlainText)
        self.cancel_button = QToolButton(self)
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop starting Spark (a scan starts it again)")
        self.cancel_button.clicked.connect(self.warmup.cancel)
        lay.addWidget(self.label)
        lay.addWidget(self.cancel_button)
        self.warmup.changed.connect(self._show)
        self._show(self.warmup.state, self.warmup.text)

    def _show(self, state: str, text: str) -> None:
        self.label.setText(text)
        self.label.setToolTip(self.warmup.detail or text)
        self.cancel_button.setVisible(state == STARTING and not text.endswith("cancelling the start…"))
        self.setVisible(state != IDLE)
