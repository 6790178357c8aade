"""A time field that takes what a user types or pastes, by the CLI's one rule (parse_time:
epoch milliseconds, ISO-8601, or a time as the browser and the CLI print it), names its zone
(local or UTC), and says what it made of the text ("read as ..." or "not a time: ...").

A plain line edit, not a QDateTimeEdit: a section editor keeps the old value when the text is
typed after Home or over a triple-click selection, and refuses pasted ISO-8601."""
from __future__ import annotations

from datetime import datetime, timezone

from PySide6.QtCore import QDate, Qt, Signal
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import (QCalendarWidget, QHBoxLayout, QLabel, QLineEdit, QToolButton, QVBoxLayout,
                               QWidget)

from ..timefmt import format_ms_readable, read_time, zone_label, zone_of

PLACEHOLDER = "2026-11-28 16:00:00.000, ISO-8601 or epoch ms"


class TimeLineEdit(QLineEdit):
    """A line edit where a time the field put there (not one being typed) gives way to the
    next: typing at its start (after Home) or pasting with nothing selected replaces it, as a
    date field's sections would; typing elsewhere edits it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.shown = False      # the text is a time the field wrote, untouched since
        self.textEdited.connect(lambda _t: setattr(self, "shown", False))

    def show_time(self, text: str) -> None:
        self.setText(text)
        self.shown = True

    def keyPressEvent(self, ev) -> None:
        if self.shown and not self.hasSelectedText():
            typing = bool(ev.text()) and ev.text().isprintable() and not ev.modifiers() & ~Qt.ShiftModifier \
                and self.cursorPosition() == 0
            if typing or ev.matches(QKeySequence.Paste):
                self.selectAll()
        super().keyPressEvent(ev)


class MsDateTimeEdit(QWidget):
    """Value in epoch milliseconds (None while empty or not a time). `compact`: the note goes
    to the tooltip only (a crowded tool bar); otherwise it is a line under the field."""

    valueChanged = Signal(object)   # int epoch ms, or None when the text is not a time

    def __init__(self, parent: QWidget | None = None, utc: bool = False, compact: bool = False):
        super().__init__(parent)
        self.utc = utc
        self.compact = compact
        self._ms: int | None = None
        self._last_good: int | None = None
        self.edit = TimeLineEdit(self)
        self.edit.setPlaceholderText(PLACEHOLDER)
        self.edit.setClearButtonEnabled(True)
        self.edit.setMinimumWidth(self.edit.fontMetrics().horizontalAdvance("2026-11-28 16:00:00.000 +00:00") + 36)
        self.pick = QToolButton(self)
        self.pick.setText("▾")
        self.pick.setToolTip("Pick a date (the time of day stays)")
        self.pick.clicked.connect(self._calendar)
        self.calendar: QCalendarWidget | None = None
        self.zone = QLabel(self)
        self.note = QLabel(self)
        self.note.setTextFormat(Qt.PlainText)
        self.note.setTextInteractionFlags(Qt.TextSelectableByMouse)
        f = self.note.font()
        f.setPointSizeF(max(6.0, f.pointSizeF() * 0.9))
        self.note.setFont(f)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.edit, 1)
        row.addWidget(self.pick)
        row.addWidget(self.zone)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(1)
        lay.addLayout(row)
        lay.addWidget(self.note)
        self.note.setVisible(not compact)
        self.zone.setText(zone_label(utc))
        self.edit.textChanged.connect(self._read)
        self.edit.editingFinished.connect(self._tidy)
        self._read(self.edit.text())

    # ---- value ------------------------------------------------------------------------------
    def value(self) -> int | None:
        """What the text says, in epoch ms; None when empty or not a time."""
        return self._ms

    def ms(self) -> int:
        """The value, or the last time the field held (0 if it never held one)."""
        return self._ms if self._ms is not None else (self._last_good or 0)

    def set_ms(self, ms: int) -> None:
        self.edit.show_time(format_ms_readable(int(ms), self.utc))

    def clear(self) -> None:
        """Empty (a new store: the old store's time means nothing there)."""
        self.edit.clear()
        self._last_good = None

    def set_utc(self, utc: bool) -> None:
        """Show the same instant in the other zone (a zone-less text is read in the zone shown)."""
        if utc == self.utc:
            return
        ms = self._ms
        self.utc = utc
        self.zone.setText(zone_label(utc))
        if ms is not None:
            self.set_ms(ms)
        else:
            self._read(self.edit.text())

    # ---- reading -------------------------------------------------------------------------------
    def _read(self, text: str) -> None:
        ms, note = read_time(text, self.utc)
        bad = ms is None and bool(text.strip())
        self._ms = ms
        if ms is not None:
            self._last_good = ms
        self.note.setText(note)
        self.note.setStyleSheet("color: palette(link);" if not bad else "color: #c62828;")
        self.edit.setToolTip(note or f"Type or paste a time ({zone_label(self.utc)} unless it names its zone): "
                                     "2026-11-28 16:00:00.000, ISO-8601 (…T16:00:00+08:00, …Z) or epoch ms")
        self.edit.setStyleSheet("QLineEdit { border: 1px solid #c62828; }" if bad else "")
        self.valueChanged.emit(ms)

    def _tidy(self) -> None:
        """Once typed, a time reads as the browser writes them (the zone spelt out)."""
        if self._ms is not None:
            text = format_ms_readable(self._ms, self.utc)
            if text != self.edit.text():
                self.edit.show_time(text)

    # ---- date picker ------------------------------------------------------------------------------
    def _calendar(self) -> None:
        if self.calendar is None:
            self.calendar = QCalendarWidget(self)
            self.calendar.setWindowFlags(Qt.Popup)
            self.calendar.clicked.connect(self._date_picked)
        tz = zone_of(self.utc)
        now = datetime.fromtimestamp(self.ms() / 1000, timezone.utc).astimezone(tz) if self.ms() else datetime.now(tz)
        self.calendar.setSelectedDate(QDate(now.year, now.month, now.day))
        self.calendar.move(self.edit.mapToGlobal(self.edit.rect().bottomLeft()))
        self.calendar.show()

    def _date_picked(self, d: QDate) -> None:
        tz = zone_of(self.utc)
        cur = datetime.fromtimestamp(self.ms() / 1000, timezone.utc).astimezone(tz) if self.ms() else \
            datetime.now(tz).replace(hour=0, minute=0, second=0, microsecond=0)
        new = cur.replace(year=d.year(), month=d.month(), day=d.day())
        self.set_ms(int(round(new.timestamp() * 1000)))
        self.calendar.hide()
