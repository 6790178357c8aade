"""CollisionChainView: one slot's chain, walked from the slot through prevIndex links.

Each entry is a box with its entry number, keyHash, commitLogOffset, time and link, resolved to
its message and the real "topic#key" whose hash it stores. Colours tell entries that carry
the same keyHash as a different key (a true hash collision: a hash-only query cannot tell
them apart) from entries that only share the slot; with a key entered, the entries that
RocketMQ's select() returns are outlined in gold, and green when the message really has
that key. A walk ends at prevIndex 0; a link out of the file's entries or back to an entry
already met (a cycle) is drawn in red and not followed."""
from __future__ import annotations

import html

from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPainter, QPainterPath, QPen, QPolygonF
from PySide6.QtWidgets import (QComboBox, QGraphicsPathItem, QGraphicsPolygonItem, QGraphicsRectItem,
                               QGraphicsScene, QGraphicsTextItem, QGraphicsView, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QSpinBox, QVBoxLayout, QWidget)

from engine.format.javahash import index_key_hash

from engine import analysis as A
from .colors import KIND_COLORS, KIND_TEXT, QUERY_HIT_COLOR, hex_color
from gui.plot_theme import paper
from gui.timefmt import format_ms_readable

BOX_W, BOX_H, GAP_X, GAP_Y = 330, 104, 46, 30
DRAW_LIMIT = 300           # entries drawn; longer chains (damage) say how many more there are


CARD_INK = "#202020"       # the cards are light in either scheme: dark text on them


class EntryBox(QGraphicsRectItem):
    """A chain entry; clicking it asks to open its message."""

    def __init__(self, rect: QRectF, entry: A.ResolvedEntry, on_click):
        super().__init__(rect)
        self.entry = entry
        self._on_click = on_click
        self.setCursor(Qt.PointingHandCursor)
        self.setAcceptedMouseButtons(Qt.LeftButton)

    def mousePressEvent(self, ev) -> None:
        self._on_click(self.entry)
        ev.accept()


class CollisionChainView(QWidget):
    openRequested = Signal("qint64")
    updated = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._store = None
        self.utc = False
        self._names: list[str] = []
        self.resolution: A.ChainResolution | None = None
        self.boxes: list[EntryBox] = []
        self.files = QComboBox()
        self.files.setMinimumWidth(260)
        self.slot = QSpinBox()
        self.slot.setRange(0, 0)
        self.slot.setMinimumWidth(110)
        self.walk_button = QPushButton("Walk slot")
        self.walk_button.clicked.connect(lambda: self.show_slot(self.current_file(), self.slot.value()))
        self.key = QLineEdit()
        self.key.setPlaceholderText("topic#key, e.g. TopicTest#order-1")
        self.key.returnPressed.connect(lambda: self.show_key(self.current_file(), self.key.text()))
        self.key_button = QPushButton("Query key")
        self.key_button.clicked.connect(lambda: self.show_key(self.current_file(), self.key.text()))
        self.summary = QLabel("No store open.")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        legend = [f'<span style="background:{hex_color(KIND_COLORS[k][1])}; border:1px solid; '
                  f'color:{hex_color(KIND_COLORS[k][0])}">&nbsp;&#9632;&nbsp;</span>&nbsp;{KIND_TEXT[k]}'
                  for k in (A.MATCH, A.COLLISION, A.SAME_KEY, A.SHARES_SLOT, A.UNRESOLVED)]
        legend.append(f'<span style="color:{hex_color(QUERY_HIT_COLOR)}">&#9634;</span>&nbsp;gold outline: '
                      'the query returns it (hash match)')
        self.legend = QLabel("&nbsp;&nbsp; ".join(legend))
        self.legend.setWordWrap(True)
        self.scene = QGraphicsScene(self)
        self.scene.setBackgroundBrush(QColor(paper()))
        self.view = QGraphicsView(self.scene)
        self.view.setRenderHint(QPainter.Antialiasing)
        self.view.setAlignment(Qt.AlignLeft | Qt.AlignTop)
        top = QHBoxLayout()
        top.addWidget(QLabel("Index file:"))
        top.addWidget(self.files)
        top.addWidget(QLabel("slot"))
        top.addWidget(self.slot)
        top.addWidget(self.walk_button)
        top.addSpacing(16)
        top.addWidget(QLabel("or key"))
        top.addWidget(self.key, 1)
        top.addWidget(self.key_button)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.summary)
        lay.addWidget(self.legend)
        lay.addWidget(self.view, 1)
        self.files.currentIndexChanged.connect(self._file_changed)

    # ---- store -------------------------------------------------------------------------
    def set_utc(self, utc: bool) -> None:
        """Times in UTC or the local zone, as the window shows them."""
        if utc != self.utc:
            self.utc = utc
            if self.resolution is not None:
                self._draw()

    def set_store(self, store) -> None:
        self._store = store
        self.resolution = None
        self.scene.clear()
        self.boxes = []
        self.files.blockSignals(True)
        self.files.clear()
        self._names = [f.name for f in store.index.files] if store is not None else []
        for f in (store.index.files if store is not None else []):
            self.files.addItem(f"{f.name}   ({f.slot_num:,} slots)")
        self.files.blockSignals(False)
        self._file_changed(self.files.currentIndex())
        self.summary.setText("No store open." if store is None else
                             "Pick a slot (or click one on the Index slots map), or enter a key.")

    def refresh(self) -> None:
        if self.resolution is not None:
            r = self.resolution
            if r.query is not None:
                self.show_key(r.file_name, r.query)
            else:
                self.show_slot(r.file_name, r.slot)

    def current_file(self) -> str | None:
        i = self.files.currentIndex()
        return self._names[i] if 0 <= i < len(self._names) else None

    def _index_file(self, name: str | None):
        if self._store is None or name is None:
            return None
        return next((f for f in self._store.index.files if f.name == name), None)

    def _file_changed(self, i: int) -> None:
        f = self._index_file(self.current_file())
        self.slot.setRange(0, max(0, (f.slot_num - 1) if f is not None else 0))

    def _select_file(self, name: str) -> None:
        if name in self._names:
            self.files.blockSignals(True)
            self.files.setCurrentIndex(self._names.index(name))
            self.files.blockSignals(False)
            self._file_changed(self.files.currentIndex())

    # ---- walking -------------------------------------------------------------------------
    def show_slot(self, file_name: str | None, slot: int) -> A.ChainResolution | None:
        """Walk `slot` of index file `file_name` and draw it."""
        f = self._index_file(file_name)
        if f is None:
            return None
        self._select_file(f.name)
        self.slot.setValue(slot)
        return self._show(A.resolve_chain(f, slot=slot, get_message=self._get_message, limit=DRAW_LIMIT + 1))

    def show_key(self, file_name: str | None, key: str) -> A.ChainResolution | None:
        """Walk the slot of "topic#key" and mark what a query for it returns."""
        f = self._index_file(file_name)
        key = key.strip()
        if f is None or not key:
            return None
        self._select_file(f.name)
        self.key.setText(key)
        self.slot.setValue(index_key_hash(key) % f.slot_num)
        return self._show(A.resolve_chain(f, key=key, get_message=self._get_message, limit=DRAW_LIMIT + 1))

    def _get_message(self, phy: int):
        return self._store.commitlog.get_message(phy) if self._store is not None else None

    def _show(self, res: A.ChainResolution) -> A.ChainResolution:
        self.resolution = res
        self._draw()
        self._set_summary()
        self.updated.emit()
        return res

    def _set_summary(self) -> None:
        r = self.resolution
        n = len(r.entries)
        kinds: dict[str, int] = {}
        for e in r.entries:
            kinds[e.kind] = kinds.get(e.kind, 0) + 1
        parts = ", ".join(f"{v} {KIND_TEXT[k]}" for k, v in kinds.items())
        text = (f"<b>{html.escape(r.file_name)}</b> slot <b>{r.slot:,}</b> → entry {r.head:,}: chain of <b>{n}</b> "
                f"entr{'y' if n == 1 else 'ies'} ({parts or 'none'}); walk ended: {html.escape(r.stop)}.")
        if r.query is not None:
            hits = r.hits
            good = [e for e in hits if e.kind == A.MATCH]
            text += (f"<br>Query <b>{html.escape(r.query)}</b> (keyHash {r.query_hash}): select() returns "
                     f"<b>{len(hits)}</b> entr{'y' if len(hits) == 1 else 'ies'}, {len(good)} of them really "
                     f"that key" + (f", {len(hits) - len(good)} false hits from colliding keys" if len(hits) > len(good)
                                    else "") + ".")
        if r.broken or r.cycle_to is not None:
            text += f"<br><span style='color:#c00'>Damaged chain: {html.escape(r.stop)}.</span>"
        self.summary.setText(text)

    # ---- drawing ---------------------------------------------------------------------------
    def _columns(self) -> int:
        return max(1, (self.view.viewport().width() - 20 + GAP_X) // (BOX_W + GAP_X))

    def _cell(self, i: int, cols: int) -> QPointF:
        """Position of cell i in a snake layout (row 0 left to right, row 1 right to left...)."""
        row, col = divmod(i, cols)
        if row % 2:
            col = cols - 1 - col
        return QPointF(10 + col * (BOX_W + GAP_X), 10 + row * (BOX_H + GAP_Y))

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self.resolution is not None and self._columns() != getattr(self, "_drawn_cols", None):
            self._draw()

    def _draw(self) -> None:
        self.scene.clear()
        self.boxes = []
        self.texts: list[QGraphicsTextItem] = []
        r = self.resolution
        cols = self._columns()
        self._drawn_cols = cols
        mono = QFont("DejaVu Sans Mono")
        mono.setPointSize(8)
        # cell 0: the slot itself
        head = QGraphicsRectItem(QRectF(self._cell(0, cols), QPointF(self._cell(0, cols).x() + BOX_W,
                                                                      self._cell(0, cols).y() + BOX_H * 0.55)))
        head.setBrush(QColor(45, 45, 60))
        head.setPen(QPen(QColor(20, 20, 20), 1))
        self.scene.addItem(head)
        self._text(head, f"<b>slot {r.slot:,}</b>&nbsp;&nbsp;of {r.file_name}<br>slot value → entry #{r.head:,}"
                   + ("<br>(empty)" if r.head == 0 else ""), "#ffffff", mono)
        prev_rect = head.rect()
        shown = r.entries[:DRAW_LIMIT]
        for i, e in enumerate(shown, start=1):
            p = self._cell(i, cols)
            rect = QRectF(p.x(), p.y(), BOX_W, BOX_H)
            box = EntryBox(rect, e, self._open)
            border, fill = KIND_COLORS[e.kind]
            box.setBrush(QColor(*fill))
            pen = QPen(QColor(*border), 2)
            if e.query_hit:
                pen = QPen(QColor(*QUERY_HIT_COLOR), 5 if e.kind == A.MATCH else 4)
                if e.kind != A.MATCH:
                    pen.setStyle(Qt.DashLine)
            box.setPen(pen)
            box.setToolTip(self.describe(e))
            self.scene.addItem(box)
            self.boxes.append(box)
            self._text(box, self._box_html(e, r), CARD_INK, mono)
            self._arrow(prev_rect, rect, QColor(90, 90, 90))
            prev_rect = rect
        # how the walk ended
        end_i = len(shown) + 1
        p = self._cell(end_i, cols)
        end_rect = QRectF(p.x(), p.y() + BOX_H * 0.25, BOX_W * 0.8, BOX_H * 0.5)
        bad = r.broken or r.cycle_to is not None or len(r.entries) > DRAW_LIMIT
        end = QGraphicsRectItem(end_rect)
        end.setBrush(QColor(255, 225, 225) if bad else QColor(235, 235, 235))
        end.setPen(QPen(QColor(200, 0, 0) if bad else QColor(150, 150, 150), 2 if bad else 1, Qt.DashLine))
        self.scene.addItem(end)
        more = len(r.entries) - len(shown)
        label = {"end of chain": "prevIndex 0: end of chain", "empty slot": "empty slot"}.get(r.stop, r.stop)
        if more > 0:
            label = f"… {more:,} more entries not drawn"
        self._text(end, ("✗ " if bad else "") + html.escape(label), "#b00000" if bad else "#404040", mono)
        if r.entries:
            self._arrow(prev_rect, end_rect, QColor(200, 0, 0) if bad else QColor(150, 150, 150))
        if r.cycle_to is not None:
            target = next((b for b in self.boxes if b.entry.step.index == r.cycle_to), None)
            if target is not None:
                self._curve(prev_rect, target.rect(), QColor(200, 0, 0))
        self.scene.setSceneRect(self.scene.itemsBoundingRect().adjusted(-10, -10, 10, 10))

    def _box_html(self, e: A.ResolvedEntry, r: A.ChainResolution) -> str:
        s = e.step
        where = (f"{html.escape(e.topic or '')} q{e.queue_id} @{e.queue_offset:,}" if e.topic is not None
                 else "<span style='color:#b00'>no message at this offset</span>")
        group = f" · group {chr(65 + e.hash_group % 26)}" if e.hash_group >= 0 else ""
        tag = {A.MATCH: "QUERY MATCH", A.COLLISION: "COLLISION", A.SAME_KEY: "same key",
               A.SHARES_SLOT: "shares slot", A.UNRESOLVED: "unresolved"}[e.kind]
        if e.query_hit and e.kind != A.MATCH:
            tag += " · false hit"
        return (f"<b>#{s.index:,}</b>&nbsp;&nbsp;{tag}{group}<br>"
                f"keyHash {s.keyHash}<br>"
                f"commitLogOffset {s.commitLogOffset:,} &nbsp;{where}<br>"
                f"time {format_ms_readable(s.timestamp, self.utc)} (+{s.timeDiff}s)<br>"
                f"<b>{html.escape(self._elide(e.label, 44))}</b><br>"
                f"prev → #{s.prevIndex:,}")

    @staticmethod
    def _elide(s: str, n: int) -> str:
        return s if len(s) <= n else s[:n - 1] + "…"

    def describe(self, e: A.ResolvedEntry) -> str:
        s = e.step
        return (f"entry #{s.index} (position {e.position} from the slot)\nkeyHash {s.keyHash}\n"
                f"commitLogOffset {s.commitLogOffset}\ntime {format_ms_readable(s.timestamp, self.utc)}\nprevIndex {s.prevIndex}\n"
                f"key: {e.label}\n{KIND_TEXT[e.kind]}" + ("\nreturned by the query" if e.query_hit else "")
                + ("\n" + s.stop if s.stop else ""))

    def _text(self, parent: QGraphicsRectItem, text: str, color: str, font: QFont) -> QGraphicsTextItem:
        """Text over a box (added to the scene, which owns it; clicks go to the box below)."""
        t = QGraphicsTextItem()
        t.setDefaultTextColor(QColor(color))
        t.setFont(font)
        t.setHtml(text)
        t.setTextWidth(parent.rect().width() - 8)
        t.setPos(parent.rect().x() + 4, parent.rect().y() + 2)
        t.setZValue(parent.zValue() + 1)
        t.setAcceptedMouseButtons(Qt.NoButton)
        self.scene.addItem(t)
        self.texts.append(t)
        return t

    def _arrow(self, a: QRectF, b: QRectF, color: QColor) -> None:
        """A straight arrow between two neighbouring cells (same row or the row below)."""
        if abs(a.top() - b.top()) < BOX_H / 2:
            y = min(a.center().y(), b.center().y())
            if b.x() > a.x():
                p, q = QPointF(a.right(), y), QPointF(b.left(), y)
            else:
                p, q = QPointF(a.left(), y), QPointF(b.right(), y)
        else:
            x = (a.center().x() + b.center().x()) / 2 if abs(a.center().x() - b.center().x()) > 1 else a.center().x()
            p, q = QPointF(x, a.bottom()), QPointF(x, b.top())
        path = QPainterPath(p)
        path.lineTo(q)
        line = QGraphicsPathItem(path)
        line.setPen(QPen(color, 2))
        self.scene.addItem(line)
        self._head(p, q, color)

    def _curve(self, a: QRectF, b: QRectF, color: QColor) -> None:
        """The cycle link: a dashed curve back to the entry it points at."""
        p, q = QPointF(a.center().x(), a.top()), QPointF(b.center().x(), b.bottom())
        ctrl = QPointF((p.x() + q.x()) / 2 + 80, min(p.y(), q.y()) - 60)
        path = QPainterPath(p)
        path.quadTo(ctrl, q)
        item = QGraphicsPathItem(path)
        item.setPen(QPen(color, 2, Qt.DashLine))
        self.scene.addItem(item)
        self._head(ctrl, q, color)

    def _head(self, p: QPointF, q: QPointF, color: QColor) -> None:
        d = q - p
        length = max(1e-6, (d.x() ** 2 + d.y() ** 2) ** 0.5)
        ux, uy = d.x() / length, d.y() / length
        a = QPointF(q.x() - 10 * ux + 5 * uy, q.y() - 10 * uy - 5 * ux)
        b = QPointF(q.x() - 10 * ux - 5 * uy, q.y() - 10 * uy + 5 * ux)
        head = QGraphicsPolygonItem(QPolygonF([q, a, b]))
        head.setBrush(QBrush(color))
        head.setPen(QPen(color))
        self.scene.addItem(head)

    def _open(self, e: A.ResolvedEntry) -> None:
        if e.topic is not None:
            self.openRequested.emit(e.step.commitLogOffset)

    def open_entry(self, index: int) -> int | None:
        """Open the message of chain entry number `index` (as a click on its box does)."""
        for b in self.boxes:
            if b.entry.step.index == index and b.entry.topic is not None:
                self.openRequested.emit(b.entry.step.commitLogOffset)
                return b.entry.step.commitLogOffset
        return None
