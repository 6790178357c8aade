"""Send test messages (only on a store opened read-write): topic (existing or new, checked
by RocketMQ's rules), queue (round robin or fixed), tags, keys, user properties, body (text,
JSON, hex or a file), count with templating, flush mode. Runs on a worker with progress and
cancel; the last message sent per topic is remembered."""
from __future__ import annotations

import json

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtWidgets import (QButtonGroup, QCheckBox, QComboBox, QDialog, QFileDialog, QFormLayout, QHBoxLayout,
                               QLabel, QLineEdit, QPlainTextEdit, QProgressBar, QPushButton, QRadioButton, QSpinBox,
                               QVBoxLayout, QWidget)

from engine import Message

from .. import send_logic as sl
from ..workers import Lane
from .detail_pane import mono_font

BODY_MODES = [(sl.BODY_TEXT, "Text (UTF-8)"), (sl.BODY_JSON, "JSON"), (sl.BODY_HEX, "Hex"), (sl.BODY_FILE, "File")]
FLUSH_MODES = [("end", "Flush once at the end"), ("each", "Flush after each message"),
               ("none", "Leave flushing to the store")]


class SendDialog(QDialog):
    sent = Signal(list)            # PutResults of a finished (or cancelled) run

    def __init__(self, session, topics: list[str], settings: QSettings | None = None,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Send test messages")
        self.session = session
        self.settings = settings
        self.lane = Lane(session.runner)
        self.results: list = []
        self._sent_count = 0

        self.topic = QComboBox(self)
        self.topic.setEditable(True)
        self.topic.setInsertPolicy(QComboBox.NoInsert)
        self.topic.addItems([t for t in topics if sl.topic_problem(t, producer=True) is None])
        self.topic_check = QLabel(self)
        self.topic_check.setTextFormat(Qt.PlainText)
        self.use_last = QPushButton("Use last sent", self)
        self.use_last.setToolTip("Fill the form with the last message sent to this topic")
        self.rr = QRadioButton("Round robin", self)
        self.fixed = QRadioButton("Fixed queue", self)
        self.rr.setChecked(True)
        grp = QButtonGroup(self)
        grp.addButton(self.rr)
        grp.addButton(self.fixed)
        self.queue = QSpinBox(self)
        self.queue.setRange(0, 65535)
        self.queue.setEnabled(False)
        self.tags = QLineEdit(self)
        self.tags.setPlaceholderText("TagA")
        self.keys = QLineEdit(self)
        self.keys.setPlaceholderText("space-separated keys, e.g. order-{n}")
        self.props = QPlainTextEdit(self)
        self.props.setPlaceholderText("user properties, one name=value per line")
        self.props.setMaximumHeight(70)
        self.body_mode = QComboBox(self)
        for m, label in BODY_MODES:
            self.body_mode.addItem(label, m)
        self.body = QPlainTextEdit(self)
        self.body.setFont(mono_font())
        self.body.setPlainText('{"hello": "RocketMQ", "n": {n}, "ts": {ts}}')
        self.body_mode.setCurrentIndex(0)
        self.file = QLineEdit(self)
        self.file.setPlaceholderText("file whose bytes are the body")
        self.choose = QPushButton("Choose…", self)
        self.count = QSpinBox(self)
        self.count.setRange(1, 1_000_000)
        self.count.setGroupSeparatorShown(True)
        self.template = QCheckBox("Templates: {i} {n} {count} {ts} {uuid} in body, tags, keys, properties", self)
        self.template.setChecked(True)
        self.flush = QComboBox(self)
        for m, label in FLUSH_MODES:
            self.flush.addItem(label, m)
        self.progress = QProgressBar(self)
        self.progress.setVisible(False)
        self.result = QLabel(self)
        self.result.setTextFormat(Qt.PlainText)
        self.result.setWordWrap(True)
        self.send_button = QPushButton("Send", self)
        self.send_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel sending", self)
        self.cancel_button.setVisible(False)
        self.close_button = QPushButton("Close", self)

        form = QFormLayout()
        t_row = QHBoxLayout()
        t_row.addWidget(self.topic, 1)
        t_row.addWidget(self.use_last)
        form.addRow("Topic:", t_row)
        form.addRow("", self.topic_check)
        q_row = QHBoxLayout()
        q_row.addWidget(self.rr)
        q_row.addWidget(self.fixed)
        q_row.addWidget(self.queue)
        q_row.addStretch(1)
        form.addRow("Queue:", q_row)
        form.addRow("Tags:", self.tags)
        form.addRow("Keys:", self.keys)
        form.addRow("Properties:", self.props)
        form.addRow("Body as:", self.body_mode)
        form.addRow("Body:", self.body)
        f_row = QHBoxLayout()
        f_row.addWidget(self.file, 1)
        f_row.addWidget(self.choose)
        form.addRow("File:", f_row)
        c_row = QHBoxLayout()
        c_row.addWidget(self.count)
        c_row.addWidget(self.template, 1)
        form.addRow("Count:", c_row)
        form.addRow("Flush:", self.flush)
        buttons = QHBoxLayout()
        buttons.addWidget(self.progress, 1)
        buttons.addStretch(1)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.close_button)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.result)
        lay.addLayout(buttons)
        self.resize(720, 620)

        self.topic.currentTextChanged.connect(self._check_topic)
        self.fixed.toggled.connect(self.queue.setEnabled)
        self.body_mode.currentIndexChanged.connect(self._mode_changed)
        self.choose.clicked.connect(self._choose_file)
        self.send_button.clicked.connect(self.send)
        self.cancel_button.clicked.connect(self.cancel)
        self.close_button.clicked.connect(self.reject)
        self.use_last.clicked.connect(self.load_last)
        self._mode_changed()
        self._check_topic(self.topic.currentText())

    # ---- form ------------------------------------------------------------------------------
    def _check_topic(self, topic: str) -> None:
        err = sl.topic_problem(topic, producer=True)
        exists = self.topic.findText(topic) >= 0
        if err:
            self.topic_check.setText(err)
            self.topic_check.setStyleSheet("color:#a01010")
        else:
            self.topic_check.setText("existing topic" if exists else "new topic: it is created by the first message")
            self.topic_check.setStyleSheet("color:#206020")
        self.send_button.setEnabled(err is None)
        self.use_last.setEnabled(self._last_key(topic) is not None and self._remembered(topic) is not None)

    def _mode_changed(self) -> None:
        is_file = self.body_mode.currentData() == sl.BODY_FILE
        self.body.setEnabled(not is_file)
        self.file.setEnabled(is_file)
        self.choose.setEnabled(is_file)

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Body from file")
        if path:
            self.file.setText(path)

    def plan(self) -> sl.SendPlan:
        mode = self.body_mode.currentData()
        return sl.SendPlan(
            topic=self.topic.currentText().strip(), body_mode=mode,
            body_text=self.file.text() if mode == sl.BODY_FILE else self.body.toPlainText(),
            count=self.count.value(), queue_id=self.queue.value() if self.fixed.isChecked() else None,
            tags=self.tags.text().strip(), keys=self.keys.text().strip(),
            properties=sl.parse_properties(self.props.toPlainText()), flush=self.flush.currentData(),
            template=self.template.isChecked())

    def prefill(self, m: Message) -> None:
        """Send again: the form takes a shown message's topic, tags, keys, user properties, body."""
        self.topic.setCurrentText(m.topic)
        self.tags.setText(m.tags or "")
        self.keys.setText(m.keys or "")
        self.props.setPlainText("\n".join(f"{k}={v}" for k, v in m.properties.items()
                                          if k not in sl.RESERVED_PROPERTIES))
        self.template.setChecked(False)
        try:
            text = m.body.decode("utf-8")
            self.body_mode.setCurrentIndex(0)
            self.body.setPlainText(text)
        except UnicodeDecodeError:
            self.body_mode.setCurrentIndex(2)
            self.body.setPlainText(m.body.hex(" "))

    # ---- remembering ---------------------------------------------------------------------------
    def _last_key(self, topic: str) -> str | None:
        return f"send/last/{topic}" if topic and self.settings is not None else None

    def _remembered(self, topic: str) -> dict | None:
        key = self._last_key(topic)
        if key is None:
            return None
        raw = self.settings.value(key)
        try:
            return json.loads(raw) if raw else None
        except (TypeError, ValueError):
            return None

    def _remember(self, plan: sl.SendPlan) -> None:
        key = self._last_key(plan.topic)
        if key is None:
            return
        self.settings.setValue(key, json.dumps({
            "queue_id": plan.queue_id, "tags": plan.tags, "keys": plan.keys, "properties": plan.properties,
            "body_mode": plan.body_mode, "body_text": plan.body_text, "count": plan.count,
            "flush": plan.flush, "template": plan.template}))

    def load_last(self) -> None:
        d = self._remembered(self.topic.currentText().strip())
        if not d:
            return
        self.fixed.setChecked(d.get("queue_id") is not None)
        self.rr.setChecked(d.get("queue_id") is None)
        self.queue.setValue(d.get("queue_id") or 0)
        self.tags.setText(d.get("tags", ""))
        self.keys.setText(d.get("keys", ""))
        self.props.setPlainText("\n".join(f"{k}={v}" for k, v in (d.get("properties") or {}).items()))
        modes = [m for m, _ in BODY_MODES]
        if d.get("body_mode") in modes:
            self.body_mode.setCurrentIndex(modes.index(d["body_mode"]))
        if d.get("body_mode") == sl.BODY_FILE:
            self.file.setText(d.get("body_text", ""))
        else:
            self.body.setPlainText(d.get("body_text", ""))
        self.count.setValue(int(d.get("count", 1)))
        self.template.setChecked(bool(d.get("template", True)))
        fl = [m for m, _ in FLUSH_MODES]
        if d.get("flush") in fl:
            self.flush.setCurrentIndex(fl.index(d["flush"]))

    # ---- sending ---------------------------------------------------------------------------------
    def send(self) -> None:
        try:
            plan = self.plan()
            plan.check()
        except (ValueError, OSError) as exc:
            self._show_result(f"Not sent: {exc}", ok=False)
            return
        self._remember(plan)
        self._sent_count = 0
        self._set_sending(True)
        self.progress.setRange(0, plan.count)
        self.progress.setValue(0)

        def progress(p):
            self._sent_count = p.done
            self.progress.setValue(p.done)

        def finished(results):
            self._set_sending(False)
            self.results = list(results)
            last = self.results[-1] if self.results else None
            where = (f"; last: {last.topic} / queue {last.queueId} / queue offset {last.queueOffset}, "
                     f"commitlog offset {last.commitLogOffset}, msgId {last.msgId}") if last else ""
            self._show_result(f"Sent {len(self.results)} message{'s' if len(self.results) != 1 else ''}{where}", ok=True)
            self.session.notify_changed()
            self.sent.emit(self.results)

        def failed(exc):
            self._set_sending(False)
            self._show_result(f"Failed after {self._sent_count} sent: {exc}", ok=False)
            if self._sent_count:
                self.session.notify_changed()

        self.session.submit(sl.send, plan, lane=self.lane, on_result=finished, on_error=failed,
                            on_progress=progress)

    def cancel(self) -> None:
        n = self._sent_count
        self.lane.invalidate()
        self._set_sending(False)
        self._show_result(f"Cancelled after {n} sent", ok=False)
        if n:
            self.session.notify_changed()

    @property
    def sending(self) -> bool:
        return self.lane.busy

    def _set_sending(self, on: bool) -> None:
        self.progress.setVisible(on)
        self.cancel_button.setVisible(on)
        self.send_button.setEnabled(not on)

    def _show_result(self, text: str, ok: bool) -> None:
        self.result.setText(text)
        self.result.setStyleSheet("color:#206020" if ok else "color:#a01010")

    def reject(self) -> None:
        if self.sending:
            self.cancel()
        super().reject()
