"""Table model of search results (messages found by key or id); false hits are marked."""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush, QColor

from ..body_format import visible_text
from ..textsafe import tip
from ..timefmt import format_ms, zone_label
from .search import SearchHit

HEADERS = ["#", "Match", "Store time", "Topic", "Queue", "Queue offset", "CommitLog offset", "Keys", "Tags",
           "Msg ID", "UNIQ_KEY"]
NUMERIC = {0, 4, 5, 6}
HIT_ROLE = Qt.UserRole + 1
_FALSE = QBrush(QColor(180, 30, 30))


class SearchResultsModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.hits: list[SearchHit] = []
        self.utc = False

    def set_hits(self, hits: list[SearchHit]) -> None:
        self.beginResetModel()
        self.hits = list(hits)
        self.endResetModel()

    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        self.headerDataChanged.emit(Qt.Horizontal, 2, 2)
        if self.hits:
            self.dataChanged.emit(self.index(0, 2), self.index(len(self.hits) - 1, 2))

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.hits)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation != Qt.Horizontal or role != Qt.DisplayRole or not 0 <= section < len(HEADERS):
            return None
        if section == 2:
            return f"Store time ({zone_label(self.utc)})"
        return HEADERS[section]

    def flags(self, index):
        return Qt.ItemIsEnabled | Qt.ItemIsSelectable if index.isValid() else Qt.NoItemFlags

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid() or not 0 <= index.row() < len(self.hits):
            return None
        h = self.hits[index.row()]
        m, col = h.message, index.column()
        if role == HIT_ROLE:
            return h
        if role == Qt.ForegroundRole:
            return _FALSE if h.false_hit else None
        if role == Qt.TextAlignmentRole:
            return int(Qt.AlignRight | Qt.AlignVCenter) if col in NUMERIC else int(Qt.AlignLeft | Qt.AlignVCenter)
        if role == Qt.ToolTipRole:
            if h.false_hit:
                return tip("RocketMQ's index matched only the 32-bit hash of topic#key and the time: "
                           "this message does not carry the key")
            return tip(str(self.data(index, Qt.DisplayRole) or "")) if col in (7, 8, 3) else None
        if role != Qt.DisplayRole:
            return None
        return [visible_text(str(v), one_line=True) for v in (index.row() + 1, h.match_text, format_ms(m.storeTimestamp, self.utc), m.topic, m.queueId,
                m.queueOffset, m.commitLogOffset, m.keys or "", m.tags or "", m.msgId, m.uniqKey or "")][col]
