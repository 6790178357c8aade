"""Small read-only tables (overview, properties, header fields) built from rows of values."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget

from ..body_format import visible_text
from ..textsafe import tip


def make_table(headers: list[str], parent: QWidget | None = None, stretch_last: bool = True) -> QTableWidget:
    t = QTableWidget(0, len(headers), parent)
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(22)
    t.setEditTriggers(QAbstractItemView.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectRows)
    t.setAlternatingRowColors(True)
    t.setWordWrap(False)
    t.horizontalHeader().setStretchLastSection(stretch_last)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
    return t


def fill_table(t: QTableWidget, rows: list[list], numeric: set[int] = frozenset(), tooltips: bool = True) -> None:
    """Cells are set as plain text items: store content is never interpreted as markup."""
    t.setSortingEnabled(False)
    t.setRowCount(len(rows))
    for i, row in enumerate(rows):
        for j, v in enumerate(row):
            it = QTableWidgetItem("" if v is None else visible_text(str(v), one_line=True))
            it.setFlags(Qt.ItemIsEnabled | Qt.ItemIsSelectable)
            if j in numeric:
                it.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            if tooltips and v is not None and len(str(v)) > 40:
                it.setToolTip(tip(str(v)))
            t.setItem(i, j, it)
    t.resizeColumnsToContents()
    for j in range(t.columnCount()):
        if t.columnWidth(j) > 420:
            t.setColumnWidth(j, 420)
