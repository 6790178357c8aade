"""QueueTableModel: the lazy message table of one ConsumeQueue.

rowCount is exact (maxOffset - minOffset: the CQ's length) and row r is queue offset
minOffset + r. Only rows that are painted are read, in blocks (BlockCache), on workers;
until a block arrives its cells show a placeholder. Results for another queue or another
store are dropped by a generation token. With a filter applied, the model shows the rows a
filter scan matched instead (their queue offsets are kept, so nothing is renumbered)."""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor

from ..body_format import visible_text
from ..textsafe import tip
from ..timefmt import format_ms, zone_label
from .block_cache import BlockCache
from .queue_rows import QueueRow, read_rows

PLACEHOLDER = "…"
COL_QOFF, COL_TIME, COL_TAGS, COL_KEYS, COL_SIZE, COL_PHY, COL_MSGID, COL_BODY = range(8)
HEADERS = ["Queue offset", "Store time", "Tags", "Keys", "Size", "CommitLog offset", "Msg ID", "Body preview"]
HEADER_TIPS = [
    "Queue offset: the message's logical position in this ConsumeQueue (unit number)",
    "STORETIMESTAMP: when the broker stored the message",
    "TAGS property",
    "KEYS property (space-separated keys, each indexed)",
    "TOTALSIZE of the commitlog record in bytes (CQ unit size)",
    "CommitLog offset: byte position of the record in the CommitLog (CQ unit commitLogOffset)",
    "Offset msgId: store host + port + commitlog offset",
    "The first bytes of the body (rows never read whole bodies)",
]
NUMERIC = {COL_QOFF, COL_SIZE, COL_PHY}
ROW_ROLE = Qt.UserRole + 1       # the QueueRow or None
OFFSET_ROLE = Qt.UserRole + 2    # the queue offset (int)
_GREY = QBrush(QColor(140, 140, 140))
_RED = QBrush(QColor(170, 30, 30))
# roles and alignments as plain ints: data() runs for every painted cell and role
_DISPLAY, _TOOLTIP, _FOREGROUND, _ALIGN = (int(Qt.DisplayRole.value), int(Qt.ToolTipRole.value),
                                           int(Qt.ForegroundRole.value), int(Qt.TextAlignmentRole.value))
_ROW, _OFFSET = int(ROW_ROLE), int(OFFSET_ROLE)
_HANDLED = frozenset({_DISPLAY, _TOOLTIP, _FOREGROUND, _ALIGN, _ROW, _OFFSET})
_RIGHT = int((Qt.AlignRight | Qt.AlignVCenter).value)
_LEFT = int((Qt.AlignLeft | Qt.AlignVCenter).value)
_FLAGS = Qt.ItemIsEnabled | Qt.ItemIsSelectable


class QueueTableModel(QAbstractTableModel):
    rowsLoaded = Signal(int, int)     # first and last queue offset of a block that arrived
    loadFailed = Signal(str)
    boundsChanged = Signal(int, int)  # min, max

    def __init__(self, session, parent=None, block_size: int = 128, max_blocks: int = 96):
        super().__init__(parent)
        self.session = session
        self.cache = BlockCache(block_size, max_blocks)
        self.topic: str | None = None
        self.queue_id: int | None = None
        self.min_offset = 0
        self.max_offset = 0
        self.utc = False
        self._gen = 0
        self._wanted: list[int] = []
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(0)
        self._flush_timer.timeout.connect(self._flush)
        self.filtered: list[QueueRow] | None = None
        self.filter_text = ""

    # ---- which queue -------------------------------------------------------------------------
    def set_queue(self, topic: str | None, queue_id: int | None) -> None:
        self.beginResetModel()
        self._gen += 1
        self.cache.clear()
        self._wanted.clear()
        self.filtered = None
        self.filter_text = ""
        self.topic, self.queue_id = topic, queue_id
        self.min_offset, self.max_offset = self._read_bounds()
        self.endResetModel()
        self.boundsChanged.emit(self.min_offset, self.max_offset)

    def clear(self) -> None:
        self.set_queue(None, None)

    @property
    def has_queue(self) -> bool:
        return self.topic is not None and self.session.store is not None

    def _read_bounds(self) -> tuple[int, int]:
        if self.topic is None or self.session.store is None:
            return 0, 0
        b = self.session.call(lambda s: s.queue_bounds(self.topic, self.queue_id))  # any kind of queue
        return (b[1], b[2]) if b is not None else (0, 0)

    def update_bounds(self) -> tuple[int, int]:
        """After a refresh or a send: grow the table at the end, or reset when the head moved.
        Returns (rows added, rows removed)."""
        if self.topic is None:
            return 0, 0
        mn, mx = self._read_bounds()
        if (mn, mx) == (self.min_offset, self.max_offset):
            return 0, 0
        if self.filtered is None and mn == self.min_offset and mx > self.max_offset:
            old = self.max_offset - self.min_offset
            last_block = self.cache.block_of(max(self.max_offset - 1, 0))
            self.cache.drop_block(last_block)  # it may have been read short
            self.beginInsertRows(QModelIndex(), old, mx - mn - 1)
            self.max_offset = mx
            self.endInsertRows()
            self.boundsChanged.emit(mn, mx)
            return mx - mn - old, 0
        removed = max(0, mn - self.min_offset)
        keep_filter = self.filtered
        self.beginResetModel()
        self._gen += 1
        self.cache.clear()
        self.min_offset, self.max_offset = mn, mx
        if keep_filter is not None:
            self.filtered = [r for r in keep_filter if mn <= r.queueOffset < mx]
        self.endResetModel()
        self.boundsChanged.emit(mn, mx)
        return 0, removed

    # ---- filter -------------------------------------------------------------------------------
    def set_filtered(self, rows: list[QueueRow], description: str) -> None:
        self.beginResetModel()
        self.filtered = list(rows)
        self.filter_text = description
        self.endResetModel()

    def clear_filter(self) -> None:
        if self.filtered is None:
            return
        self.beginResetModel()
        self.filtered = None
        self.filter_text = ""
        self.endResetModel()

    # ---- row <-> offset -----------------------------------------------------------------------
    def offset_of_row(self, row: int) -> int:
        if self.filtered is not None:
            return self.filtered[row].queueOffset
        return self.min_offset + row

    def row_of_offset(self, offset: int) -> int | None:
        """The row showing `offset` (in filter mode: the first match at or after it)."""
        if self.filtered is not None:
            for i, r in enumerate(self.filtered):
                if r.queueOffset >= offset:
                    return i
            return len(self.filtered) - 1 if self.filtered else None
        if self.max_offset == self.min_offset:
            return None
        return min(max(offset, self.min_offset), self.max_offset - 1) - self.min_offset

    def row_data(self, row: int, request: bool = True) -> QueueRow | None:
        if self.filtered is not None:
            return self.filtered[row] if 0 <= row < len(self.filtered) else None
        q = self.min_offset + row
        r = self.cache.get(q)
        if r is None and request:
            self._request(self.cache.block_of(q))
        return r

    def is_loaded(self, row: int) -> bool:
        return self.row_data(row, request=False) is not None

    def load_now(self, first_row: int, last_row: int) -> None:
        """Read rows synchronously (tests, and the first page right after opening)."""
        if self.filtered is not None or not self.has_queue:
            return
        first = self.min_offset + max(0, first_row)
        last = self.min_offset + min(last_row, self.rowCount() - 1)
        for b in range(self.cache.block_of(first), self.cache.block_of(last) + 1):
            if self.cache.has_block(b):
                continue
            lo, hi = self.cache.block_range(b)
            rows = self.session.call(read_rows, self.topic, self.queue_id, lo, hi)
            self._store_block(self._gen, b, rows)

    # ---- lazy loading ---------------------------------------------------------------------------
    def _request(self, block: int) -> None:
        if block in self._wanted:
            return
        self._wanted.append(block)
        if len(self._wanted) > 16:  # fast scrolling: only the newest requests matter
            del self._wanted[:-16]
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def _flush(self) -> None:
        wanted, self._wanted = self._wanted, []
        if not self.has_queue:
            return
        gen, topic, qid = self._gen, self.topic, self.queue_id
        for b in reversed(wanted):  # newest first
            if self.cache.has_block(b) or self.cache.is_pending(b):
                continue
            lo, hi = self.cache.block_range(b)
            self.cache.mark_pending(b)
            self.session.submit(
                read_rows, topic, qid, lo, hi,
                on_result=lambda rows, b=b, gen=gen: self._store_block(gen, b, rows),
                on_error=lambda exc, b=b, gen=gen: self._failed(gen, b, exc),
                stale=lambda gen=gen: gen != self._gen)

    def _store_block(self, gen: int, block: int, rows: list[QueueRow]) -> None:
        if gen != self._gen:
            return
        lo, hi = self.cache.block_range(block)
        start = max(lo, self.min_offset)
        rows = [r for r in rows if start <= r.queueOffset < min(hi, self.max_offset)]
        self.cache.put(block, start, rows)
        if self.filtered is None and rows:
            first = rows[0].queueOffset - self.min_offset
            last = rows[-1].queueOffset - self.min_offset
            self.dataChanged.emit(self.index(first, 0), self.index(last, len(HEADERS) - 1))
        if rows:
            self.rowsLoaded.emit(rows[0].queueOffset, rows[-1].queueOffset)

    def _failed(self, gen: int, block: int, exc: BaseException) -> None:
        if gen != self._gen:
            return
        self.cache.cancel_pending(block)
        self.loadFailed.emit(str(exc))

    # ---- time zone ------------------------------------------------------------------------------
    def set_utc(self, utc: bool) -> None:
        self.utc = utc
        self.headerDataChanged.emit(Qt.Horizontal, COL_TIME, COL_TIME)
        if self.rowCount():
            self.dataChanged.emit(self.index(0, COL_TIME), self.index(self.rowCount() - 1, COL_TIME))

    # ---- QAbstractTableModel ------------------------------------------------------------------
    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        if parent.isValid():
            return 0
        if self.filtered is not None:
            return len(self.filtered)
        return self.max_offset - self.min_offset

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(HEADERS)

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.DisplayRole):
        if orientation != Qt.Horizontal or not 0 <= section < len(HEADERS):
            return None
        if role == Qt.DisplayRole:
            if section == COL_TIME:
                return f"Store time ({zone_label(self.utc)})"
            return HEADERS[section]
        if role == Qt.ToolTipRole:
            return HEADER_TIPS[section]
        return None

    def flags(self, index):
        return _FLAGS if index.isValid() else Qt.NoItemFlags

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.DisplayRole):
        role = role if type(role) is int else int(role.value)
        if role not in _HANDLED or not index.isValid():
            return None
        row, col = index.row(), index.column()
        if not 0 <= row < self.rowCount():
            return None
        if role == _OFFSET:
            return self.offset_of_row(row)
        if role == _ALIGN:
            return _RIGHT if col in NUMERIC else _LEFT
        r = self.row_data(row)
        if role == _ROW:
            return r
        if role == _FOREGROUND:
            if r is None:
                return _GREY if col != COL_QOFF else None
            if not r.ok:
                return _RED if r.status != "filler" else _GREY
            return None
        if role == _TOOLTIP:
            if r is None:
                return "loading…"
            if not r.ok:
                return tip(r.preview)
            if col == COL_MSGID:
                return tip(f"offset msgId {r.msgId}\nUNIQ_KEY {r.uniqKey or '—'}")
            if col == COL_BODY:
                return tip(f"{r.bodyLength:,} bytes; preview: {r.preview}")
            if col in (COL_TAGS, COL_KEYS):
                return tip(r.tags if col == COL_TAGS else r.keys)
            if col == COL_TIME:
                return f"{r.storeTimestamp} ms since the epoch"
            return None
        if col == COL_QOFF:
            return str(self.offset_of_row(row))
        if r is None:
            return PLACEHOLDER
        if col == COL_TIME:
            return format_ms(r.storeTimestamp, self.utc) if r.ok else ""
        if col == COL_TAGS:
            return visible_text(r.tags, one_line=True) if r.tags else ""
        if col == COL_KEYS:
            return visible_text(r.keys, one_line=True) if r.keys else ""
        if col == COL_SIZE:
            return str(r.size) if r.status != "filler" else ""
        if col == COL_PHY:
            return str(r.commitLogOffset)
        if col == COL_MSGID:
            return r.msgId
        if col == COL_BODY:
            return r.preview
        return None
