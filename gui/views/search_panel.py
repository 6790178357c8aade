"""Search: by key within a topic and a time range (exact, or RocketMQ's raw hash match with
its false hits marked), by msgId (offset id or UNIQ_KEY, says which), by time in a queue.
Results open in the detail pane and export to CSV or JSON Lines."""
from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QFileDialog, QFormLayout, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QPushButton, QSpinBox, QSplitter, QTableView,
                               QTabWidget, QVBoxLayout, QWidget)

from ..models.search import (LONG_MAX, SearchHit, decode_id, export_csv, export_jsonl, id_search, key_search,
                             time_search)
from ..models.search_results import HIT_ROLE, SearchResultsModel
from ..timefmt import format_ms
from ..workers import Lane
from .detail_pane import MessageDetail
from .dialogs import error
from .time_edit import MsDateTimeEdit


def _plain_label(parent) -> QLabel:
    lab = QLabel(parent)
    lab.setTextFormat(Qt.PlainText)
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(Qt.TextSelectableByMouse)
    return lab


class SearchPanel(QWidget):
    openInBrowser = Signal(str, int, int)   # topic, queueId, queue offset
    utcToggled = Signal(bool)
    status = Signal(str)

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.lane = Lane(session.runner)
        self.utc = False
        self.last_outcome = None
        self.last_time_result: dict | None = None
        self._times_set = False

        # -- by key
        key_tab = QWidget(self)
        self.k_topic = QComboBox(key_tab)
        self.k_topic.setEditable(True)
        self.k_topic.setInsertPolicy(QComboBox.NoInsert)
        self.k_topic.setMinimumWidth(260)
        self.k_key = QLineEdit(key_tab)
        self.k_key.setPlaceholderText("a KEYS token or a UNIQ_KEY")
        self.k_any_time = QCheckBox("Any time", key_tab)
        self.k_any_time.setChecked(True)
        self.k_begin = MsDateTimeEdit(key_tab)
        self.k_end = MsDateTimeEdit(key_tab)
        self.k_utc = QCheckBox("Times in UTC", key_tab)
        self.k_raw = QCheckBox("Raw RocketMQ hash match (false hits marked)", key_tab)
        self.k_raw.setToolTip("RocketMQ's IndexService compares only a 32-bit hash of topic#key and the time, "
                              "so other keys can collide. Exact mode (the default) checks each message's "
                              "real KEYS / UNIQ_KEY.")
        self.k_cap = QSpinBox(key_tab)
        self.k_cap.setRange(0, 1_000_000)
        self.k_cap.setValue(64)
        self.k_cap.setSpecialValueText("no cap")
        self.k_cap.setToolTip("At most this many results (RocketMQ's default is 64; 0 = no cap). "
                              "A truncated result says so.")
        self.k_search = QPushButton("Search", key_tab)
        self.k_search.setDefault(True)
        form = QFormLayout(key_tab)
        form.addRow("Topic:", self.k_topic)
        form.addRow("Key:", self.k_key)
        times = QHBoxLayout()
        times.addWidget(self.k_any_time)
        times.addWidget(QLabel("from"))
        times.addWidget(self.k_begin, 1)
        times.addWidget(QLabel("to"))
        times.addWidget(self.k_end, 1)
        times.addWidget(self.k_utc)
        form.addRow("Stored:", times)
        opts = QHBoxLayout()
        opts.addWidget(self.k_raw)
        opts.addStretch(1)
        opts.addWidget(QLabel("Max results:"))
        opts.addWidget(self.k_cap)
        opts.addWidget(self.k_search)
        form.addRow("", opts)

        # -- by id
        id_tab = QWidget(self)
        self.i_text = QLineEdit(id_tab)
        self.i_text.setPlaceholderText("offset msgId (32/56 hex digits) or UNIQ_KEY")
        self.i_find = QPushButton("Find", id_tab)
        self.i_decode = QPushButton("Decode", id_tab)
        self.i_decode.setToolTip("What the id says about itself (host, port, commitlog offset; or IP, pid, time)")
        self.i_result = _plain_label(id_tab)
        il = QVBoxLayout(id_tab)
        row = QHBoxLayout()
        row.addWidget(QLabel("Message ID:"))
        row.addWidget(self.i_text, 1)
        row.addWidget(self.i_find)
        row.addWidget(self.i_decode)
        il.addLayout(row)
        il.addWidget(self.i_result)
        il.addStretch(1)

        # -- by time
        time_tab = QWidget(self)
        self.t_topic = QComboBox(time_tab)
        self.t_topic.setMinimumWidth(260)
        self.t_queue = QComboBox(time_tab)
        self.t_time = MsDateTimeEdit(time_tab)
        self.t_boundary = QComboBox(time_tab)
        self.t_boundary.addItem("RocketMQ's rule for the store's generation (4.9 on 4.x, 5.x lower on 5.x)", "auto")
        self.t_boundary.addItem("first message stored at or after (5.x lower)", "lower")
        self.t_boundary.addItem("last message stored at or before (5.x upper)", "upper")
        self.t_boundary.addItem("RocketMQ 4.9 (file by mtime, nearest)", None)
        self.t_find = QPushButton("Find queue offset", time_tab)
        self.t_open = QPushButton("Open in browser", time_tab)
        self.t_open.setEnabled(False)
        self.t_result = _plain_label(time_tab)
        tf = QFormLayout(time_tab)
        q_row = QHBoxLayout()
        q_row.addWidget(self.t_topic, 1)
        q_row.addWidget(QLabel("queue"))
        q_row.addWidget(self.t_queue)
        tf.addRow("Topic:", q_row)
        tf.addRow("Time:", self.t_time)
        b_row = QHBoxLayout()
        b_row.addWidget(self.t_boundary, 1)
        b_row.addWidget(self.t_find)
        b_row.addWidget(self.t_open)
        tf.addRow("Boundary:", b_row)
        tf.addRow("", self.t_result)

        self.modes = QTabWidget(self)
        self.modes.addTab(key_tab, "By key")
        self.modes.addTab(id_tab, "By message ID")
        self.modes.addTab(time_tab, "By time → queue offset")
        self.modes.setMaximumHeight(250)   # the key tab's time fields say what they read under them

        # -- results
        self.summary = _plain_label(self)
        self.results = SearchResultsModel(self)
        self.table = QTableView(self)
        self.table.setModel(self.results)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        for i, w in enumerate([40, 150, 215, 120, 50, 90, 120, 180, 110, 260, 260]):
            self.table.setColumnWidth(i, w)
        self.export_csv = QPushButton("Export CSV…", self)
        self.export_jsonl = QPushButton("Export JSON Lines…", self)
        self.open_queue = QPushButton("Open in browser", self)
        self.open_queue.setToolTip("Show the selected message in its queue")
        for b in (self.export_csv, self.export_jsonl, self.open_queue):
            b.setEnabled(False)
        res_bar = QHBoxLayout()
        res_bar.addWidget(self.summary, 1)
        res_bar.addWidget(self.open_queue)
        res_bar.addWidget(self.export_csv)
        res_bar.addWidget(self.export_jsonl)
        res = QWidget(self)
        rl = QVBoxLayout(res)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addLayout(res_bar)
        rl.addWidget(self.table, 1)
        self.detail = MessageDetail(self)
        split = QSplitter(Qt.Vertical, self)
        split.addWidget(res)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setChildrenCollapsible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.modes)
        lay.addWidget(split, 1)

        self.k_search.clicked.connect(self.search_key)
        self.k_key.returnPressed.connect(self.search_key)
        self.k_any_time.toggled.connect(self._any_time)
        self.k_utc.toggled.connect(self.utcToggled)
        self.i_find.clicked.connect(self.search_id)
        self.i_text.returnPressed.connect(self.search_id)
        self.i_decode.clicked.connect(self.decode_id)
        self.t_topic.currentTextChanged.connect(self._fill_queue_ids)
        self.t_find.clicked.connect(self.search_time)
        self.t_open.clicked.connect(self._open_time_result)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.table.doubleClicked.connect(lambda idx: self._open_selected())
        self.open_queue.clicked.connect(self._open_selected)
        self.export_csv.clicked.connect(lambda: self._export("csv"))
        self.export_jsonl.clicked.connect(lambda: self._export("jsonl"))
        self._any_time(True)

    # ---- store -------------------------------------------------------------------------------
    def set_store_lists(self, topics: list[str], queues: list[dict], first_ms: int, last_ms: int) -> None:
        self._queues = queues
        for combo in (self.k_topic, self.t_topic):
            cur = combo.currentText()
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(topics)
            if cur in topics:
                combo.setCurrentText(cur)
            combo.blockSignals(False)
        self._fill_queue_ids(self.t_topic.currentText())
        if first_ms >= 0 and last_ms >= 0 and not self._times_set:
            # the store's time span, once per store: later updates never overwrite user input
            self._times_set = True
            self.k_begin.set_ms(first_ms)
            self.t_time.set_ms(first_ms)
            self.k_end.set_ms(last_ms)

    def clear(self) -> None:
        """A new store (or none): nothing of the old one stays, times and ids included."""
        self._times_set = False
        for w in (self.k_begin, self.k_end, self.t_time):
            w.clear()
        self.k_key.clear()
        self.i_text.clear()
        self.last_outcome = None
        self.last_time_result = None
        for b in (self.export_csv, self.export_jsonl, self.open_queue):
            b.setEnabled(False)
        self.lane.invalidate()
        self.set_store_lists([], [], -1, -1)
        self.results.set_hits([])
        self.summary.setText("")
        self.detail.set_message(None)
        self.i_result.setText("")
        self.t_result.setText("")
        self.t_open.setEnabled(False)

    def follow(self, topic: str, queue_id: int | None = None) -> None:
        """The topic (and queue) chosen in the tree becomes the one searched."""
        for combo in (self.k_topic, self.t_topic):
            if combo.findText(topic) >= 0 or combo.isEditable():
                combo.setCurrentText(topic)
        if queue_id is not None:
            i = self.t_queue.findData(queue_id)
            if i >= 0:
                self.t_queue.setCurrentIndex(i)

    def _fill_queue_ids(self, topic: str) -> None:
        """The topic's queues; the queue chosen stays chosen when the topic has it (a refresh)."""
        keep = self.t_queue.currentData()
        self.t_queue.clear()
        for q in getattr(self, "_queues", []):
            if q["topic"] == topic:
                self.t_queue.addItem(f"{q['queueId']}  [{q['minOffset']}, {q['maxOffset']})", q["queueId"])
        i = self.t_queue.findData(keep) if keep is not None else -1
        if i >= 0:
            self.t_queue.setCurrentIndex(i)

    def _any_time(self, on: bool) -> None:
        self.k_begin.setEnabled(not on)
        self.k_end.setEnabled(not on)

    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        for w in (self.k_begin, self.k_end, self.t_time):
            w.set_utc(utc)
        self.k_utc.blockSignals(True)
        self.k_utc.setChecked(utc)
        self.k_utc.blockSignals(False)
        self.results.set_utc(utc)
        self.detail.set_utc(utc)

    # ---- by key --------------------------------------------------------------------------------
    def search_key(self) -> None:
        topic, key = self.k_topic.currentText().strip(), self.k_key.text().strip()
        if not topic or not key:
            self.summary.setText("Enter a topic and a key.")
            return
        if self.k_any_time.isChecked():
            begin, end = 0, LONG_MAX
        else:
            begin, end = self.k_begin.value(), self.k_end.value()
            for name, v, w in (("from", begin, self.k_begin), ("to", end, self.k_end)):
                if v is None:
                    self.summary.setText(f"'{name}' is {w.note.text() or 'empty'}: type a time, or tick Any time.")
                    return
        if begin > end:
            self.summary.setText("The time range is empty: 'from' is after 'to'.")
            return
        raw, cap = self.k_raw.isChecked(), self.k_cap.value()
        self.summary.setText(f"searching {topic} for key {key!r}…")

        def done(outcome):
            self.last_outcome = outcome
            self._show_hits(outcome.hits, outcome.summary())

        self.session.submit(key_search, topic, key, begin, end, cap, raw, lane=self.lane,
                            on_result=done, on_error=self._failed)

    def _show_hits(self, hits: list[SearchHit], summary: str) -> None:
        self.results.set_hits(hits)
        self.summary.setText(summary)
        for b in (self.export_csv, self.export_jsonl):
            b.setEnabled(bool(hits))
        self.open_queue.setEnabled(False)
        self.detail.set_message(None)
        if hits:
            self.table.selectRow(0)
        self.status.emit(summary)

    def _failed(self, exc) -> None:
        self.summary.setText(f"search failed: {exc}")
        self.status.emit(f"search failed: {exc}")

    # ---- by id ---------------------------------------------------------------------------------
    def search_id(self) -> None:
        text = self.i_text.text().strip()
        if not text:
            return
        self.i_result.setText("looking up…")

        def done(outcome):
            self.last_outcome = outcome
            self.i_result.setText(outcome.summary())
            self._show_hits([SearchHit(m) for m in outcome.messages], outcome.summary())

        self.session.submit(id_search, text, lane=self.lane, on_result=done, on_error=self._failed)

    def decode_id(self) -> None:
        d = decode_id(self.i_text.text())
        if not d:
            self.i_result.setText("not a message id: expected 32 or 56 hex digits")
            return
        lines = []
        if "commitLogOffset" in d:
            lines.append(f"As an offset msgId: store host {d['host']}, commitlog offset {d['commitLogOffset']}")
        if "asUniqKey" in d:
            u = d["asUniqKey"]
            lines.append(f"As a UNIQ_KEY: client IP {u['ip']}, pid {u['pid']}, counter {u['counter']}, "
                         f"created about {format_ms(u['approxTimestamp'], self.utc)} (±, decoded relative to now)")
        self.i_result.setText("\n".join(lines))

    # ---- by time -------------------------------------------------------------------------------
    def search_time(self) -> None:
        topic = self.t_topic.currentText()
        qid = self.t_queue.currentData()
        if not topic or qid is None:
            self.t_result.setText("Choose a topic and a queue.")
            return
        ts = self.t_time.value()
        if ts is None:
            self.t_result.setText(f"Time: {self.t_time.note.text() or 'empty'}.")
            return
        boundary = self.t_boundary.currentData()

        def done(res):
            self.last_time_result = dict(res, topic=topic, queueId=qid, time=ts)
            t = format_ms(res["storeTimestamp"], self.utc) if res["storeTimestamp"] >= 0 else "past the end"
            self.t_result.setText(f"{format_ms(ts, self.utc)} → queue offset {res['offset']} "
                                  f"(stored {t}; queue offsets [{res['minOffset']}, {res['maxOffset']}))"
                                  f"\nrule {res['rule']}" + (" (the store's generation)" if boundary == "auto" else ""))
            self.t_open.setEnabled(True)

        self.session.submit(time_search, topic, qid, ts, boundary, lane=self.lane,
                            on_result=done, on_error=self._failed)

    def _open_time_result(self) -> None:
        r = self.last_time_result
        if r:
            self.openInBrowser.emit(r["topic"], r["queueId"], r["offset"])

    # ---- results -------------------------------------------------------------------------------
    def _current_changed(self, current, previous) -> None:
        hit = self.results.data(current, HIT_ROLE) if current.isValid() else None
        self.detail.set_message(hit.message if hit else None)
        self.open_queue.setEnabled(hit is not None)

    def _open_selected(self) -> None:
        idx = self.table.currentIndex()
        hit = self.results.data(idx, HIT_ROLE) if idx.isValid() else None
        if hit is not None:
            m = hit.message
            self.openInBrowser.emit(m.topic, m.queueId, m.queueOffset)

    def _export(self, kind: str) -> None:
        hits = self.results.hits
        if not hits:
            return
        filt = "CSV (*.csv)" if kind == "csv" else "JSON Lines (*.jsonl)"
        path, _ = QFileDialog.getSaveFileName(self, "Export results", f"search-results.{kind}", filt)
        if not path:
            return
        try:
            n = export_csv(hits, path, self.utc) if kind == "csv" else export_jsonl(hits, path)
        except (OSError, ValueError, TypeError) as exc:
            error(self, "Export failed", exc)
            return
        self.status.emit(f"exported {n} results to {path}")

    def focus_key(self) -> None:
        self.modes.setCurrentIndex(0)
        self.k_key.setFocus()
        self.k_key.selectAll()

