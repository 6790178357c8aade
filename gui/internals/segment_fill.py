"""SegmentFillView: every CommitLog, ConsumeQueue and index file as a bar.

CommitLog bars are coloured by topic along the bytes (from the ConsumeQueue units, and one
walk of what no queue names; cached per file), with the END_OF_FILE blank tail dark and
unwritten space light; ConsumeQueue bars show the units written of units per file; index
files get two bars, entries used of maxIndexNum and slots used of maxHashSlotNum. Hover
tells the numbers, a click opens the message there. Every file is reachable: rows have a
fixed height and each chart scrolls (scroll bar or wheel); the charts share the height in a
splitter, each asking for its rows.

The fill comes in as it is computed (engine.analysis.FillProgress): the ConsumeQueue and
index bars at once, then each commitlog file as it completes, redrawn at most every
PARTIAL_MS, so a big store draws while it is read and Cancel keeps what was drawn."""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QCursor
from PySide6.QtWidgets import QLabel, QSplitter, QToolTip, QVBoxLayout, QWidget

from engine import analysis as A
from engine.config import CQ_UNIT_SIZE
from engine.tasks import Progress

from .bars import CHROME_PX, ROW_PX, BarChart, BarRow
from .colors import category_colors, hex_color, topic_colors
from .tier_segments import tier_bar_rows
from gui.plot_theme import ink, is_dark
from gui.timefmt import NOT_SET, format_ms_readable
from gui.views.progress import ProgressRow
from gui.workers import Background, RefreshWhenShown

pg.setConfigOptions(imageAxisOrder="row-major")
PARTIAL_MS = 100   # the fill so far is redrawn at most this often while it is computed


def fmt_time(ms: int, utc: bool = False) -> str:
    """An index header's time: 0 until the file holds an entry."""
    return NOT_SET if ms <= 0 else format_ms_readable(ms, utc)


def pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.2f}%" if b else "-"


def elide(s: str, n: int = 28) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


class SegmentFillView(RefreshWhenShown, QWidget):
    openRequested = Signal("qint64")   # commitlog offset of the message clicked
    updated = Signal()                 # numbers and bars are (re)built
    partial = Signal()                 # the fill so far was drawn (files still being read)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._store = None
        self._tier = None                   # a tier's segments drawn beside the local files (tier_store)
        self.utc = False
        self._dirty = False
        self._user_sized = False            # the user moved the splitter: sizes stay theirs
        self.fill: A.StoreFill | None = None
        self.cache = A.CommitLogFillCache()
        self.partials = 0                  # partial fills drawn by the running computation
        self._pending: A.StoreFill | None = None
        self._partial_timer = QTimer(self)
        self._partial_timer.setSingleShot(True)
        self._partial_timer.setInterval(PARTIAL_MS)
        self._partial_timer.timeout.connect(self._draw_pending)
        self._rows: dict[tuple, BarRow] = {}   # (commitlog file fill, topics) -> its bar, while files come in
        self._drawn: tuple | None = None       # what the queue and index charts show
        self._pending_progress: Progress | None = None
        self._entry_headers = False            # a DLedger file among the rows (its legend entry)
        self.background = Background(self)
        self.background.failed.connect(self._failed)
        self.summary = QLabel("No store open.")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.split = QSplitter(Qt.Vertical, self)
        self.split.setChildrenCollapsible(False)
        self.charts = {
            "commitlog": BarChart("CommitLog files", "position in the file (% of the file size)"),
            "queue": BarChart("ConsumeQueue files", "unit position in the file (% of units per file)"),
            "index": BarChart("Index files", "entries used (% of maxIndexNum) / slots used (% of maxHashSlotNum)"),
            "tier": BarChart("Tier segments", "bytes of the segment (% of the largest segment of its type)"),
        }
        for kind, ch in self.charts.items():
            ch.widget.setMinimumHeight(140)
            self.split.addWidget(ch.widget)
            ch.glw.scene().sigMouseMoved.connect(lambda pos, kind=kind: self._hover(kind, pos))
            ch.glw.scene().sigMouseClicked.connect(lambda ev, kind=kind: self._clicked(kind, ev))
        self.split.splitterMoved.connect(self._splitter_moved)
        # the walk of a big log takes seconds: its progress, and a way to stop it
        self.busy_row = ProgressRow(self.cancel, "reading the commitlog: %p%")
        self.progress, self.cancel_button = self.busy_row.progress, self.busy_row.cancel_button
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.summary)
        lay.addWidget(self.busy_row)
        lay.addWidget(self.legend)
        lay.addWidget(self.split, 1)

    # ---- store --------------------------------------------------------------------------
    def set_store(self, store) -> None:
        """Show `store` (None clears): its local files (walked when the view is first shown)
        and, when it has a tier, the tier's segments beside them."""
        self.background.cancel()
        self._stop_partials()
        self._tier = store.tier_store if store is not None else None   # a tier's segments, drawn beside
        store = store.local_store if store is not None else None       # the local files (None: no files)
        if store is not self._store:
            self.cache = A.CommitLogFillCache()
        self._store = store
        self._user_sized = False
        self.fill = None
        self._drawn = None
        for ch in self.charts.values():
            ch.set_rows([], {})
        self.charts["tier"].widget.setVisible(self._tier is not None)
        for kind in ("commitlog", "queue", "index"):      # a tier alone has no local files to draw
            self.charts[kind].widget.setVisible(store is not None or self._tier is None)
        self.summary.setText("Computing segment fill…" if store is not None else "No store open.")
        self.legend.clear()
        if self._tier is not None:
            self._draw_tier(sorted(self._tier.topics()))
            if store is None:
                self.summary.setText(self._tier_text())
        self.mark_stale(store is not None)

    def _draw_tier(self, topics: list[str]) -> None:
        """The tier chart, coloured as the local files are (the topics' colours by name)."""
        tcol = topic_colors(sorted(set(topics) | set(self._tier.topics())))
        ids = {t: i for i, t in enumerate(tcol)}
        colors = category_colors(is_dark())
        colors.update({ids[t]: c for t, c in tcol.items()})
        self.charts["tier"].set_rows(tier_bar_rows(self._tier, ids), colors)
        self._titles()

    def _tier_text(self) -> str:
        t = self._tier
        rows = self.charts["tier"].rows
        return (f"Tier {t.cluster}/{t.broker}: {len(rows)} segments, {sum(r.numbers['size'] for r in rows):,} bytes "
                f"of {len(t.queues)} queues (per-queue COMMIT_LOG and CONSUME_QUEUE, the INDEX).")

    def refresh(self) -> None:
        if self._store is None:
            return
        self._dirty = False
        self._busy(True)
        self._stop_partials()
        self.background.submit("fill", A.store_fill_task, self._store, self.cache, on_done=self._apply,
                               on_progress=self._progress, pass_cancel=True)

    def cancel(self) -> None:
        """Stop the walk; the view says so and computes again when asked (Refresh or a new store)."""
        self.background.cancel("fill")
        self._stop_partials()
        self._busy(False)
        shown = (f" The {len(self.charts['commitlog'].rows)} commitlog file(s) read so far stay drawn."
                 if self.charts["commitlog"].rows else "")
        self.summary.setText("Segment fill cancelled." + shown + " Show the view again or refresh to compute it.")
        self._dirty = self._store is not None

    def _busy(self, on: bool) -> None:
        self.busy_row.busy(on)

    def _progress(self, p: Progress) -> None:
        """Reports come per file (thousands on a store of small files): the bar and the bars
        follow at most every PARTIAL_MS (a progress bar repaints on each new value)."""
        self._pending_progress = p
        if isinstance(p, A.FillProgress) and p.fill is not None:
            self._pending = p.fill
        if self.partials == 0 and self._pending is not None:   # the queue and index bars at once
            self._draw_pending()
        elif not self._partial_timer.isActive():
            self._partial_timer.start()

    def _draw_pending(self) -> None:
        p, self._pending_progress = self._pending_progress, None
        if p is not None:
            self.busy_row.show_progress(p)
        fill, self._pending = self._pending, None
        if fill is None or self._store is None:
            return
        self._draw(fill, partial=True)
        self.partials += 1
        self.partial.emit()

    def _stop_partials(self) -> None:
        self._partial_timer.stop()
        self._pending = None
        self._pending_progress = None
        self.partials = 0
        self._rows = {}
        self._entry_headers = False

    def _failed(self, channel: str, text: str) -> None:
        self._busy(False)
        self.summary.setText("Could not compute the segment fill:\n" + text.strip().splitlines()[-1])

    # ---- rows ---------------------------------------------------------------------------
    def _apply(self, fill: A.StoreFill) -> None:
        keep = self.partials > 0
        self._partial_timer.stop()
        if self._pending_progress is not None:   # the bar ends where the work ended
            self.busy_row.show_progress(self._pending_progress)
        self._pending, self._pending_progress = None, None
        self._busy(False)
        self.fill = fill
        self._draw(fill, partial=False, keep_view=keep)
        self.partials = 0
        self._rows = {}
        self._entry_headers = False
        self.updated.emit()

    def _draw(self, fill: A.StoreFill, partial: bool, keep_view: bool = True) -> None:
        tcol = topic_colors(fill.topics)
        self.topic_colors = tcol
        # commitlog: per-file topic ids -> a global id so one colour table serves all rows
        gid = {t: i for i, t in enumerate(fill.topics)}
        colors = category_colors(is_dark())
        colors.update({gid[t]: c for t, c in tcol.items()})
        keep_view = keep_view and self.partials > 0
        topics = tuple(fill.topics)
        rows = []
        for c in fill.commitlog:
            r = self._rows.get((id(c), topics))
            if r is None:
                r = self._rows[(id(c), topics)] = self._commitlog_row(c, gid)
                self._entry_headers = self._entry_headers or bool((c.segments.ids == A.ENTRY_HEADER).any())
            rows.append(r)
        self.charts["commitlog"].set_rows(rows, colors, keep_view=keep_view)
        drawn = (id(fill.queues), id(fill.index), topics)
        if drawn != self._drawn or not partial:
            self._draw_queues_and_index(fill, gid, tcol, keep_view)
            self._drawn = drawn if partial else None
        if self._tier is not None:
            self._draw_tier(fill.topics)
        self._titles()
        self._set_texts(fill)
        if partial and self._store is not None:
            n = len(self._store.commitlog.files)
            self.summary.setText(f"Reading the commitlog: {len(fill.commitlog)} of {n} files drawn…\n"
                                 + self.summary.text())

    def _draw_queues_and_index(self, fill: A.StoreFill, gid: dict, tcol: dict, keep_view: bool) -> None:
        qcolors = category_colors(is_dark())
        qrows = []
        for q in fill.queues:
            cid = gid[q.topic]
            qcolors[cid] = tcol[q.topic]
            qrows.append(self._queue_row(q, cid))
        self.charts["queue"].set_rows(qrows, qcolors, keep_view=keep_view)
        irows = []
        for x in fill.index:
            irows += self._index_rows(x)
        self.charts["index"].set_rows(irows, category_colors(is_dark()), keep_view=keep_view)

    def _splitter_moved(self, *_) -> None:
        self._user_sized = True

    def fit_charts(self) -> None:
        """Share the height: each chart asks for all its rows; one that needs less gives the
        rest to the others; none gets less than a few rows (it scrolls). The user's own
        splitter sizes stay."""
        if self._user_sized:
            return
        files = len(self._store.commitlog.files) if self._store is not None else 0
        # the commitlog chart is sized for every file from its first drawing on, while its rows come in
        want = [max(ch.wanted_height(), CHROME_PX + ROW_PX * files) if kind == "commitlog" else ch.wanted_height()
                for kind, ch in self.charts.items()]
        total = max(self.split.height(), 3 * 140)
        want = [w if ch.widget.isVisibleTo(self) else 0 for w, ch in zip(want, self.charts.values())]
        sizes = [0] * len(want)
        left, open_ = total, [i for i, w in enumerate(want) if w]
        while open_:   # water-filling: the smallest wishes are met first
            share = left // len(open_)
            small = [i for i in open_ if want[i] <= share]
            if not small:
                for i in open_:
                    sizes[i] = share
                break
            for i in small:
                sizes[i] = want[i]
                left -= want[i]
                open_.remove(i)
        self.split.blockSignals(True)
        self.split.setSizes(sizes)
        self.split.blockSignals(False)

    def changeEvent(self, ev) -> None:
        """A dark or light palette: the free space and the blank tails change colour with it."""
        if ev.type() == QEvent.PaletteChange and self.fill is not None:
            self._draw(self.fill, partial=False)
        super().changeEvent(ev)

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        self.fit_charts()

    def _titles(self) -> None:
        self.fit_charts()
        for kind, ch in self.charts.items():
            rows = f" ({len(ch.rows):,} {'bars' if kind == 'index' else 'files'})" if ch.rows else ""
            if ch.zoomed:
                w = ch.vb.viewRange()[0][1]
                ch.plot.setTitle(f"{ch.title}{rows} — zoomed to the used {w * 100:.3g}% (double-click: whole files)",
                                 color=ink(), size="11pt")
            else:
                ch.plot.setTitle(ch.title + rows, color=ink(), size="11pt")

    def _commitlog_row(self, c: A.CommitLogFileFill, gid: dict[str, int]) -> BarRow:
        remap = np.array([gid[t] for t in c.topics] or [0], dtype=np.int32)
        ids = c.segments.ids.copy()
        pos = ids >= 0
        ids[pos] = remap[ids[pos]]
        seg = A.Segments(c.segments.starts, c.segments.ends, ids)
        numbers = {"file": c.name, "fileFromOffset": c.file_from_offset, "fileSize": c.file_size,
                   "wrotePosition": c.wrote_position, "messages": c.message_count,
                   "messageBytes": c.message_bytes, "blankTail": c.blank_tail, "fill": c.fill,
                   "topicBytes": c.topic_bytes(), "stop": c.stop}

        def describe(p: int) -> str:
            head = (f"commitlog file {c.name}\n"
                    f"written {c.wrote_position:,} of {c.file_size:,} bytes ({pct(c.wrote_position, c.file_size)})\n"
                    f"messages {c.message_count:,}: {c.message_bytes:,} bytes ({pct(c.message_bytes, c.file_size)})\n"
                    f"blank tail {c.blank_tail:,} bytes; walk ended: {c.stop}")
            i = c.segments.at(p)
            if i < 0:
                return head
            a, b, cat = int(c.segments.starts[i]), int(c.segments.ends[i]), int(c.segments.ids[i])
            what = c.topics[cat] if cat >= 0 else A.CATEGORY_NAMES[cat]
            base = c.file_from_offset
            return (head + f"\n\nat offset {base + p:,} (+{p:,}): {what}\n"
                    f"  bytes {base + a:,} – {base + b:,} ({b - a:,} bytes)")

        def open_at(p: int) -> int | None:
            r = c.record_at(p)
            return None if r is None else c.file_from_offset + r
        return BarRow(c.name, seg, c.file_size, numbers, describe, open_at)

    def _queue_row(self, q: A.QueueFileFill, cid: int) -> BarRow:
        ids = q.segments.ids.copy()
        ids[ids == 0] = cid
        seg = A.Segments(q.segments.starts, q.segments.ends, ids)
        first = q.first_queue_offset
        numbers = {"topic": q.topic, "queueId": q.queue_id, "file": q.name, "unitsPerFile": q.units_per_file,
                   "writtenUnits": q.written_units, "validUnits": q.valid_units, "fillerUnits": q.filler_units,
                   "fill": q.fill}

        def describe(p: int) -> str:
            head = (f"ConsumeQueue {q.topic} / {q.queue_id}, file {q.name}\n"
                    f"queue offsets {first:,} – {first + q.units_per_file - 1:,}\n"
                    f"units written {q.written_units:,} of {q.units_per_file:,} ({pct(q.written_units, q.units_per_file)})"
                    + (f"\nfiller units {q.filler_units:,}" if q.filler_units else ""))
            u = self._unit(q, p)
            if u is None:
                return head + f"\n\nqueue offset {first + p:,}: not written"
            phy, size, tags = u
            return head + f"\n\nqueue offset {first + p:,}: commitLogOffset {phy:,}, size {size:,}, tagsCode {tags}"

        def open_at(p: int) -> int | None:
            u = self._unit(q, p)
            if u is None or u[1] <= 0 or (u[0] == 0 and u[1] == 0x7FFFFFFF):
                return None
            return u[0]
        return BarRow(f"{elide(q.topic, 26)}/{q.queue_id}  from q{first:,}", seg, q.units_per_file, numbers,
                      describe, open_at)

    def _unit(self, q: A.QueueFileFill, p: int):
        if self._store is None or p >= q.written_units:
            return None
        cq = self._store.find_queue(q.topic, q.queue_id)
        if cq is None:
            return None
        f = cq.queue.find(q.file_from_offset + p * CQ_UNIT_SIZE)
        if f is None:
            return None
        u = cq.view(f)[p]
        return int(u["commitLogOffset"]), int(u["size"]), int(u["tagsCode"])

    def _index_rows(self, x: A.IndexFill) -> list[BarRow]:
        numbers = {"file": x.name, "entriesUsed": x.entries_used, "maxIndexNum": x.index_num,
                   "slotsUsed": x.slots_used, "maxHashSlotNum": x.slot_num, "hashSlotCount": x.hash_slot_count,
                   "entryFill": x.entry_fill, "slotFill": x.slot_fill, "loadFactor": x.load_factor}
        head = (f"index file {x.name}\n"
                f"entries used {x.entries_used:,} of maxIndexNum {x.index_num:,} ({pct(x.entries_used, x.index_num)})\n"
                f"slots used {x.slots_used:,} of maxHashSlotNum {x.slot_num:,} ({pct(x.slots_used, x.slot_num)}); "
                f"header hashSlotCount {x.hash_slot_count:,}\n"
                f"load factor {x.load_factor:.4g} entries per slot\n"
                f"time {fmt_time(x.begin_timestamp, self.utc)} – {fmt_time(x.end_timestamp, self.utc)}\n"
                f"commitLogOffset {x.begin_phy_offset:,} – {x.end_phy_offset:,}")
        store = self._store

        def entry(p: int):
            if store is None or not 1 <= p <= x.entries_used:
                return None
            f = next((g for g in store.index.files if g.name == x.name), None)
            return None if f is None else f.entries[p]

        def describe_entries(p: int) -> str:
            e = entry(p)
            if e is None:
                return head + ("\n\nentry #0 is never used" if p == 0 else f"\n\nentry #{p:,}: not used yet")
            return head + (f"\n\nentry #{p:,}: keyHash {int(e['keyHash'])}, commitLogOffset {int(e['commitLogOffset']):,}, "
                           f"prevIndex {int(e['prevIndex']):,}")

        def open_entry(p: int) -> int | None:
            e = entry(p)
            return None if e is None else int(e["commitLogOffset"])
        return [BarRow(f"{x.name} entries", x.entry_segments(), x.index_num, numbers, describe_entries, open_entry),
                BarRow(f"{x.name} slots", x.slot_segments(), x.slot_num, numbers,
                       lambda p: head + "\n\n(used slots are spread over the table: see Index slots)", None)]

    def _set_texts(self, fill: A.StoreFill) -> None:
        cl = fill.commitlog
        size = sum(c.file_size for c in cl)
        mbytes = sum(c.message_bytes for c in cl)
        blank = sum(c.blank_tail for c in cl)
        qunits = sum(q.written_units for q in fill.queues)
        nq = len({(q.topic, q.queue_id) for q in fill.queues})
        self.summary.setText(
            f"CommitLog: {len(cl)} files, {sum(c.message_count for c in cl):,} messages in {mbytes:,} of "
            f"{size:,} bytes ({pct(mbytes, size)}), blank tails {blank:,} bytes.   "
            f"ConsumeQueue: {nq} queues, {len(fill.queues)} files, {qunits:,} units.   "
            f"Index: {len(fill.index)} files, {sum(x.entries_used for x in fill.index):,} entries."
            + ("\n" + self._tier_text() if self._tier is not None else ""))
        swatches = [f'<span style="color:{hex_color(c)}">&#9632;</span>&nbsp;{html.escape(elide(t, 40))}'
                    for t, c in self.topic_colors.items()]
        cats = category_colors(is_dark())
        swatches += [f'<span style="color:{hex_color(cats[k])}">&#9632;</span>&nbsp;'
                     f'<i>{A.CATEGORY_NAMES[k]}</i>' for k in (A.BLANK, A.FREE, A.DAMAGED, A.FILLER, A.USED, A.SLOTS)
                     + ((A.ENTRY_HEADER,) if self._entry_headers else ())]
        self.legend.setText("&nbsp;&nbsp; ".join(swatches))

    # ---- interaction ----------------------------------------------------------------------
    def rows(self, kind: str) -> list[BarRow]:
        return self.charts[kind].rows

    def describe(self, kind: str, row: int, x: float) -> str:
        """Tooltip text for row `row` at fraction `x` of the file."""
        ch = self.charts[kind]
        r = ch.rows[row]
        return r.describe(ch.position(row, x)) if r.describe else r.label

    def open_at(self, kind: str, row: int, x: float) -> int | None:
        """Emit openRequested for the message at fraction `x` of row `row`; returns it."""
        ch = self.charts[kind]
        r = ch.rows[row]
        phy = r.open_at(ch.position(row, x)) if r.open_at else None
        if phy is not None:
            self.openRequested.emit(phy)
        return phy

    def _locate(self, kind: str, scene_pos):
        ch = self.charts[kind]
        if ch.vb.sceneBoundingRect().contains(scene_pos):
            p = ch.vb.mapSceneToView(scene_pos)
            row = ch.row_at(p.y())
            if row is not None and 0 <= p.x() <= 1:
                return kind, row, p.x()
        return None

    def _hover(self, kind: str, scene_pos) -> None:
        hit = self._locate(kind, scene_pos)
        if hit is None:
            QToolTip.hideText()
            return
        QToolTip.showText(QCursor.pos(), self.describe(*hit), self.charts[kind].glw)

    def _clicked(self, kind: str, ev) -> None:
        if ev.button() != Qt.LeftButton:
            return
        ch = self.charts[kind]
        if ev.double():
            if ch.vb.sceneBoundingRect().contains(ev.scenePos()):
                ch.vb.setXRange(0, 1, padding=0)
            return
        hit = self._locate(kind, ev.scenePos())
        if hit is not None:
            self.open_at(*hit)

    def set_utc(self, utc: bool) -> None:
        """Times in the tooltips: UTC or the local zone, as the window shows them."""
        self.utc = utc
