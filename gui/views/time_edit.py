"""A date-time picker that shows milliseconds and its zone (local or UTC)."""
from __future__ import annotations

from PySide6.QtCore import QDateTime, QTimeZone
from PySide6.QtWidgets import QDateTimeEdit, QHBoxLayout, QLabel, QWidget

from ..timefmt import zone_label

DISPLAY_FORMAT = "yyyy-MM-dd HH:mm:ss.zzz"


class MsDateTimeEdit(QWidget):
    """QDateTimeEdit with ms, plus a label naming the zone; value in epoch milliseconds."""

    def __init__(self, parent: QWidget | None = None, utc: bool = False):
        super().__init__(parent)
        self.edit = QDateTimeEdit(self)
        self.edit.setDisplayFormat(DISPLAY_FORMAT)
        self.edit.setCalendarPopup(True)
        self.zone = QLabel(self)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.edit, 1)
        lay.addWidget(self.zone)
        self.utc = not utc
        self.set_utc(utc)

    def set_utc(self, utc: bool) -> None:
        if utc == self.utc:
            return
        ms = self.ms() if hasattr(self, "_ready") else None
        self.utc = utc
        self.edit.setTimeZone(QTimeZone.utc() if utc else QTimeZone.systemTimeZone())
        self.zone.setText(zone_label(utc))
        self._ready = True
        if ms is not None:
            self.set_ms(ms)

    def ms(self) -> int:
        return self.edit.dateTime().toMSecsSinceEpoch()

    def set_ms(self, ms: int) -> None:
        tz = QTimeZone.utc() if self.utc else QTimeZone.systemTimeZone()
        self.edit.setDateTime(QDateTime.fromMSecsSinceEpoch(int(ms), tz))
