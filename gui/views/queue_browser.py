"""The message browser of one queue: navigation (jump to queue offset, to time, first/last),
the filter row, live tail, the lazy table and the message detail below it."""
from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, QRegularExpression, Qt, QTimer, Signal
from PySide6.QtGui import QFontDatabase, QFontMetrics, QRegularExpressionValidator
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QProgressBar, QPushButton, QSpinBox, QSplitter, QStyledItemDelegate, QTableView,
                               QToolButton, QVBoxLayout, QWidget)

from engine import Message

from ..models import message_table as mt
from ..models.filters import MessageFilter, scan_queue
from ..models.queue_rows import inner_at, read_message
from ..models.search import time_search
from ..workers import Lane
from .detail_pane import MessageDetail
from .time_edit import MsDateTimeEdit

# the widest text each fixed column is sized for (font metrics, so any font fits); the body
# preview is last and takes the rest: at 1440 px wide the whole row is on screen
COLUMN_SAMPLES = {mt.COL_QOFF: "00000000", mt.COL_TIME: "2026-11-22T01:25:26.891+08:00",
                  mt.COL_TAGS: "TagA TagB", mt.COL_KEYS: "order-00056 mk", mt.COL_SIZE: "4194304",
                  mt.COL_PHY: "000000000000"}
MSGID_SAMPLE = "0A00000500002A9F0000000000012345"   # an IPv4 offset msgId: 32 hex digits, whole


class MiddleElide(QStyledItemDelegate):
    """Msg IDs in the fixed-width font, elided in the middle: every row is cut at the same
    place (an IPv6 id keeps its host and its commitlog offset), an IPv4 id fits whole."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.font = QFontDatabase.systemFont(QFontDatabase.FixedFont)
        size = parent.font().pointSizeF() if parent is not None else -1
        if size > 0:   # a little smaller than the proportional text, so the whole id fits at 1440 px
            self.font.setPointSizeF(size * 0.9)

    def initStyleOption(self, option, index) -> None:
        super().initStyleOption(option, index)
        option.textElideMode = Qt.ElideMiddle
        option.font = self.font


class QueueBrowser(QWidget):
    messageShown = Signal(object)       # the Message now in the detail pane (or None)
    status = Signal(str)                # one-line status for the status bar

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.model = mt.QueueTableModel(session, self)
        self._scan_lane = Lane(session.runner)
        self._time_lane = Lane(session.runner)
        self._select_when_loaded: int | None = None
        self._shown_offset: int | None = None

        # -- navigation row
        self.title = QLabel("Select a queue in the tree", self)
        self.title.setTextFormat(Qt.PlainText)
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.offset_edit = QLineEdit(self)
        self.offset_edit.setPlaceholderText("queue offset")
        self.offset_edit.setValidator(QRegularExpressionValidator(QRegularExpression(r"\d{0,19}"), self))
        self.offset_edit.setToolTip("Go to a queue offset (Ctrl+G). Queue offsets count messages; "
                                    "commitlog offsets count bytes.")
        self.offset_edit.setMaximumWidth(130)
        self.go_offset = QPushButton("Go", self)
        self.time_edit = MsDateTimeEdit(self, compact=True)
        self.time_edit.setToolTip("Go to the first message stored at or after this time (binary search, Ctrl+T)")
        self.time_edit.edit.returnPressed.connect(lambda: self._go_time_clicked())
        self.go_time = QPushButton("Go to time", self)
        self.first = QToolButton(self)
        self.first.setText("First")
        self.first.setToolTip("First message (Ctrl+Home)")
        self.last = QToolButton(self)
        self.last.setText("Last")
        self.last.setToolTip("Last message (Ctrl+End)")
        self.tail = QToolButton(self)
        self.tail.setText("Live tail")
        self.tail.setCheckable(True)
        self.tail.setToolTip("Follow new messages as another process writes the store (re-reads every second)")
        nav = QHBoxLayout()
        nav.addWidget(self.title, 1)
        nav.addWidget(QLabel("Queue offset:"))
        nav.addWidget(self.offset_edit)
        nav.addWidget(self.go_offset)
        nav.addSpacing(10)
        nav.addWidget(self.time_edit)
        nav.addWidget(self.go_time)
        nav.addSpacing(10)
        nav.addWidget(self.first)
        nav.addWidget(self.last)
        nav.addWidget(self.tail)

        # -- filter row
        self.f_tags = QLineEdit(self)
        self.f_tags.setPlaceholderText("tags: TagA || TagB")
        self.f_key = QLineEdit(self)
        self.f_key.setPlaceholderText("key or UNIQ_KEY")
        self.f_prop = QLineEdit(self)
        self.f_prop.setPlaceholderText("property: name=value")
        self.f_body = QLineEdit(self)
        self.f_body.setPlaceholderText("body contains (or hex:0a1b)")
        self.f_count = QSpinBox(self)
        self.f_count.setRange(1, 10_000_000)
        self.f_count.setValue(10_000)
        self.f_count.setSingleStep(1000)
        self.f_count.setGroupSeparatorShown(True)
        self.f_count.setMaximumWidth(100)
        self.f_count.setToolTip("How many queue offsets to scan, from the selected row on")
        self.f_whole = QCheckBox("whole queue", self)
        self.f_whole.setToolTip("Scan every message of the queue (in the background, with progress; Cancel stops it)")
        self.f_whole.toggled.connect(lambda on: self.f_count.setEnabled(not on))
        self.f_apply = QPushButton("Filter", self)
        self.f_clear = QPushButton("Clear", self)
        self.f_progress = QProgressBar(self)
        self.f_progress.setMaximumWidth(140)
        self.f_progress.setVisible(False)
        self.f_cancel = QToolButton(self)
        self.f_cancel.setText("Cancel")
        self.f_cancel.setVisible(False)
        flt = QHBoxLayout()
        flt.addWidget(QLabel("Filter:"))
        for w in (self.f_tags, self.f_key, self.f_prop, self.f_body):
            flt.addWidget(w, 1)
        flt.addWidget(QLabel("scan"))
        flt.addWidget(self.f_count)
        flt.addWidget(self.f_whole)
        flt.addWidget(self.f_apply)
        flt.addWidget(self.f_clear)
        flt.addWidget(self.f_progress)
        flt.addWidget(self.f_cancel)

        # -- table
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setCornerButtonEnabled(False)
        vh = self.table.verticalHeader()
        vh.setVisible(False)
        vh.setSectionResizeMode(QHeaderView.Fixed)
        vh.setDefaultSectionSize(22)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.Interactive)
        hh.setStretchLastSection(True)
        self._msgid_delegate = MiddleElide(self.table)
        self.table.setItemDelegateForColumn(mt.COL_MSGID, self._msgid_delegate)
        self.fit_columns()
        self.info = QLabel(self)
        self.info.setTextFormat(Qt.PlainText)

        top = QWidget(self)
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.addLayout(nav)
        tl.addLayout(flt)
        tl.addWidget(self.table, 1)
        tl.addWidget(self.info)
        self.detail = MessageDetail(self)
        self.split = QSplitter(Qt.Vertical, self)
        self.split.addWidget(top)
        self.split.addWidget(self.detail)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        self.split.setChildrenCollapsible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.split)

        self.tail_timer = QTimer(self)
        self.tail_timer.setInterval(1000)
        self.tail_timer.timeout.connect(self._tail_tick)

        self.go_offset.clicked.connect(self._go_offset_clicked)
        self.offset_edit.returnPressed.connect(self._go_offset_clicked)
        self.go_time.clicked.connect(self._go_time_clicked)
        self.first.clicked.connect(self.go_first)
        self.last.clicked.connect(self.go_last)
        self.tail.toggled.connect(self.set_tail)
        self.f_apply.clicked.connect(self.apply_filter)
        for w in (self.f_tags, self.f_key, self.f_prop, self.f_body):
            w.returnPressed.connect(self.apply_filter)
        self.f_clear.clicked.connect(self.clear_filter)
        self.f_cancel.clicked.connect(self._cancel_scan)
        self.table.selectionModel().currentRowChanged.connect(self._current_changed)
        self.model.rowsLoaded.connect(self._rows_loaded)
        self.model.modelReset.connect(self._update_info)
        self.model.rowsInserted.connect(self._update_info)
        self.model.loadFailed.connect(lambda msg: self.status.emit(f"read failed: {msg}"))
        self._update_info()
        self._update_enabled()

    def fit_columns(self) -> None:
        """Fixed columns as wide as their widest expected text or their header, no wider."""
        fm = self.table.fontMetrics()
        hfm = self.table.horizontalHeader().fontMetrics()
        for col, sample in COLUMN_SAMPLES.items():
            header = str(self.model.headerData(col, Qt.Horizontal) or "")
            self.table.setColumnWidth(col, max(fm.horizontalAdvance(sample), hfm.horizontalAdvance(header)) + 18)
        mono = QFontMetrics(self._msgid_delegate.font)
        self.table.setColumnWidth(mt.COL_MSGID, mono.horizontalAdvance(MSGID_SAMPLE) + 10)

    # ---- queue ---------------------------------------------------------------------------------
    def set_queue(self, topic: str | None, queue_id: int | None, at_offset: int | None = None) -> None:
        self._scan_lane.invalidate()
        self._time_lane.invalidate()
        self._set_scanning(False)
        self._select_when_loaded = None
        self._shown_offset = None
        self.model.set_queue(topic, queue_id)
        self.detail.set_message(None)
        self.messageShown.emit(None)
        if topic is None:
            self.title.setText("Select a queue in the tree")
            self.time_edit.clear()
        else:
            self.title.setText(f"{topic} / queue {queue_id}")
            if self.model.rowCount():
                t0 = self.session.call(lambda s: s.store_time_at(topic, queue_id, self.model.min_offset))
                if t0 is not None and t0 >= 0:
                    self.time_edit.set_ms(t0)
                else:
                    self.time_edit.clear()
            else:
                self.time_edit.clear()
        self._update_enabled()
        self._update_info()
        if self.model.rowCount():
            self.model.load_now(0, 63)  # the first page is painted at once
            self.go_to_offset(self.model.min_offset if at_offset is None else at_offset)

    def _update_enabled(self) -> None:
        has = self.model.has_queue
        for w in (self.offset_edit, self.go_offset, self.time_edit, self.go_time, self.first, self.last,
                  self.f_apply, self.f_clear):
            w.setEnabled(has)
        can_tail = has and self.session.can_refresh
        self.tail.setEnabled(can_tail)
        self.tail.setToolTip("Follow new messages as another process writes the store (re-reads every second)"
                             if self.session.can_refresh else
                             "Live tail needs MessageStore.refresh(), which this engine does not have yet")

    def _update_info(self, *args) -> None:
        m = self.model
        if not m.has_queue:
            self.info.setText("")
            return
        n = m.max_offset - m.min_offset
        text = f"queue offsets [{m.min_offset}, {m.max_offset}) — {n:,} messages"
        if m.filtered is not None:
            text += f"  ·  FILTERED: {len(m.filtered):,} matching ({m.filter_text})"
        self.info.setText(text)

    # ---- navigation ------------------------------------------------------------------------------
    def select_row(self, row: int) -> None:
        if not 0 <= row < self.model.rowCount():
            return
        idx = self.model.index(row, 0)
        self.table.selectionModel().setCurrentIndex(
            idx, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)
        self.table.scrollTo(idx, QAbstractItemView.PositionAtCenter)

    def go_to_offset(self, offset: int) -> bool:
        """Select the row of a queue offset; out of range goes to the nearest end and says so."""
        m = self.model
        row = m.row_of_offset(offset)
        if row is None:
            self.status.emit("the queue is empty")
            return False
        if m.filtered is None and not (m.min_offset <= offset < m.max_offset):
            self.status.emit(f"queue offset {offset} is outside [{m.min_offset}, {m.max_offset}): "
                             f"showing {m.offset_of_row(row)}")
        self.select_row(row)
        return True

    def go_first(self) -> None:
        self.select_row(0)

    def go_last(self) -> None:
        self.select_row(self.model.rowCount() - 1)

    def _go_offset_clicked(self) -> None:
        text = self.offset_edit.text().strip()
        if text:
            self.go_to_offset(int(text))

    def _go_time_clicked(self) -> None:
        ms = self.time_edit.value()
        if ms is None:
            self.status.emit(self.time_edit.note.text() or "type a time first (e.g. 2026-11-28 16:00:00.000)")
            return
        self.go_to_time(ms)

    def go_to_time(self, ts_ms: int) -> None:
        m = self.model
        if not m.has_queue:
            return
        topic, qid = m.topic, m.queue_id

        def found(res):
            off = res["offset"]
            self.status.emit(f"time {ts_ms} → queue offset {off}")
            self.go_to_offset(min(off, m.max_offset - 1))

        self.session.submit(time_search, topic, qid, ts_ms, "lower", lane=self._time_lane,
                            on_result=found, on_error=lambda e: self.status.emit(f"time lookup failed: {e}"))

    # ---- selection -> detail -------------------------------------------------------------------
    def _current_changed(self, current, previous) -> None:
        if not current.isValid():
            return
        row = current.row()
        r = self.model.row_data(row)
        if r is None:
            self._select_when_loaded = self.model.offset_of_row(row)
            self.detail.set_message(None, f"queue offset {self._select_when_loaded}: loading…")
            return
        self._select_when_loaded = None
        self._show_row(r)

    def _rows_loaded(self, first: int, last: int) -> None:
        q = self._select_when_loaded
        if q is not None and first <= q <= last:
            idx = self.table.currentIndex()
            if idx.isValid() and self.model.offset_of_row(idx.row()) == q:
                r = self.model.row_data(idx.row(), request=False)
                if r is not None:
                    self._select_when_loaded = None
                    self._show_row(r)

    def _show_row(self, r) -> None:
        self._shown_offset = r.queueOffset
        if not r.ok:
            self.detail.set_message(None, f"queue offset {r.queueOffset}: {r.preview}")
            self.messageShown.emit(None)
            return
        m: Message | None = self.session.call(read_message, r.commitLogOffset, r.size, self.model.topic, self.model.queue_id,
                                               r.queueOffset)
        if m is None:
            self.detail.set_message(None, f"queue offset {r.queueOffset}: the record is gone")
        else:
            self.detail.set_message(m, inner=inner_at(m, r.innerIndex))
        self.messageShown.emit(m)


    # ---- filter ------------------------------------------------------------------------------
    def current_filter(self) -> MessageFilter:
        return MessageFilter(self.f_tags.text(), self.f_key.text(), self.f_prop.text(), self.f_body.text())

    def apply_filter(self) -> None:
        m = self.model
        if not m.has_queue:
            return
        flt = self.current_filter()
        if flt.empty:
            self.clear_filter()
            return
        try:
            flt.predicate()
        except ValueError as exc:
            self.status.emit(f"filter: {exc}")
            return
        idx = self.table.currentIndex()
        whole = self.f_whole.isChecked()
        if whole:
            start, end = m.min_offset, m.max_offset
        else:
            start = m.offset_of_row(idx.row()) if idx.isValid() and m.filtered is None else m.min_offset
            end = min(m.max_offset, start + self.f_count.value())
        self._set_scanning(True)
        self.f_progress.setRange(0, max(1, end - start))
        self.f_progress.setValue(0)
        self.f_progress.setFormat("%p%" if whole else "%v")

        def done(result):
            matches, scanned_end = result
            self._set_scanning(False)
            where = "the whole queue" if whole and scanned_end >= end else "queue offsets"
            desc = f"{flt.describe()} in {where} [{start}, {scanned_end})"
            m.set_filtered(matches, desc)
            self.status.emit(f"filter: {len(matches):,} of {scanned_end - start:,} scanned match ({flt.describe()})"
                             + ("; stopped at the first matches, narrow the filter" if scanned_end < end else ""))
            if matches:
                self.select_row(0)

        def failed(exc):
            self._set_scanning(False)
            self.status.emit(f"filter failed: {exc}")

        self.session.submit(scan_queue, m.topic, m.queue_id, start, end, flt, lane=self._scan_lane,
                            on_result=done, on_error=failed,
                            on_progress=lambda p: self.f_progress.setValue(p.done))

    def clear_filter(self) -> None:
        self._scan_lane.invalidate()
        self._set_scanning(False)
        q = self._shown_offset
        self.model.clear_filter()
        if q is not None:
            self.go_to_offset(q)

    def _cancel_scan(self) -> None:
        self._scan_lane.invalidate()
        self._set_scanning(False)
        self.status.emit("filter cancelled")

    def _set_scanning(self, on: bool) -> None:
        self.f_progress.setVisible(on)
        self.f_cancel.setVisible(on)
        self.f_apply.setEnabled(not on and self.model.has_queue)

    @property
    def scanning(self) -> bool:
        return self._scan_lane.busy

    # ---- live data ------------------------------------------------------------------------------
    def set_tail(self, on: bool) -> None:
        if on and self.session.can_refresh:
            self.tail_timer.start()
            self.go_last()
        else:
            self.tail_timer.stop()
            if self.tail.isChecked() and not on:
                self.tail.setChecked(False)

    def _tail_tick(self) -> None:
        self.session.refresh()

    def on_store_changed(self) -> None:
        """The store grew (refresh or our own send): extend the table, follow the tail."""
        if not self.model.has_queue:
            return
        added, removed = self.model.update_bounds()
        if added or removed:
            self._update_info()
        if self.tail.isChecked() and (added or removed):
            self.go_last()

    def set_utc(self, utc: bool) -> None:
        self.model.set_utc(utc)
        self.time_edit.set_utc(utc)
        self.detail.set_utc(utc)

    def focus_offset(self) -> None:
        self.offset_edit.setFocus()
        self.offset_edit.selectAll()

    def focus_time(self) -> None:
        self.time_edit.edit.setFocus()
        self.time_edit.edit.selectAll()
