"""Scan panel: run a bulk scan job (engine.scan) on Spark or locally, off the UI thread, with
Spark's stage progress, a Cancel button (the job group is cancelled), the rows as a table and,
where it fits, a plot (traffic over time, size distribution, messages per topic).

The job is engine.scan's task (`scan_task`: progress, then the JobResult) run by the GUI's one
runner through the session, in a lane of its own: a newer job replaces an older one, and the
session's close cancels and waits for it. The SparkSession outlives each job and each store
(starting one takes seconds): with a local master it is started in the background as soon as
a store is open and this tab is shown (gui.spark_warmup, its state in the status bar), and a
job submitted meanwhile waits for it ("starting Spark…"); it is (re)created on the worker
thread when the master or memory changes.

The result table keeps every column reachable: columns sized to their contents within
[MIN_COLUMN, MAX_COLUMN] pixels, the last one not stretched over the others, and a horizontal
scroll bar when they are wider than the view.

Progress arrives per slice (hundreds on a store of small files); the bar and the status line
follow at most every PROGRESS_MS: a QProgressBar repaints on each new value, and every
repaint is UI-thread time (holding the GIL) the scan's own thread waits for."""
from __future__ import annotations

import os

import pyqtgraph as pg
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QFormLayout, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QListWidget, QProgressBar, QPushButton, QSpinBox, QSplitter, QTableView,
                               QVBoxLayout, QWidget)

from engine.scan.api import (EXPORT_FORMATS, FILTER_TABLE_COLUMNS, JOBS, JobParams, MessageFilter, ScanStore,
                             columns_of, format_cell, one_line, open_scan_store, resolve_stores, scan_task, validate)
from engine.tasks import Progress

from . import spark_warmup
from .views.scan_plot import CategoryAxis, plot_result  # noqa: F401  (CategoryAxis: the panel's axis)
from .workers import Lane, TaskRunner

# which parameter widgets each job uses
JOB_FIELDS = {
    "topic-stats": {"by_queue"},
    "traffic": {"bucket"},
    "size-histogram": set(),
    "filter": {"body", "body_decoded", "tags", "key", "prop", "limit"},
    "top-keys": {"limit"},
    "top-tags": {"limit"},
    "duplicates": {"per_topic", "limit"},
    "consistency": set(),
    "export": {"body", "body_decoded", "tags", "key", "prop", "format", "out", "overwrite"},
    "lineage": {"limit"},   # whole lives: only the topic selects (engine.scan.lineage_job)
    "fates": set(),
}
COMMON_FIELDS = {"topic", "queue", "stores"}
VIA_CQ_JOBS = set(JOB_FIELDS) - {"consistency", "lineage", "fates"}   # these read every record
PROGRESS_MS = 100   # the progress shown at most this often
MIN_COLUMN, MAX_COLUMN = 60, 260   # result column widths (pixels) when sized to their contents


def scan_files(store, job: str, params: JobParams, engine: str, cancel=None, **kw):
    """scan_task over the session's store as its files are: a DLedger store's restart view
    (what the restarted broker serves, partly in memory) gives way to the files, which the
    scan reads by path (opened here, on the worker, and closed at the end)."""
    if getattr(getattr(store, "commitlog", None), "restart", None) is None:
        return (yield from scan_task(store, job, params, engine, cancel, **kw))
    files = open_scan_store(str(store.root), store.cfg)
    try:
        return (yield from scan_task(files, job, params, engine, cancel, **kw))
    finally:
        files.close()


def scan_many(store, extra: list[str], job: str, params: JobParams, engine: str, cancel=None, **kw):
    """scan_task over the session's store and the `extra` store folders (opened read-only here,
    on the worker, and closed at the end): rows carry `broker` (engine.scan's many-store rules)."""
    opened = []
    try:
        if getattr(getattr(store, "commitlog", None), "restart", None) is not None:   # (scan_files)
            opened.append(store := open_scan_store(str(store.root), store.cfg))
        members = [ScanStore(resolve_stores([str(store.root)])[0].broker, str(store.root), store)]
        for ref in resolve_stores(extra):
            if ref.path != members[0].path:
                opened.append(open_scan_store(ref.path))
                members.append(ScanStore(ref.broker, ref.path, opened[-1]))
        return (yield from scan_task(members, job, params, engine, cancel, **kw))
    finally:
        for st in opened:
            st.close()


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


class ScanPanel(QWidget):
    """Scans the session's store; choose a job and Run. `last_result` holds the shown JobResult."""

    finished = Signal(object)   # JobResult of the current job (for embedding / tests)

    def __init__(self, session, settings=None, parent=None):
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self.runner = TaskRunner(self, max_threads=1)   # one scan at a time, never starving the browser
        self.lane = Lane(self.runner)
        self.last_result = None
        self.split_bytes: int | None = None   # commitlog slice size (None = automatic)
        self._bucket_ms: int | None = None
        self.throttle_ms = 0                  # test hook: slows each block down
        self._progress: Progress | None = None   # the newest report not shown yet
        self._progress_timer = QTimer(self)
        self._progress_timer.setSingleShot(True)
        self._progress_timer.setInterval(PROGRESS_MS)
        self._progress_timer.timeout.connect(self._show_progress)
        self.progress_shown = 0                  # reports drawn (tests: fewer than received)
        self.warmup = spark_warmup.instance()
        self._build()
        self._job_changed()
        self._engine_changed()
        session.opened.connect(self._store_changed)
        session.aboutToClose.connect(self._store_closing)
        session.closed.connect(self._store_changed)
        self._store_changed()

    # ---- layout ------------------------------------------------------------------------
    def _build(self) -> None:
        self.job_box = QComboBox()
        self.job_box.addItems(JOBS)
        self.job_box.currentTextChanged.connect(self._job_changed)
        self.engine_box = QComboBox()
        self.engine_box.addItem("Spark", "spark")
        self.engine_box.addItem("Local (numpy)", "local")
        self.master_edit = QLineEdit(self._setting("scan/master", os.environ.get("RMQSTORE_SPARK_MASTER", "local[*]")))
        self.master_edit.setPlaceholderText("local[*], spark://host:7077 or sc://host:15002")
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
        self.via_cq = add("via_cq", "", QCheckBox("Only the records these queues' ConsumeQueue units name"))
        self.via_cq.setToolTip("A consumer's view, reading only those queues' bytes: PREPARED/ROLLBACK and "
                               "undispatched records are in no queue (the CLI's --via-consume-queue)")
        self.topic_edit.textChanged.connect(self._filter_changed)
        self.queue_edit.textChanged.connect(self._filter_changed)
        self._filter_changed()
        self.by_queue = add("by_queue", "", QCheckBox("One row per queue"))
        self.bucket_box = add("bucket", "Bucket", QComboBox())
        self.bucket_box.setEditable(True)
        self.bucket_box.addItems(["1s", "10s", "1m", "5m", "1h", "1d"])
        self.bucket_box.setCurrentText("1m")
        self.body_edit = add("body", "Body regex", QLineEdit())
        self.body_decoded = add("body_decoded", "", QCheckBox("Search the decoded body (Protobuf, MessagePack, "
                                                              "CBOR, Avro as JSON)"))
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
        stores_row = QWidget()   # more stores in the same job: a `broker` column in the results
        sl = QHBoxLayout(stores_row)
        sl.setContentsMargins(0, 0, 0, 0)
        self.stores_list = QListWidget()
        self.stores_list.setMaximumHeight(64)
        self.stores_list.setToolTip("Other stores scanned with this one (store folders or cluster layouts)")
        add_store, remove_store = QPushButton("Add…"), QPushButton("Remove")
        add_store.clicked.connect(self._add_store)
        remove_store.clicked.connect(lambda: [self.stores_list.takeItem(self.stores_list.row(i))
                                              for i in self.stores_list.selectedItems()])
        sl.addWidget(self.stores_list, 1)
        sl.addWidget(add_store)
        sl.addWidget(remove_store)
        add("stores", "More stores", stores_row)

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
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.Interactive)
        header.setStretchLastSection(False)   # a stretched last column hid the scroll bar's reach
        header.setMinimumSectionSize(MIN_COLUMN)
        self.table.setHorizontalScrollMode(QTableView.ScrollPerPixel)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarAsNeeded)
        self.table.setWordWrap(False)
        self.table.setTextElideMode(Qt.ElideMiddle)
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

    def _add_store(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Add a store (or a cluster layout)")
        if path:
            self.stores_list.addItem(path)

    def extra_stores(self) -> list[str]:
        return [self.stores_list.item(i).text() for i in range(self.stores_list.count())]

    def _filter_changed(self, *_):
        """Reading through the ConsumeQueue needs the queues to read: a topic or queue ids."""
        self.via_cq.setEnabled(bool(self.topic_edit.text().strip() or self.queue_edit.text().strip()))

    def _job_changed(self, *_):
        job = self.job_box.currentText()
        used = JOB_FIELDS[job] | COMMON_FIELDS | ({"via_cq"} if job in VIA_CQ_JOBS else set())
        for key, (lab, w) in self.fields.items():
            lab.setVisible(key in used)
            w.setVisible(key in used)

    def _engine_changed(self, *_):
        spark = self.engine_box.currentData() == "spark"
        self.master_edit.setEnabled(spark)
        self.memory_edit.setEnabled(spark)
        self.warm_up()

    # ---- Spark in the background -------------------------------------------------------
    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.warm_up()

    def warm_up(self) -> bool:
        """Start the local SparkSession in the background when a store is open, this tab is
        shown and the engine is Spark (gui.spark_warmup decides whether it may)."""
        if not (self.isVisible() and self.session.is_open and self.engine_box.currentData() == "spark"):
            return False
        master = self.master_edit.text().strip() or "local[*]"
        return self.warmup.start(master, self.memory_edit.text().strip() or None)

    # ---- store -------------------------------------------------------------------------
    def _store_changed(self, *_) -> None:
        store = self.session.store
        self.model.set_rows([])
        self.plot.clear()
        self.plot.setVisible(False)
        self.status_label.setText(f"Store: {store.root}" if store is not None else "No store")
        self._set_running(False)
        if store is not None:
            self.warm_up()

    def _store_closing(self, *_) -> None:
        """The session closes the store: stop the scan and wait for it to let go of the files."""
        self.lane.invalidate()
        self.wait()

    def wait(self, msecs: int = 30000) -> bool:
        return self.runner.wait(msecs)

    # ---- running -----------------------------------------------------------------------
    def params(self) -> JobParams:
        topics = [t.strip() for t in self.topic_edit.text().split(",") if t.strip()]
        queues = [int(q) for q in self.queue_edit.text().replace(" ", "").split(",") if q]
        used = JOB_FIELDS[self.job_box.currentText()]

        def text(key, edit):
            return edit.text() if key in used and edit.text() else None
        flt = MessageFilter.build(topics=topics or None, queue_ids=queues or None, body=text("body", self.body_edit),
                                  tags=text("tags", self.tags_edit), key=text("key", self.key_edit),
                                  prop=text("prop", self.prop_edit),
                                  body_decoded="body_decoded" in used and self.body_decoded.isChecked())
        return JobParams(filter=flt, by_queue=self.by_queue.isChecked(), bucket=self.bucket_box.currentText(),
                         limit=self.limit_spin.value() or None, per_topic=self.per_topic.isChecked(),
                         format=self.format_box.currentText(), out=self.out_edit.text() or None,
                         overwrite=self.overwrite.isChecked(), split_bytes=self.split_bytes,
                         via_consume_queue=self.via_cq.isChecked() and self.via_cq.isEnabled()
                         and self.job_box.currentText() in VIA_CQ_JOBS,
                         throttle_ms=self.throttle_ms)

    def run(self):
        """Start the selected job; returns its Task (None if it could not start)."""
        if not self.session.is_open:
            self.status_label.setText("Open a store first")
            return None
        job = self.job_box.currentText()
        try:
            params = self.params()
            validate(job, params)
        except ValueError as e:
            self.status_label.setText(f"Invalid parameters: {e}")
            return None
        if self.settings is not None:
            self.settings.setValue("scan/master", self.master_edit.text())
            self.settings.setValue("scan/memory", self.memory_edit.text())
        self._bucket_ms = params.bucket_ms if job == "traffic" else None
        self.progress_bar.setRange(0, 0)
        self.progress_bar.setFormat("")
        self.status_label.setText(f"{job}: queued")
        self._set_running(True)
        # the scan maps the files itself (the store only plans it), so it runs without the
        # session's lock; the session's close still cancels and waits for it (_store_closing)
        target = self.master_edit.text().strip()
        remote = target if target.startswith("sc://") else None   # a running Spark, through Spark Connect
        if self.engine_box.currentData() == "spark":
            self.warmup.claim()   # the job takes over the session being started, if any
        extra = self.extra_stores()
        fn, args = (scan_many, (extra,)) if extra else (scan_files, ())
        return self.session.submit(fn, *args, job, params, self.engine_box.currentData(),
                                   master=None if remote else target, remote=remote,
                                   memory=self.memory_edit.text().strip(),
                                   lane=self.lane, locked=False, pass_cancel=True,
                                   on_progress=self._on_progress, on_result=self._on_result,
                                   on_error=self._on_failed, on_cancelled=self._on_cancelled)

    def cancel(self) -> None:
        if self.lane.busy and not self.lane.task.cancel.cancelled:
            self.lane.cancel()
            self.status_label.setText("Cancelling…")

    def _set_running(self, running: bool, done: bool = False) -> None:
        self.run_button.setEnabled(not running and self.session.is_open)
        self.cancel_button.setEnabled(running)
        if not running:
            self._progress_timer.stop()
            self._progress = None
            self.progress_bar.setRange(0, 1)
            self.progress_bar.setValue(1 if done else 0)
            self.progress_bar.setFormat("done" if done else "")

    def _on_progress(self, p: Progress) -> None:
        self._progress = p
        if not self._progress_timer.isActive():   # shown at once, then the newest every PROGRESS_MS
            self._show_progress()
            self._progress_timer.start()

    def _show_progress(self) -> None:
        p, self._progress = self._progress, None
        if p is None:
            return
        self.progress_shown += 1
        if p.total:
            self.progress_bar.setRange(0, p.total)
            self.progress_bar.setValue(p.done)
            self.progress_bar.setFormat(f"%v/%m {p.unit or 'tasks'}")
        else:
            self.progress_bar.setRange(0, 0)
        if p.stages:
            self.status_label.setText("  ".join(f"stage {s.stage_id}: {s.completed}/{s.total}" for s in p.stages[-3:]))
        elif p.message:
            self.status_label.setText(p.message)

    def _on_result(self, result) -> None:
        self._set_running(False, done=True)
        self.last_result = result
        cols = FILTER_TABLE_COLUMNS + ["msgId", "properties"] if result.job == "filter" else None
        if cols and result.rows and "broker" in result.rows[0]:
            cols = ["broker", "store"] + cols
        self.model.set_rows(result.rows, cols)
        self.fit_columns()
        where = result.master or "this process"
        more = f" (first {len(result.rows)}; more matched)" if result.truncated else ""
        self.status_label.setText(f"{result.job}: {len(result.rows)} row(s){more} on {where} in {result.seconds:.1f} s")
        if plot_result(self.plot, result, self._bucket_ms):
            total = max(self.splitter.width(), 800)
            self.splitter.setSizes([total * 9 // 20, total * 11 // 20])
        self.finished.emit(result)

    def fit_columns(self) -> None:
        """Each column as wide as its header and its first rows (ResizeToContents over every
        row would cost seconds on a filter's many rows), within [MIN_COLUMN, MAX_COLUMN]; wider
        than the view, the table scrolls sideways. A cell cut short shows its whole value as a
        tooltip."""
        header = self.table.horizontalHeader()
        fm = self.table.fontMetrics()
        pad = 2 * self.table.style().pixelMetric(self.table.style().PixelMetric.PM_FocusFrameHMargin) + 16
        sample = self.model.rows[:200]
        for c, key in enumerate(self.model.columns):
            texts = [key] + [format_cell(key, r.get(key)) for r in sample]
            width = max(fm.horizontalAdvance(str(t)) for t in texts) + pad
            header.resizeSection(c, max(MIN_COLUMN, min(MAX_COLUMN, width)))

    def _on_failed(self, exc: BaseException) -> None:
        self._set_running(False)
        msg = one_line(exc)
        if not msg or msg == type(exc).__name__:
            msg = f"{type(exc).__name__}: {exc}".rstrip(": ")
        self.status_label.setText(f"Failed: {msg}")

    def _on_cancelled(self) -> None:
        self._set_running(False)
        self.status_label.setText("Cancelled")
