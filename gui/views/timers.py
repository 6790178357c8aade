"""TimersView: the timer messages of a 5.x timer store, by fire time.

A lazy table (cells made on demand from the engine's list, computed once on a worker with
progress) with pending and delivered filters; for the selected message, where it is: its
records in `rmq_sys_wheel_timer` (one per roll), the timerlog units that schedule them, the
wheel slot its newest unit sits in (what TimerWheel.getSlot returns for it, and whether
timercheck's read clock has passed it) and its delivered copy. Any of those records opens in
the message detail below; "Show in Messages" opens it in its queue."""
from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel, QPushButton, QSplitter,
                               QTableView, QTextBrowser, QVBoxLayout, QWidget)

from engine.format.timer_layout import unit_kind

from ..models.columns_model import ColumnsModel
from ..timefmt import format_ms_readable
from ..workers import Background, RefreshWhenShown
from .detail_pane import MessageDetail

PENDING_COLOR = QColor(200, 100, 0)
DELIVERED_COLOR = QColor(30, 120, 30)
STAGES = {"inWheel": "in the wheel, due after the read clock", "notEnqueued": "no timerlog unit yet",
          "dequeued": "read clock passed, no delivered copy found", "delivered": "delivered"}


class TimerMessagesModel(ColumnsModel):
    COLUMNS = ["Fire time", "Status", "Stage", "Rolls", "Real topic", "Queue", "Wheel records", "Delivered copy",
               "Wheel slot", "Timerlog units", "UNIQ_KEY"]

    def __init__(self, parent=None):
        super().__init__(parent)
        self.messages: list = []
        self.rows = np.empty(0, dtype=np.int64)   # indices into `messages` that pass the filter
        self.utc = False

    def set_messages(self, messages: list, status: str | None = None, topic: str | None = None) -> None:
        self.beginResetModel()
        self.messages = messages
        self.rows = np.array([i for i, m in enumerate(messages) if (status is None or m.status == status)
                              and (topic is None or m.realTopic == topic)], dtype=np.int64)
        self.endResetModel()

    def message(self, row: int):
        return self.messages[int(self.rows[row])] if 0 <= row < len(self.rows) else None

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        m = self.message(index.row())
        c = index.column()
        if role == Qt.DisplayRole:
            units = m.units if m.units is not None else []
            cells = (format_ms_readable(m.fireTime, self.utc), m.status, m.stage, m.rollTimes, m.realTopic or "—",
                     "—" if m.realQueueId is None else m.realQueueId,
                     " ".join(map(str, m.commit_log_offsets)),
                     "—" if m.delivered_offset is None else m.delivered_offset,
                     "—" if m.wheelSlot is None else f"{m.wheelSlot:,}",
                     " ".join(str(int(u["pos"])) for u in units) or "—", m.uniqKey or "—")
            return str(cells[c])
        if role == Qt.ForegroundRole and c == 1:
            return QBrush(DELIVERED_COLOR if m.status == "delivered" else PENDING_COLOR)
        if role == Qt.ToolTipRole and c == 2:
            return STAGES.get(m.stage, m.stage)
        if role == Qt.TextAlignmentRole and c in (3, 5, 7, 8):
            return int(Qt.AlignRight | Qt.AlignVCenter)
        return None


class TimersView(RefreshWhenShown, QWidget):
    openRequested = Signal("qint64")   # commitlog offset of a record to show in its queue
    updated = Signal()

    def __init__(self, session=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self._store = None
        self._dirty = False
        self.timer = None
        self.current = None          # the TimerMessage shown
        self.all_messages: list = []  # the engine's TimerMessages, by fire time
        self.records: list[int] = []  # commitlog offsets offered in `record`
        self.background = Background(self)
        self.background.failed.connect(lambda ch, text: self.summary.setText(
            "Could not read the timer messages:\n" + text.strip().splitlines()[-1]))
        self.summary = QLabel("No store open.")
        self.summary.setWordWrap(True)
        self.status = QComboBox()
        self.status.addItems(["all", "pending", "delivered"])
        self.status.currentIndexChanged.connect(lambda *_: self._filter())
        self.topic = QComboBox()
        self.topic.setMinimumWidth(180)
        self.topic.currentIndexChanged.connect(lambda *_: self._filter())
        self.model = TimerMessagesModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setResizeContentsPrecision(200)   # widths from the first rows only
        self.table.selectionModel().currentRowChanged.connect(lambda cur, _: self.show_row(cur.row()))
        self.where = QTextBrowser()
        self.where.setOpenLinks(False)
        self.where.anchorClicked.connect(lambda url: self.show_record(int(url.toString().split(":", 1)[1])))
        self.record = QComboBox()
        self.record.currentIndexChanged.connect(self._record_chosen)
        self.open_button = QPushButton("Show in Messages")
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._open_current)
        self.detail = MessageDetail(self)
        top = QHBoxLayout()
        top.addWidget(QLabel("Status:"))
        top.addWidget(self.status)
        top.addWidget(QLabel("Real topic:"))
        top.addWidget(self.topic)
        top.addStretch(1)
        pick = QHBoxLayout()
        pick.addWidget(QLabel("Record:"))
        pick.addWidget(self.record, 1)
        pick.addWidget(self.open_button)
        lower_right = QWidget()
        lr = QVBoxLayout(lower_right)
        lr.setContentsMargins(0, 0, 0, 0)
        lr.addLayout(pick)
        lr.addWidget(self.detail, 1)
        lower = QSplitter(Qt.Horizontal)
        lower.addWidget(self.where)
        lower.addWidget(lower_right)
        lower.setStretchFactor(0, 5)
        lower.setStretchFactor(1, 6)
        split = QSplitter(Qt.Vertical)
        split.addWidget(self.table)
        split.addWidget(lower)
        split.setSizes([330, 420])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.summary)
        lay.addWidget(split, 1)
        if session is not None:
            self.background.lock = session.lock
            self.detail.positionRequested.connect(self._locate)
            session.opened.connect(lambda *_: self.set_store(session.store))
            session.aboutToClose.connect(self._closing)
            session.refreshed.connect(lambda changed: changed and self.set_store(session.store))
            self.set_store(session.store)

    # ---- store --------------------------------------------------------------------------------------
    def _closing(self, *_) -> None:
        self.set_store(None)
        self.background.wait()

    def set_store(self, store) -> None:
        self.background.cancel()
        self._store = store
        self.timer = store.timer if store is not None else None
        self.all_messages = []
        self.model.set_messages([])
        self.show_row(-1)
        self.summary.setText("No store open." if store is None else
                             "This store has no timer store." if self.timer is None else "Reading timer messages…")
        self.mark_stale(self.timer is not None)

    def set_utc(self, utc: bool) -> None:
        self.model.utc = self.detail.utc = utc
        self.model.layoutChanged.emit()
        self.detail.set_utc(utc)
        if self.current is not None:
            self._show_where(self.current)

    def refresh(self) -> None:
        self._dirty = False
        if self.timer is None:
            return
        store = self._store
        self.background.submit("messages", self.timer.messages_task, store, on_done=self._apply, pass_cancel=True,
                               on_progress=lambda p: self.summary.setText(
                                   f"Reading timer messages: {p.phase} {p.done:,}/{p.total:,}…"))

    def _apply(self, messages: list) -> None:
        self.all_messages = messages
        self.topic.blockSignals(True)
        self.topic.clear()
        self.topic.addItem("all")
        self.topic.addItems(sorted({m.realTopic for m in messages if m.realTopic}))
        self.topic.blockSignals(False)
        self._filter()
        ts = self.timer
        pending = sum(m.status == "pending" for m in messages)
        read = ts.last_read_time_ms
        self.summary.setText(
            f"<b>{len(messages):,}</b> timer messages: <b style='color:#c86400'>{pending:,} pending</b>, "
            f"<b style='color:#1e781e'>{len(messages) - pending:,} delivered</b>; read clock (timercheck "
            f"lastReadTimeMs) " + (format_ms_readable(read, self.model.utc) if read >= 0 else "unknown")
            + f"; wheel precision {ts.precision_ms} ms. Sorted by fire time (TIMER_OUT_MS).")
        self.updated.emit()

    def _filter(self) -> None:
        status = self.status.currentText()
        topic = self.topic.currentText()
        self.model.set_messages(self.all_messages, None if status == "all" else status,
                                None if topic in ("all", "") else topic)
        self.table.resizeColumnsToContents()
        self.show_row(-1)

    # ---- one message ----------------------------------------------------------------------------------
    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def show_row(self, row: int) -> None:
        m = self.model.message(row)
        self.current = m
        self.record.blockSignals(True)
        self.record.clear()
        self.records = []
        if m is None:
            self.record.blockSignals(False)
            self.where.setPlainText("")
            self.detail.set_message(None)
            self.open_button.setEnabled(False)
            return
        for i, r in enumerate(m.wheel_records):
            self.record.addItem(f"wheel record {i + 1} of {len(m.wheel_records)} at commitlog offset "
                                f"{r['commitLogOffset']} (rmq_sys_wheel_timer / {r['queueId']} / {r['queueOffset']})")
            self.records.append(r["commitLogOffset"])
        for d in m.delivered:
            self.record.addItem(f"delivered copy at commitlog offset {d['commitLogOffset']} "
                                f"({d['topic']} / {d['queueId']} / {d['queueOffset']})")
            self.records.append(d["commitLogOffset"])
        self.record.blockSignals(False)
        self._show_where(m)
        # the delivered copy when there is one, else the newest wheel record
        self.record.setCurrentIndex(len(self.records) - 1 if m.delivered else len(m.wheel_records) - 1)
        self._record_chosen(self.record.currentIndex())

    def _show_where(self, m) -> None:
        ts, utc = self.timer, self.model.utc
        t = lambda ms: html.escape(format_ms_readable(ms, utc))                      # noqa: E731
        rec = lambda off: f"<a href='rec:{off}'>{off}</a>"                            # noqa: E731
        out = [f"<b>{html.escape(m.uniqKey or '(no UNIQ_KEY)')}</b><br>real topic <b>{html.escape(m.realTopic or '—')}"
               f"</b> queue {m.realQueueId if m.realQueueId is not None else '—'} · fire time <b>{t(m.fireTime)}</b> · "
               f"<b>{m.status}</b> ({html.escape(STAGES.get(m.stage, m.stage))}) · rolled {m.rollTimes}×",
               "<p><b>1. commitlog records in rmq_sys_wheel_timer</b> (first put, then one per roll)<br>"]
        out += [f"&nbsp;&nbsp;offset {rec(r['commitLogOffset'])} · queue offset {r['queueOffset']} · stored "
                f"{t(r['storeTimestamp'])} · TIMER_ROLL_TIMES {r['rollTimes']}<br>" for r in m.wheel_records]
        out.append("<p><b>2. timerlog units</b> (slot time = write time + delayTime)<br>")
        units = m.units if m.units is not None else []
        out += [f"&nbsp;&nbsp;pos {int(u['pos'])} · {unit_kind(int(u['magic']))} (magic {int(u['magic'])}) · "
                f"written {t(int(u['currWriteTimeMs']))} + {int(u['delayTime'])} ms → slot "
                f"{ts.slot_of(int(u['currWriteTimeMs']) + int(u['delayTime'])):,} · prevPos {int(u['prevPos'])} · "
                f"for record {rec(int(u['offsetPy']))}<br>" for u in units] or ["&nbsp;&nbsp;none yet<br>"]
        out.append("<p><b>3. wheel slot</b><br>")
        if m.slotTimeMs is not None and ts.wheel is not None:
            s = ts.get_slot(m.slotTimeMs)
            read = ts.last_read_time_ms
            state = "unknown (no timercheck)" if read < 0 else (
                "processed: the read clock has passed it" if m.slotTimeMs <= read else "due: after the read clock")
            out.append(f"&nbsp;&nbsp;slot {m.wheelSlot:,} for {t(m.slotTimeMs)}: " + (
                "getSlot reads it empty (another lap)" if s.empty else
                f"firstPos {s.firstPos} · lastPos {s.lastPos} · num {s.num}") + f" · {state}<br>")
        else:
            out.append("&nbsp;&nbsp;none<br>")
        out.append("<p><b>4. delivered copy</b><br>")
        out += [f"&nbsp;&nbsp;offset {rec(d['commitLogOffset'])} · {html.escape(d['topic'])} / {d['queueId']} / "
                f"{d['queueOffset']} · stored {t(d['storeTimestamp'])}<br>" for d in m.delivered] \
            or ["&nbsp;&nbsp;none in the store<br>"]
        self.where.setHtml("".join(out))

    def _record_chosen(self, i: int) -> None:
        if 0 <= i < len(self.records):
            self.show_record(self.records[i], select=False)

    def show_record(self, offset: int, select: bool = True) -> None:
        """The record at a commitlog offset in the message detail (read under the session's lock)."""
        if select and offset in self.records:
            self.record.blockSignals(True)
            self.record.setCurrentIndex(self.records.index(offset))
            self.record.blockSignals(False)
        store = self._store
        if store is None:
            return
        m = (self.session.call(lambda s: s.look_message_by_offset(offset)) if self.session is not None
             else store.look_message_by_offset(offset))
        self.detail.set_message(m, "" if m is not None else f"no message at commitlog offset {offset}")
        self.open_button.setEnabled(m is not None)

    def _open_current(self) -> None:
        i = self.record.currentIndex()
        if 0 <= i < len(self.records):
            self.openRequested.emit(self.records[i])

    def _locate(self, message) -> None:
        from ..models.position import locate
        self.session.submit(locate, message, on_result=lambda p: self.detail.show_position(message, p),
                            on_error=lambda e: self.detail.position.setPlainText(f"could not locate: {e}"))

    def busy(self) -> bool:
        return self.background.busy

    def wait(self, msecs: int = 30000) -> bool:
        return self.background.wait(msecs)
