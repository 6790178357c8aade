"""Scan panel: run a bulk scan job (engine.scan) on Spark or locally, off the UI thread, with
Spark's stage progress, a Cancel button (the job group is cancelled), the rows as a table and,
where it fits, a plot (traffic over time, size distribution, messages per topic).

The SparkSession outlives each job (starting one takes seconds); it is (re)created on the
worker thread when the master or memory setting changes. Results carry a generation token:
an older job's late result never replaces a newer one. Only the UI thread touches Qt."""
from __future__ import annotations

import os
import traceback

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QRunnable, Qt, QThreadPool, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QFormLayout, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QProgressBar, QPushButton, QSpinBox, QSplitter, QTableView, QVBoxLayout,
                               QWidget)

from engine.cli.scan import FILTER_TABLE_COLUMNS, columns_of, format_cell
from engine.scan.filters import MessageFilter
from engine.scan.jobs import EXPORT_FORMATS, JOBS, CancelToken, JobParams, Progress, ScanCancelled, validate

# which parameter widgets each job uses
JOB_FIELDS = {
    "topic-stats": {"by_queue"},
    "traffic": {"bucket"},
    "size-histogram": set(),
    "filter": {"body", "tags", "key", "prop", "limit"},
    "top-keys": {"limit"},
    "top-tags": {"limit"},
    "duplicates": {"per_topic", "limit"},
    "consistency": set(),
    "export": {"body", "tags", "key", "prop", "format", "out", "overwrite"},
}
COMMON_FIELDS = {"topic", "queue"}
PLOT_PEN_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                   "#bcbd22", "#17becf"]


class CategoryAxis(pg.AxisItem):
    """A bottom axis naming bars 0..n-1, whose labels never overlap: when names are wider than
    a bar, labels alternate between two lines (each gets the width of two bars), are elided in
    the middle to that width (full names in `labels` and the table), and when bars are too
    narrow even for that, only every k-th bar is named. Recomputed on every resize and zoom
    (tickValues gets the axis length)."""
    MIN_LABEL_PX = 40
    GAP_PX = 8

    def __init__(self, labels: list[str] | None = None, **kw):
        super().__init__("bottom", **kw)
        self.labels: list[str] = list(labels or [])
        self._px_per_label = 80.0
        self._step = 1

    def set_labels(self, labels: list[str]) -> None:
        self.labels = list(labels)
        self.picture = None
        self.update()

    def _metrics(self):
        from PySide6.QtGui import QFont, QFontMetrics
        return QFontMetrics(self.style.get("tickFont") or QFont())

    def tickValues(self, minVal, maxVal, size):
        n = len(self.labels)
        if n == 0 or size <= 0 or maxVal <= minVal:
            return []
        lo, hi = max(0, int(np.ceil(minVal))), min(n - 1, int(np.floor(maxVal)))
        if hi < lo:
            return []
        px_per_bar = size / (maxVal - minVal)
        step = max(1, int(np.ceil(self.MIN_LABEL_PX / max(px_per_bar, 1e-9))))
        self._px_per_label, self._step = px_per_bar * step, step
        first = lo + (-lo) % step
        return [(float(step), [float(v) for v in range(first, hi + 1, step)])]

    def layout_labels(self, values) -> list[tuple[int, str]]:
        """(line 0 or 1, elided text) for each tick value."""
        fm = self._metrics()
        idx = [int(round(v)) for v in values]
        texts = [self.labels[i] if 0 <= i < len(self.labels) else "" for i in idx]
        one_line = int(self._px_per_label) - self.GAP_PX
        stagger = len(texts) > 1 and max(fm.horizontalAdvance(t) for t in texts) > one_line
        width = max(8, int(2 * self._px_per_label) - self.GAP_PX if stagger else one_line)
        return [((i // self._step) % 2 if stagger else 0, fm.elidedText(t, Qt.ElideMiddle, width))
                for i, t in zip(idx, texts)]

    def tickStrings(self, values, scale, spacing):
        return [("\n" + t if line else t) for line, t in self.layout_labels(values)]


class RowsModel(QAbstractTableModel):
    """Read-only table over a list of row dicts."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list[dict] = []
        self.columns: list[str] = []

    def set_rows(self, rows: list[dict], columns: list[str] | None = None) -> None:
        self.beginResetModel()
        self.rows = rows
        self.columns = columns_of(rows) if columns is None else columns
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        key = self.columns[index.column()]
        v = self.rows[index.row()].get(key)
        if role == Qt.DisplayRole:
            return format_cell(key, v)
        if role == Qt.ToolTipRole and v is not None:
            return str(v)[:2000]
        if role == Qt.TextAlignmentRole and isinstance(v, (int, float)) and not isinstance(v, bool):
            return int(Qt.AlignRight | Qt.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if role == Qt.DisplayRole and orientation == Qt.Horizontal and section < len(self.columns):
            return self.columns[section]
        return None


class _Signals(QObject):
    progress = Signal(int, object)      # generation, Progress
    status = Signal(int, str)           # generation, text
    result = Signal(int, object)        # generation, JobResult
    failed = Signal(int, str)           # generation, one-line message
    cancelled = Signal(int)


class ScanJob(QRunnable):
    """Runs one job on a pool thread; reports through signals (queued to the UI thread)."""

    def __init__(self, generation: int, store, job: str, params: JobParams, engine: str, master: str | None,
                 memory: str | None, cancel: CancelToken):
        super().__init__()
        self.generation, self.store, self.job, self.params = generation, store, job, params
        self.engine, self.master, self.memory, self.cancel = engine, master, memory, cancel
        self.signals = _Signals()

    def run(self) -> None:
        g, sig = self.generation, self.signals
        try:
            from engine.scan.jobs import run_job
            spark = None
            if self.engine == "spark":
                sig.status.emit(g, "starting Spark…")
                from engine.scan.spark_session import get_session
                spark = get_session(self.master or None, self.memory or None)
                self.cancel.raise_if_cancelled()
                sig.status.emit(g, f"running {self.job} on {spark.sparkContext.master}…")
            result = run_job(self.store, self.job, self.params, engine=self.engine, spark=spark,
                             progress=lambda p: sig.progress.emit(g, p), cancel=self.cancel)
            sig.result.emit(g, result)
        except ScanCancelled:
            sig.cancelled.emit(g)
        except BaseException as e:  # shown in the panel, never raised into Qt
            if self.cancel.cancelled:
                sig.cancelled.emit(g)
                return
            from engine.cli.scan import one_line
            msg = one_line(e)
            if not msg or msg == type(e).__name__:
                msg = traceback.format_exception_only(type(e), e)[-1].strip()
            sig.failed.emit(g, msg)


class ScanPanel(QWidget):
    """set_store(store) then choose a job and Run. `last_result` holds the shown JobResult."""

    finished = Signal(object)   # JobResult of the current generation (for embedding / tests)

    def __init__(self, parent=None, settings=None):
        super().__init__(parent)
        self.settings = settings
        self.store = None
        self.generation = 0
        self.cancel_token: CancelToken | None = None
        self.last_result = None
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(1)
        self._jobs: dict[int, ScanJob] = {}
        self.split_bytes: int | None = None   # commitlog slice size (None = automatic)
        self._bucket_ms: int | None = None
        self.throttle_ms = 0                  # test hook: slows each block down
        self._build()
        self._job_changed()
        self._set_running(False)

    # ---- layout ------------------------------------------------------------------------
    def _build(self) -> None:
        self.job_box = QComboBox()
        self.job_box.addItems(JOBS)
        self.job_box.currentTextChanged.connect(self._job_changed)
        self.engine_box = QComboBox()
        self.engine_box.addItem("Spark", "spark")
        self.engine_box.addItem("Local (numpy)", "local")
        self.master_edit = QLineEdit(self._setting("scan/master", os.environ.get("RMQSTORE_SPARK_MASTER", "local[*]")))
        self.master_edit.setPlaceholderText("local[*] or spark://host:7077")
        self.memory_edit = QLineEdit(self._setting("scan/memory", ""))
        self.memory_edit.setPlaceholderText("e.g. 4g (default)")
        self.memory_edit.setMaximumWidth(110)
        self.engine_box.currentIndexChanged.connect(self._engine_changed)

        top = QHBoxLayout()
        for label, w in (("Job", self.job_box), ("Engine", self.engine_box), ("Master", self.master_edit),
                         ("Memory", self.memory_edit)):
            top.addWidget(QLabel(label))
            top.addWidget(w)
        top.setStretchFactor(self.master_edit, 1)

        self.fields: dict[str, tuple[QLabel, QWidget]] = {}
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)

        def add(key, label, w):
            lab = QLabel(label)
            form.addRow(lab, w)
            self.fields[key] = (lab, w)
            return w
        self.topic_edit = add("topic", "Topics", QLineEdit())
        self.topic_edit.setPlaceholderText("all (or comma-separated names)")
        self.queue_edit = add("queue", "Queue ids", QLineEdit())
        self.queue_edit.setPlaceholderText("all (or e.g. 0,3)")
        self.by_queue = add("by_queue", "", QCheckBox("One row per queue"))
        self.bucket_box = add("bucket", "Bucket", QComboBox())
        self.bucket_box.setEditable(True)
        self.bucket_box.addItems(["1s", "10s", "1m", "5m", "1h", "1d"])
        self.bucket_box.setCurrentText("1m")
        self.body_edit = add("body", "Body regex", QLineEdit())
        self.tags_edit = add("tags", "Tags", QLineEdit())
        self.tags_edit.setPlaceholderText("TagA || TagB")
        self.key_edit = add("key", "Key / UNIQ_KEY", QLineEdit())
        self.prop_edit = add("prop", "Property", QLineEdit())
        self.prop_edit.setPlaceholderText("NAME=REGEX")
        self.limit_spin = add("limit", "Limit", QSpinBox())
        self.limit_spin.setRange(0, 10_000_000)
        self.limit_spin.setSpecialValueText("default")
        self.per_topic = add("per_topic", "", QCheckBox("Per topic"))
        self.format_box = add("format", "Format", QComboBox())
        self.format_box.addItems(EXPORT_FORMATS)
        out_row = QWidget()
        ol = QHBoxLayout(out_row)
        ol.setContentsMargins(0, 0, 0, 0)
        self.out_edit = QLineEdit()
        browse = QPushButton("…")
        browse.clicked.connect(self._browse_out)
        ol.addWidget(self.out_edit)
        ol.addWidget(browse)
        add("out", "Output", out_row)
        self.overwrite = add("overwrite", "", QCheckBox("Overwrite"))

        self.run_button = QPushButton("Run")
        self.run_button.clicked.connect(self.run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.progress_bar = QProgressBar()
        self.progress_bar.setTextVisible(True)
        self.status_label = QLabel("No store")
        self.status_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress_bar, 1)
        buttons.addWidget(self.status_label, 2)

        self.model = RowsModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setDefaultSectionSize(20)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.plot = pg.PlotWidget(background="w")
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        # an opaque legend box: the curves pass under the names instead of through them
        self.plot.addLegend(offset=(10, 10), brush=pg.mkBrush(255, 255, 255, 230), pen=pg.mkPen("#c8c8c8"),
                            labelTextColor="#202020")
        self.plot.setVisible(False)
        self.splitter = QSplitter(Qt.Horizontal)
        self.splitter.addWidget(self.table)
        self.splitter.addWidget(self.plot)
        self.splitter.setChildrenCollapsible(False)

        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.splitter, 1)

    def _setting(self, key: str, default: str) -> str:
        if self.settings is None:
            return default
        v = self.settings.value(key, default)
        return str(v) if v is not None else default

    def _browse_out(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export to")
        if path:
            self.out_edit.setText(path)

    def _job_changed(self, *_):
        used = JOB_FIELDS[self.job_box.currentText()] | COMMON_FIELDS
        for key, (lab, w) in self.fields.items():
            lab.setVisible(key in used)
            w.setVisible(key in used)

    def _engine_changed(self, *_):
        spark = self.engine_box.currentData() == "spark"
        self.master_edit.setEnabled(spark)
        self.memory_edit.setEnabled(spark)

    # ---- store -------------------------------------------------------------------------
    def set_store(self, store) -> None:
        """Scan `store` (an open engine.MessageStore) from now on; None disables Run."""
        self.cancel()
        self.store = store
        self.model.set_rows([])
        self.plot.clear()
        self.plot.setVisible(False)
        self.status_label.setText(f"Store: {store.root}" if store is not None else "No store")
        self._set_running(False)

    # ---- running -----------------------------------------------------------------------
    def params(self) -> JobParams:
        topics = [t.strip() for t in self.topic_edit.text().split(",") if t.strip()]
        queues = [int(q) for q in self.queue_edit.text().replace(" ", "").split(",") if q]
        used = JOB_FIELDS[self.job_box.currentText()]

        def text(key, edit):
            return edit.text() if key in used and edit.text() else None
        flt = MessageFilter.build(topics=topics or None, queue_ids=queues or None, body=text("body", self.body_edit),
                                  tags=text("tags", self.tags_edit), key=text("key", self.key_edit),
                                  prop=text("prop", self.prop_edit))
        return JobParams(filter=flt, by_queue=self.by_queue.isChecked(), bucket=self.bucket_box.currentText(),
                         limit=self.limit_spin.value() or None, per_topic=self.per_topic.isChecked(),
                         format=self.format_box.currentText(), out=self.out_edit.text() or None,
                         overwrite=self.overwrite.isChecked(), split_bytes=self.split_bytes,
                         throttle_ms=self.throttle_ms)

    def run(self) -> int | None:
        """Start the selected job; returns its generation (None if it could not start)."""
        if self.store is None:
            self.status_label.setText("Open a store first")
            return None
        job = self.job_box.currentText()
        try:
            params = self.params()
            validate(job, params)
        except ValueError as e:
            self.status_label.setText(f"Invalid parameters: {e}")
            return None
        if self.cancel_token is not None:
            self.cancel_token.cancel()
        if self.settings is not None:
            self.settings.setValue("scan/master", self.master_edit.text())
            self.settings.setValue("scan/memory", self.memory_edit.text())
        self.generation += 1
        self.cancel_token = CancelToken()
        task = ScanJob(self.generation, self.store, job, params, self.engine_box.currentData(),
                       self.master_edit.text().strip(), self.memory_edit.text().strip(), self.cancel_token)
        task.signals.progress.connect(self._on_progress)
        task.signals.status.connect(self._on_status)
        task.signals.result.connect(self._on_result)
        task.signals.failed.connect(self._on_failed)
        task.signals.cancelled.connect(self._on_cancelled)
        self._jobs[self.generation] = task   # keep the Python object (and its signals) alive
        self._bucket_ms = params.bucket_ms if job == "traffic" else None
        task.setAutoDelete(False)
        self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat("")
        self.status_label.setText(f"{job}: queued")
        self._set_running(True)
        self.pool.start(task)
        return self.generation

    def cancel(self) -> None:
        if self.cancel_token is not None and not self.cancel_token.cancelled:
            self.cancel_token.cancel()
            self.status_label.setText("Cancelling…")

    def _set_running(self, running: bool, done: bool = False) -> None:
        self.run_button.setEnabled(not running and self.store is not None)
        self.cancel_button.setEnabled(running)
        if not running:
            self.progress_bar.setRange(0, 1)
            self.progress_bar.setValue(1 if done else 0)
            self.progress_bar.setFormat("done" if done else "")

    def _current(self, g: int) -> bool:
        return g == self.generation

    def _done(self, g: int) -> None:
        self._jobs.pop(g, None)

    def _on_status(self, g: int, text: str) -> None:
        if self._current(g):
            self.status_label.setText(text)

    def _on_progress(self, g: int, p: Progress) -> None:
        if not self._current(g) or self.cancel_token is None or self.cancel_token.cancelled:
            return
        if p.total:
            self.progress_bar.setRange(0, p.total)
            self.progress_bar.setValue(p.done)
            self.progress_bar.setFormat("%v/%m tasks")
        else:
            self.progress_bar.setRange(0, 0)
        if p.stages:
            self.status_label.setText("  ".join(f"stage {s.stage_id}: {s.completed}/{s.total}" for s in p.stages[-3:]))
        elif p.message:
            self.status_label.setText(p.message)

    def _on_result(self, g: int, result) -> None:
        self._done(g)
        if not self._current(g):
            return
        self._set_running(False, done=True)
        self.last_result = result
        cols = FILTER_TABLE_COLUMNS + ["msgId", "properties"] if result.job == "filter" else None
        self.model.set_rows(result.rows, cols)
        self.table.resizeColumnsToContents()
        for c in range(self.model.columnCount()):
            self.table.setColumnWidth(c, min(self.table.columnWidth(c), 220))
        where = result.master or "this process"
        more = f" (first {len(result.rows)}; more matched)" if result.truncated else ""
        self.status_label.setText(f"{result.job}: {len(result.rows)} row(s){more} on {where} in {result.seconds:.1f} s")
        self._plot(result)
        self.finished.emit(result)

    def _on_failed(self, g: int, msg: str) -> None:
        self._done(g)
        if self._current(g):
            self._set_running(False)
            self.status_label.setText(f"Failed: {msg}")

    def _on_cancelled(self, g: int) -> None:
        self._done(g)
        if self._current(g):
            self._set_running(False)
            self.status_label.setText("Cancelled")

    # ---- plots ---------------------------------------------------------------------------
    def _plot(self, result) -> None:
        p = self.plot
        p.clear()
        if p.plotItem.legend is not None:
            p.plotItem.legend.clear()
        rows = result.rows
        shown = True
        headroom = 0.0
        if result.job == "traffic" and rows:
            by_topic: dict[str, list[tuple[int, int]]] = {}
            for r in rows:
                by_topic.setdefault(r["topic"], []).append((r["bucketStart"], r["messages"]))
            p.setAxisItems({"bottom": pg.DateAxisItem(utcOffset=0)})
            top = sorted(by_topic, key=lambda t: -sum(m for _, m in by_topic[t]))[:len(PLOT_PEN_COLORS)]
            lo, hi = min(r["bucketStart"] for r in rows), max(r["bucketStart"] for r in rows)
            step = self._bucket_ms or 0
            dense = step > 0 and (hi - lo) // step < 200_000
            headroom = 0.0
            for i, t in enumerate(top):
                pts = dict(by_topic[t])
                if dense:   # a bucket without messages is a zero, not a gap to draw across
                    xs = np.arange(lo, hi + step, step, dtype=np.int64)
                    y = np.array([pts.get(int(b), 0) for b in xs], dtype=np.float64)
                else:
                    xs = np.array(sorted(pts), dtype=np.int64)
                    y = np.array([pts[int(b)] for b in xs], dtype=np.float64)
                x = xs.astype(np.float64) / 1000
                name = t if len(t) <= 32 else t[:15] + "…" + t[-16:]
                p.plot(x, y, pen=pg.mkPen(PLOT_PEN_COLORS[i], width=2), symbol="o", symbolSize=4,
                       symbolBrush=PLOT_PEN_COLORS[i], name=name)
                headroom = max(headroom, float(y.max()) if len(y) else 0.0)
            if p.plotItem.legend is not None:
                p.plotItem.legend.setColumnCount(2 if len(top) > 4 else 1)
            legend_rows = (len(top) + 1) // 2 if len(top) > 4 else len(top)
            headroom *= 1.05 + 0.08 * legend_rows   # the legend sits above the curves, not on them
            p.setLabel("left", "messages per bucket")
            p.setLabel("bottom", "store time (UTC)")
        elif result.job == "size-histogram" and rows:
            p.setAxisItems({"bottom": CategoryAxis([_size_label(r["sizeFrom"]) for r in rows])})
            x = np.arange(len(rows), dtype=np.float64)
            y = np.array([r["messages"] for r in rows], dtype=np.float64)
            p.addItem(pg.BarGraphItem(x=x, height=y, width=0.8, brush="#1f77b4"))
            p.setLabel("left", "messages")
            p.setLabel("bottom", "record size (from)")
        elif result.job == "topic-stats" and rows and not any("queueId" in r for r in rows):
            p.setAxisItems({"bottom": CategoryAxis([r["topic"] for r in rows])})
            x = np.arange(len(rows), dtype=np.float64)
            y = np.array([r["messages"] for r in rows], dtype=np.float64)
            p.addItem(pg.BarGraphItem(x=x, height=y, width=0.8, brush="#2ca02c"))
            p.setLabel("left", "messages")
            p.setLabel("bottom", "topic")
        else:
            shown = False
        p.setVisible(shown)
        if shown:
            p.autoRange()
            if result.job == "traffic" and headroom > 0:
                p.setYRange(0, headroom, padding=0)
            total = max(self.splitter.width(), 800)
            self.splitter.setSizes([total * 9 // 20, total * 11 // 20])


def _size_label(n: int) -> str:
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n // k} {unit}"
    return f"{n} B"
