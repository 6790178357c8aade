"""Message detail: every header field, the properties, the body (text UTF-8/GBK, pretty JSON,
`hexdump -C`; auto-detected, with an override; big bodies truncated until "Show all"), copy
and save actions, and the message's position on disk (commitlog file and offset, CQ unit,
index entries pointing at it). Store content is only ever set as plain text."""
from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFontDatabase, QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QHeaderView, QLabel, QPlainTextEdit,
                               QPushButton, QSplitter, QStackedWidget, QTabWidget, QVBoxLayout, QWidget)

from engine import Message
from engine.format import body_decode as bd

from .. import body_format as bf
from ..consts import COMPRESSED_FLAG, magic_text, sys_flag_text
from ..models.position import Position
from ..timefmt import format_epoch_ms, format_ms
from .decoded_view import DecodedView, SchemaDialog
from .lineage_view import LineageView
from .tables import fill_table, make_table


VALUE_PX = 250         # the header's Value column at most: a time with its date wraps, the Meaning stays on screen
MEANING_MIN_PX = 160   # narrower than this, the header scrolls sideways rather than squeeze the Meaning


def mono_font():
    return QFontDatabase.systemFont(QFontDatabase.FixedFont)


def header_rows(m: Message, utc: bool) -> list[list]:
    """(field, value, meaning) for every MessageExt header field."""
    rows = [
        ["topic", m.topic, ""],
        ["queueId", m.queueId, ""],
        ["queueOffset", m.queueOffset, "queue offset (logical position in the ConsumeQueue)"],
        ["commitLogOffset", m.commitLogOffset, "commitlog offset (byte position of the record)"],
        ["physicalOffsetField", m.physicalOffsetField, "PHYSICALOFFSET as written in the record"],
        ["storeSize", m.storeSize, "TOTALSIZE of the record in bytes"],
        ["magicCode", m.magicCode, magic_text(m.magicCode)],
        ["bodyCRC", m.bodyCRC, "CRC-32 of the body, top bit cleared"],
        ["flag", m.flag, "user flag"],
        ["sysFlag", m.sysFlag, sys_flag_text(m.sysFlag)],
        ["bornTimestamp", format_epoch_ms(m.bornTimestamp, utc), "when the producer created it (epoch ms)"],
        ["bornHost", m.bornHost, ""],
        ["storeTimestamp", format_epoch_ms(m.storeTimestamp, utc), "when the broker stored it (epoch ms)"],
        ["storeHost", m.storeHost, ""],
        ["reconsumeTimes", m.reconsumeTimes, ""],
        ["preparedTransactionOffset", m.preparedTransactionOffset, ""],
        ["transactionType", m.transactionType, ""],
        ["msgId", m.msgId, "offset msgId: store host + port + commitlog offset"],
        ["uniqKey", m.uniqKey or "", "UNIQ_KEY: the producer's message id"],
        ["tags", m.tags or "", ""],
        ["tagsCode", m.tagsCode, "ConsumeQueue tagsCode (tag hash, or delivery time for delayed messages)"],
        ["keys", m.keys or "", ", ".join(m.key_list)],
        ["bodyLength", len(m.body), "bytes as stored" + (" (compressed)" if m.sysFlag & COMPRESSED_FLAG else "")],
        ["propertiesLength", len(m.propertiesRaw.encode("utf-8")), f"{len(m.properties)} properties"],
    ]
    return rows


def dledger_rows(e: dict | None) -> list[list]:
    """The DLedger entry header around a message of a DLedger store (engine: dledger_entry)."""
    if not e:
        return []
    return [["DLedger index", e["index"], "entry index in the replicated log (dense from 0)"],
            ["DLedger term", e["term"], "leader term when the entry was appended"],
            ["DLedger pos", e["pos"], "entry position; the message starts 48 bytes later"],
            ["DLedger size", e["size"], "entry size: 48-byte header + the message"],
            ["DLedger magic", e["magic"], "entry format (1)"],
            ["DLedger bodySize", e["bodySize"], "= storeSize"]]


def with_dledger(rows: list[list], e: dict | None) -> list[list]:
    """The header rows with the DLedger entry's right after commitLogOffset, where they matter."""
    at = next((i + 1 for i, r in enumerate(rows) if r[0] == "commitLogOffset"), len(rows))
    return rows[:at] + dledger_rows(e) + rows[at:]


class BodyView(QWidget):
    """The body in a chosen mode; `mode_used` says what auto picked."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.body = b""
        self.compressed = False
        self._decompress = None
        self._decompressed = None
        self.show_all = False
        self.mode_used = bf.UTF8
        self.sys_flag = 0
        self.topic = None
        self.schemas = None          # callable: topic -> (engine Schemas or None, why unusable)
        self.mode = QComboBox(self)
        for m in bf.MODES:
            self.mode.addItem(bf.MODE_LABELS[m], m)
        self.mode.setToolTip("How to show the body (Auto detects JSON, UTF-8, GBK or binary)")
        self.decompress = QCheckBox("Decompressed", self)
        self.decompress.setToolTip("Show the body as a consumer gets it (the store keeps it compressed)")
        self.decompress.setChecked(True)
        self.decompress.setEnabled(False)
        self.info = QLabel(self)
        self.info.setTextFormat(Qt.PlainText)
        self.show_all_button = QPushButton("Show all", self)
        self.show_all_button.setToolTip("The body is long: only the first part is shown")
        self.show_all_button.setVisible(False)
        self.text = QPlainTextEdit(self)
        self.text.setReadOnly(True)
        self.text.setFont(mono_font())
        self.text.setUndoRedoEnabled(False)
        self.decoded_view = DecodedView(self)
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.text)
        self.stack.addWidget(self.decoded_view)
        top = QHBoxLayout()
        top.addWidget(QLabel("Body as:"))
        top.addWidget(self.mode)
        top.addWidget(self.decompress)
        top.addWidget(self.info, 1)
        top.addWidget(self.show_all_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(top)
        lay.addWidget(self.stack, 1)
        self.mode.currentIndexChanged.connect(self._render)
        self.decoded_view.formatChosen.connect(self._render)
        self.decompress.toggled.connect(self._render)
        self.show_all_button.clicked.connect(self._show_all)

    def set_mode(self, mode: str) -> None:
        self.mode.setCurrentIndex(bf.MODES.index(mode))

    def set_body(self, body: bytes, compressed: bool, decompress=None, sys_flag: int = 0, topic=None) -> None:
        """`decompress` returns the consumer's view of a compressed body (Message.body_decompressed);
        `sys_flag` and `topic` let the Decoded view decompress and pick the topic's schema."""
        self.body = body
        self.sys_flag = sys_flag if compressed else 0
        self.topic = topic
        self.compressed = compressed
        self._decompress = decompress
        self._decompressed = None
        self.show_all = False
        self.decompress.setText("Decompressed")
        self.decompress.setEnabled(compressed)
        self._render()

    def data(self) -> bytes:
        """The bytes shown: decompressed when that box is ticked and it works."""
        if self.compressed and self.decompress.isChecked() and self._decompress is not None:
            if self._decompressed is None:
                try:
                    self._decompressed = self._decompress()
                except Exception as exc:  # unknown codec or damaged data: say so, show what is stored
                    self._decompressed = self.body
                    self.decompress.setText(f"Decompressed (failed: {type(exc).__name__})")
            return self._decompressed
        return self.body

    def _show_all(self) -> None:
        self.show_all = True
        self._render()

    def _decode_args(self) -> tuple[bytes, int]:
        """The bytes and sysFlag the decoder gets: the stored body and its flag (the pipeline
        decompresses), or the stored bytes as they are when "Decompressed" is off."""
        if self.compressed and self.decompress.isChecked():
            return self.body, self.sys_flag
        return self.data(), 0

    def _schemas(self):
        return self.schemas(self.topic) if self.schemas is not None and self.topic is not None else (None, "")

    def _render(self) -> None:
        data = self.data()
        mode = self.mode.currentData()
        decoded = None
        if mode in (bf.AUTO, bf.DECODED) and self.body:
            schemas, why = self._schemas()
            raw, flag = self._decode_args()
            if mode == bf.AUTO and self.decoded_view.chosen_format() is None:
                mode, decoded = bf.auto_mode(raw, flag, schemas)
            else:
                mode = bf.DECODED
            if mode == bf.DECODED:
                if decoded is None:
                    decoded = bd.decode_body(raw, flag, schemas, self.decoded_view.chosen_format())
                self.mode_used = bf.DECODED
                self.decoded_view.show_decoded(decoded, why)
                self.stack.setCurrentWidget(self.decoded_view)
                auto = "auto → " if self.mode.currentData() == bf.AUTO else ""
                self.info.setText(f"{auto}decoded {decoded.format}; {len(data):,} bytes")
                self.show_all_button.setVisible(False)
                return
        self.stack.setCurrentWidget(self.text)
        text, used, shown, truncated = bf.render(data, mode, self.show_all)
        self.mode_used = used
        self.text.setLineWrapMode(QPlainTextEdit.NoWrap if used == bf.HEX else QPlainTextEdit.WidgetWidth)
        self.text.setPlainText(text)  # never interpreted: HTML and escape sequences stay text
        auto = f"auto → {bf.MODE_LABELS[used]}; " if self.mode.currentData() == bf.AUTO else ""
        more = f"showing {shown:,} of {len(data):,} bytes" if truncated else f"{len(data):,} bytes"
        self.info.setText(auto + more)
        self.show_all_button.setVisible(truncated)

    def text_for_copy(self) -> str:
        if self.mode_used == bf.DECODED and self.decoded_view.decoded is not None:
            return self.decoded_view.decoded.text()
        enc = bf.GBK if self.mode_used == bf.GBK else bf.UTF8
        return self.data().decode(enc, errors="replace")


class MessageDetail(QWidget):
    sendAgainRequested = Signal(object)   # Message
    positionRequested = Signal(object)    # Message: the owner computes the position off-thread
    lineageRequested = Signal(object)     # Message: the owner follows its life off-thread (Lineage tab shown)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.message: Message | None = None
        self.dledger: dict | None = None   # the DLedger entry of the message shown, once located
        self.utc = False
        self.store_path = None      # with `settings`: where each topic's body schema is kept
        self.settings = None
        self.title = QLabel("No message selected", self)
        self.title.setTextFormat(Qt.PlainText)
        self.title.setTextInteractionFlags(Qt.TextSelectableByMouse)
        f = self.title.font()
        f.setBold(True)
        self.title.setFont(f)
        self.copy_text = QPushButton("Copy text", self)
        self.copy_hex = QPushButton("Copy hex", self)
        self.copy_b64 = QPushButton("Copy Base64", self)
        self.save = QPushButton("Save body…", self)
        self.send_again = QPushButton("Send again…", self)
        self.send_again.setToolTip("Open the send dialog with this message's topic, tags, keys, properties and body")
        self.send_again.setVisible(False)
        for b in (self.copy_text, self.copy_hex, self.copy_b64, self.save, self.send_again):
            b.setEnabled(False)
        self.copy_text.setToolTip("Copy the body as text (whole body, decoded as shown)")
        self.copy_hex.setToolTip("Copy the body as hex digits (whole body)")
        self.copy_b64.setToolTip("Copy the body as Base64 (whole body)")
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        for b in (self.copy_text, self.copy_hex, self.copy_b64, self.save, self.send_again):
            top.addWidget(b)

        self.header = make_table(["Field", "Value", "Meaning"])
        self.header.setWordWrap(True)   # long values and meanings wrap: no column is cut off
        self.header.verticalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.header.viewport().installEventFilter(self)   # Meaning takes what the width leaves
        self.properties = make_table(["Property", "Value"])
        self.position = QPlainTextEdit(self)
        self.position.setReadOnly(True)
        self.position.setFont(mono_font())
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.header, "Header")
        self.tabs.addTab(self.properties, "Properties")
        self.tabs.addTab(self.position, "Position")
        self.dispatch = QPlainTextEdit(self)  # LMQ multi-dispatch and inner-batch contents
        self.dispatch.setReadOnly(True)
        self.dispatch.setFont(mono_font())
        self.dispatch.setLineWrapMode(QPlainTextEdit.NoWrap)
        self.tabs.addTab(self.dispatch, "LMQ / Batch")
        self.lineage = LineageView(self)
        self._lineage_for = None
        self.tabs.addTab(self.lineage, "Lineage")
        self.tabs.currentChanged.connect(lambda *_: self._request_lineage())
        self.inner = None
        self.body = BodyView(self)
        self.body.schemas = self._topic_schemas
        self.body.decoded_view.schema_button.clicked.connect(self._edit_schema)
        split = QSplitter(Qt.Horizontal, self)
        split.addWidget(self.tabs)
        split.addWidget(self.body)
        split.setStretchFactor(0, 3)   # the header: field, value and its meaning, all on screen
        split.setStretchFactor(1, 2)
        self.split = split
        split.setChildrenCollapsible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(top)
        lay.addWidget(split, 1)

        self.copy_text.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.body.text_for_copy()))
        self.copy_hex.clicked.connect(lambda: QGuiApplication.clipboard().setText(bf.as_hex(self.body.data())))
        self.copy_b64.clicked.connect(lambda: QGuiApplication.clipboard().setText(bf.as_base64(self.body.data())))
        self.save.clicked.connect(self._save)
        self.send_again.clicked.connect(lambda: self.message and self.sendAgainRequested.emit(self.message))

    def _fill_header(self, rows: list[list]) -> None:
        """Field at its width, Value up to VALUE_PX (wrapping beyond), Meaning the rest, wrapped."""
        t = self.header
        fill_table(t, rows, numeric=set())
        t.resizeColumnToContents(0)
        t.resizeColumnToContents(1)
        t.setColumnWidth(1, min(t.columnWidth(1), VALUE_PX))
        self._fit_meaning()

    def _fit_meaning(self) -> None:
        t = self.header
        t.setColumnWidth(2, max(MEANING_MIN_PX, t.viewport().width() - t.columnWidth(0) - t.columnWidth(1)))

    def eventFilter(self, obj, event) -> bool:
        if obj is self.header.viewport() and event.type() == QEvent.Resize:
            self._fit_meaning()
        return super().eventFilter(obj, event)

    def set_store(self, path, settings) -> None:
        """The store shown (its topics' body schemas are kept per store) and the QSettings."""
        self.store_path, self.settings = path, settings

    def _topic_schemas(self, topic: str):
        return bf.schemas_for(bf.load_schema(self.settings, self.store_path, topic))

    def _edit_schema(self) -> None:
        if self.message is None or self.settings is None or self.store_path is None:
            return
        topic = self.message.topic
        dlg = SchemaDialog(topic, bf.load_schema(self.settings, self.store_path, topic), self)
        if dlg.exec() == SchemaDialog.Accepted:
            bf.save_schema(self.settings, self.store_path, topic, dlg.schema())
            self.body._render()

    def set_send_enabled(self, enabled: bool) -> None:
        self.send_again.setVisible(enabled)

    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        self.lineage.set_utc(utc)
        if self.message is not None:
            self._fill_header(with_dledger(header_rows(self.message, utc), self.dledger))

    def set_message(self, m: Message | None, note: str = "", inner=None) -> None:
        """`inner`: the inner message of an inner-batch record to show (body, properties)."""
        self.message = m
        self.inner = inner
        self.dledger = None
        for b in (self.copy_text, self.copy_hex, self.copy_b64, self.save, self.send_again):
            b.setEnabled(m is not None)
        if m is None:
            self.title.setText(note or "No message selected")
            self.header.setRowCount(0)
            self.properties.setRowCount(0)
            self.tabs.setTabText(1, "Properties")
            self.position.setPlainText("")
            self.dispatch.setPlainText("")
            self.body.set_body(b"", False)
            self.lineage.show_note(note or "No message selected")
            return
        self.title.setText(f"{m.topic} / queue {m.queueId} / queue offset {m.queueOffset}  ·  "
                           f"commitlog offset {m.commitLogOffset}  ·  {m.storeSize:,} B"
                           + (f"  ·  inner message #{inner.index + 1} of the batch, queue offset {inner.queueOffset}"
                              if inner is not None else ""))
        self._fill_header(header_rows(m, self.utc))
        props = [[k, v] for k, v in m.properties.items()]
        if inner is not None:  # the inner message's own properties, then the record's
            props = [[k, v] for k, v in inner.properties.items()] + [[f"(record) {k}", v] for k, v in props]
        fill_table(self.properties, props)
        self.tabs.setTabText(1, f"Properties ({len(props)})")
        if inner is not None:
            self.body.set_body(inner.body, False, topic=m.topic)
        else:
            self.body.set_body(m.body, bool(m.sysFlag & COMPRESSED_FLAG), m.body_decompressed, m.sysFlag, m.topic)
        self.position.setPlainText("locating…")
        self.dispatch.setPlainText("locating…")
        self.positionRequested.emit(m)
        self._request_lineage()

    def _request_lineage(self) -> None:
        """Follow the message's life when the Lineage tab is shown (once per message)."""
        m = self.message
        if m is not None and self.tabs.currentWidget() is self.lineage and self._lineage_for is not m:
            self._lineage_for = m
            self.lineage.show_note("following its life…")
            self.lineageRequested.emit(m)

    def show_lineage(self, m: Message, lives: list[dict]) -> None:
        if m is self.message:
            self.lineage.show_lives(lives, m.commitLogOffset)

    def show_position(self, m: Message, p: Position) -> None:
        if m is not self.message:
            return  # the user moved on
        lines = []
        if p.dledger is not None:
            self.dledger = p.dledger
            self._fill_header(with_dledger(header_rows(m, self.utc), p.dledger))
            e = p.dledger
            lines = ["DLedger entry (the message is its body)",
                     f"  index              {e['index']}",
                     f"  term               {e['term']}",
                     f"  pos                {e['pos']}  (commitlog offset - 48)",
                     f"  size               {e['size']}  (48-byte header + {e['bodySize']})", ""]
        lines += ["CommitLog",
                 f"  commitlog offset   {m.commitLogOffset}",
                 f"  file               {p.commitlog_file or '(no file holds it)'}",
                 f"  offset in file     {p.offset_in_file if p.offset_in_file is not None else '—'}",
                 f"  record size        {m.storeSize}",
                 "", "ConsumeQueue"]
        if p.cq_unit is None:
            lines.append(f"  {m.topic} / queue {m.queueId}: no unit at queue offset {m.queueOffset}")
        else:
            phy, size, code = p.cq_unit
            lines += [f"  queue              {m.topic} / {m.queueId}",
                      f"  queue offset       {m.queueOffset}",
                      f"  file               {p.cq_file}",
                      f"  position in file   {p.cq_position}",
                      f"  unit               commitLogOffset={phy} size={size} tagsCode={code}",
                      f"  unit points here   {'yes' if p.cq_matches else 'NO (the unit points elsewhere)'}"]
        lines += ["", f"Index entries (keys tried: {', '.join(p.index_keys_tried) or 'none'})"]
        if not p.index_hits:
            lines.append("  none")
        for h in p.index_hits:
            lines.append(f"  {h.file}  entry #{h.entry}  slot {h.slot}  key {h.key!r}  time {format_ms(h.timestamp, self.utc)}")
        self.position.setPlainText("\n".join(lines))
        self.dispatch.setPlainText("\n".join(dispatch_lines(p, self.inner)))

    def _save(self) -> None:
        if self.message is None:
            return
        m = self.message
        default = f"{m.topic}-{m.queueId}-{m.queueOffset}.bin".replace("%", "_").replace("|", "_")
        path, _ = QFileDialog.getSaveFileName(self, "Save message body", default)
        if not path:
            return
        data = self.body.data()
        try:
            with open(path, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            from .dialogs import error
            error(self, "Cannot save body", exc)


def dispatch_lines(p: Position, shown=None) -> list[str]:
    """The LMQ / Batch tab: the LMQ queues the record reached (positions from their CQs, the
    record's own INNER_MULTI_QUEUE_OFFSET beside them) and its inner batch."""
    out = []
    if p.lmq is not None:
        out.append("LMQ dispatch (INNER_MULTI_DISPATCH)")
        if p.lmq["problem"] == "[bug]":
            out.append("  NOT DISPATCHED: INNER_MULTI_DISPATCH and INNER_MULTI_QUEUE_OFFSET differ in length "
                       "(RocketMQ's [bug] case)")
        elif p.lmq["problem"]:
            out.append("  an offset element is not a number: RocketMQ's dispatch never finishes this record")
        out.append(f"  {'queue':<18} {'CQ offset':>9} {'property':>8}")
        for q in p.lmq["queues"]:
            at = q["queueOffset"] if q["queueOffset"] is not None else "—"
            prop = q["propertyOffset"] if q["propertyOffset"] is not None else "—"
            why = ("  MISMATCH: the unit is elsewhere" if q["mismatch"] else
                   "" if q["dispatched"] else "  no unit (not an LMQ, '/' in the name, or not dispatched)")
            out.append(f"  {q['lmqName'] + ' / ' + str(q['queueId']):<18} {at:>9} {prop:>8}{why}")
        out.append("")
    if p.batch_unit is not None:
        u = p.batch_unit
        out += ["BatchConsumeQueue unit",
                f"  msgBaseOffset {u['msgBaseOffset']}  batchSize {u['batchSize']}  storeTimestamp "
                f"{u['storeTimestamp']}  tagsCode {u['tagsCode']}  compactedOffset {u['compactedOffset']}", ""]
    if p.inner is not None:
        out.append(f"Inner batch: {len(p.inner)} messages")
        out.append(f"  {'offset':>7} {'bytes':>6}  {'tags':<10} {'keys':<22} UNIQ_KEY")
        for i in p.inner:
            mark = "▶" if shown is not None and i.index == shown.index else " "
            out.append(f"{mark} {i.queueOffset:>7} {len(i.body):>6}  {i.tags or '':<10} {i.keys or '':<22} "
                       f"{i.uniqKey or '—'}")
    elif p.inner_error:
        out.append(f"Inner batch undecodable: {p.inner_error}")
    return out or ["No LMQ dispatch; not an inner-batch record."]
