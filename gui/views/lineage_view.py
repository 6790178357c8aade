"""The message detail's Lineage tab: the whole life of the message shown (engine.analysis.lineage,
the rules of docs/formats/lineage.md) as a timeline of record cards in write order, joined by
arrows, each in its role's colour with its store time, due time, attempt / group / delay level /
transaction action, LMQ queues, and which groups consumed it. A click on a card asks for that
record (`recordChosen`); the card of the message shown is outlined. Store text is plain text."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout, QWidget

from engine.analysis.lineage import lineage

from ..timefmt import format_epoch_ms

# one colour per role: the first record (blue), its parked copies (amber), deliveries (green),
# retries (orange), the dead letter (red), transaction steps (purple), resends (grey)
ROLE_COLOURS = {
    "original": "#d6e6fb", "producer-resend": "#e3e3e3", "delay-scheduled": "#fbe7b5", "delay-delivered": "#cdeccf",
    "retry-scheduled": "#fbe7b5", "retry": "#fbd5b0", "dlq": "#f6c0c0", "tx-half": "#e4d6f5", "tx-op": "#efe6fa",
    "tx-commit": "#cdeccf", "timer-scheduled": "#fbe7b5", "timer-delivered": "#cdeccf",
}
STATE_COLOURS = {"delivered": "#1b7a2b", "committed": "#1b7a2b", "resent": "#1b7a2b", "dead-lettered": "#b3261e",
                 "rolled-back": "#8a5a00", "unresolved": "#8a5a00"}
MARKS = {True: "✓", False: "✗"}


def compute_lineage(store, message) -> list[dict]:
    """The lives of the record shown (run on a worker: index walks, one record read per hop)."""
    return lineage(store, offset=message.commitLogOffset)


def consumed_marks(life: dict) -> dict[int, list[str]]:
    """commitLogOffset -> ["✓ group", "✗ group"] for the records a group's committed offset covers or not."""
    out: dict[int, list[str]] = {}
    for group, c in life["consumption"].items():
        for q in c["queues"]:
            out.setdefault(q["commitLogOffset"], []).append(f"{MARKS[q['pastCommittedOffset']]} {group}")
    return out


def card_lines(r: dict, utc: bool, marks: list[str]) -> list[str]:
    """The text of a record's card, line by line."""
    lines = [f"{r['topic']}  ·  queue {r['queueId']}  ·  queue offset {r['queueOffset']}",
             f"commitlog offset {r['commitLogOffset']}  ·  stored {format_epoch_ms(r['storeTimestamp'], utc)}"]
    facts = [f"{k} {r[k]}" for k in ("attempt", "group", "delayLevel", "txAction", "rollTimes") if r.get(k) is not None]
    if facts:
        lines.append("  ·  ".join(facts))
    if r.get("dueTimestamp"):
        lines.append(f"due {format_epoch_ms(r['dueTimestamp'], utc)}")
    if r.get("lmq"):
        lines.append("dispatched to " + ", ".join(f"{q['queue']} @{q['queueOffset']}" for q in r["lmq"]))
    if marks:
        lines.append("consumed by: " + "   ".join(marks))
    return lines


class RecordCard(QFrame):
    """One record of a life; a click calls `on_click(record)` once the event is over (what it
    shows may replace the timeline, this card with it)."""

    def __init__(self, record: dict, lines: list[str], current: bool, on_click, parent=None):
        super().__init__(parent)
        self.record = record
        self.on_click = on_click
        self.current = current
        self.setObjectName("card")
        colour = ROLE_COLOURS.get(record["role"], "#eeeeee")
        border = "2px solid #1f3f8f" if current else "1px solid #9a9a9a"
        self.setStyleSheet(f"QFrame#card {{ background: {colour}; border: {border}; border-radius: 6px; }}"
                           "QLabel { background: transparent; border: none; }")
        self.setCursor(Qt.PointingHandCursor)
        self.setToolTip("Show this record")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(8, 4, 8, 4)
        lay.setSpacing(1)
        self.role_label = QLabel(record["role"] + ("   (shown)" if current else ""), self)
        f = self.role_label.font()
        f.setBold(True)
        self.role_label.setFont(f)
        self.role_label.setTextFormat(Qt.PlainText)
        lay.addWidget(self.role_label)
        self.text = QLabel("\n".join(lines), self)
        self.text.setTextFormat(Qt.PlainText)
        lay.addWidget(self.text)
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Fixed)   # a long life scrolls, cards keep their text
        self.setMinimumHeight(self.sizeHint().height())

    def mousePressEvent(self, event) -> None:
        if event.button() == Qt.LeftButton:
            QTimer.singleShot(0, lambda r=self.record, f=self.on_click: f(r))
        event.accept()


class LineageView(QScrollArea):
    """The timeline; `show_lives` fills it, `recordChosen(record dict)` asks for a record."""
    recordChosen = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.utc = False
        self.lives: list[dict] = []
        self.current: int | None = None
        self.cards: list[RecordCard] = []
        self.show_note("No message selected")

    def _fresh(self) -> QVBoxLayout:
        body = QWidget(self)
        lay = QVBoxLayout(body)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.setSpacing(2)
        self.setWidget(body)
        self.cards = []
        return lay

    def show_note(self, text: str) -> None:
        lay = self._fresh()
        self.note = QLabel(text)
        self.note.setTextFormat(Qt.PlainText)
        lay.addWidget(self.note)
        lay.addStretch(1)

    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        if self.lives:
            self.show_lives(self.lives, self.current)

    def show_lives(self, lives: list[dict], current: int | None = None) -> None:
        """The lives (usually one) of the record at commitlog offset `current`."""
        self.lives, self.current = lives, current
        if not lives:
            self.show_note("No life found for this record")
            return
        lay = self._fresh()
        self.note = None
        for life in lives:
            lay.addWidget(self._life_header(life))
            marks = consumed_marks(life)
            for i, r in enumerate(life["records"]):
                if i:
                    arrow = QLabel("↓", self)
                    arrow.setAlignment(Qt.AlignHCenter)
                    lay.addWidget(arrow)
                card = RecordCard(r, card_lines(r, self.utc, marks.get(r["commitLogOffset"], [])),
                                  r["commitLogOffset"] == current, self.recordChosen.emit, self)
                self.cards.append(card)
                lay.addWidget(card)
            lay.addWidget(self._consumption(life))
        lay.addStretch(1)
        QTimer.singleShot(0, self._fit)

    def _fit(self) -> None:
        """The body as tall as its cards once laid out: the area scrolls rather than squeeze them."""
        body = self.widget()
        if body is not None:
            body.setMinimumHeight(body.minimumSizeHint().height())
        shown = next((c for c in self.cards if c.current), None)
        if shown is not None:   # the record shown, in view
            self.ensureWidgetVisible(shown, 0, 40)

    def _life_header(self, life: dict) -> QWidget:
        facts = [f"{k} {life[k]}" for k in ("group", "retries", "maxReconsumeTimes", "delayLevel", "txAction",
                                            "producerGroup") if life.get(k) is not None]
        if life.get("dueTimestamp") and life["finalState"].startswith("pending"):
            facts.append(f"due {format_epoch_ms(life['dueTimestamp'], self.utc)}")
        head = QLabel(f"{life['kind']} life of {life['topic']}: {life['finalState']}"
                      + (f"   ({', '.join(facts)})" if facts else "")
                      + f"\nuniqKey {life['uniqKey'] or '—'}  ·  keys {life['keys'] or '—'}  ·  "
                        f"{len(life['records'])} record(s) in write order", self)
        head.setTextFormat(Qt.PlainText)
        head.setStyleSheet(f"color: {STATE_COLOURS.get(life['finalState'], '#1f3f8f')}; font-weight: bold;")
        head.setWordWrap(True)
        return head

    def _consumption(self, life: dict) -> QWidget:
        row = QWidget(self)
        lay = QHBoxLayout(row)
        lay.setContentsMargins(0, 4, 0, 8)
        parts = []
        for g, c in life["consumption"].items():
            parts.append(f"{MARKS.get(c['consumed'], '–')} {g}" + ("" if c["consumed"] is not None else " (not subscribed)"))
        label = QLabel("Consumed: " + ("   ".join(parts) if parts else "no consumer offsets in the store"), row)
        label.setTextFormat(Qt.PlainText)
        label.setWordWrap(True)
        lay.addWidget(label)
        return row
