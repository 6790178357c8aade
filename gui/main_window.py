"""The browser's main window: menus and shortcuts, the store tree, the Overview / Messages /
Search views, banners, the status bar, and opening stores (dialog, drag and drop, recent,
read-only by default with a switch to read-write)."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QApplication, QFileDialog, QLabel, QMainWindow, QPushButton, QSplitter,
                               QStackedWidget, QTabWidget, QVBoxLayout, QWidget)

from engine import StoreError, StoreLockedError

from . import menus
from . import settings as st
from . import store_config as sc
from .chain_copies import ChainCopies
from .desktop import PATH_PX, default_size, follow_platform
from .models.overview import compute_overview
from .session import StoreSession
from .spark_warmup import SparkStatus
from .views import dialogs
from .views.banner import BannerArea
from .views.lazy_panel import LazyPanel
from .views.overview_panel import OverviewPanel
from .views.progress import TaskProgressDialog
from .views.queue_browser import QueueBrowser
from .views.search_panel import SearchPanel
from .views.store_tree import StoreTree
from .workers import Lane

SYSTEM_PREFIXES = ("%", "RMQ_SYS_", "SCHEDULE_TOPIC", "rmq_sys_", "TRANS_", "OFFSET_MOVED", "SELF_TEST")

SHORTCUTS = menus.SHORTCUTS


class MainWindow(QMainWindow):
    storeOpened = Signal(object)   # the MessageStore, after every view is filled
    storeClosed = Signal()

    def __init__(self, settings: QSettings | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.settings = settings if settings is not None else st.app_settings()
        self.session = StoreSession(self)
        self.chain_copies = ChainCopies(self.session, self.settings, self)  # key queries' index copies
        self.utc = st.use_utc(self.settings)
        self._overview_lane = Lane(self.session.runner)
        self._restore: tuple | None = None
        self._rw_requested = False
        self._attempt: tuple | None = None    # (path, read_only, settings) of the last open asked for
        self._remember_on_open: tuple | None = None   # (resolved path, settings) to remember once open
        self.error_box = None                 # the open-failure box offering store settings
        self.settings_dialog = None
        self.help_dialog = None
        self.open_progress = None             # the TaskProgressDialog of the open running
        self.setWindowTitle("rmqstore browser")
        self.setAcceptDrops(True)
        follow_platform(QApplication.instance())   # the platform's dark scheme, where the style ignores it
        self.resize(*default_size(self.screen()))

        # -- central: banners over (welcome | tree + views)
        self.banners = BannerArea(self)
        self.tree = StoreTree(self)
        self.tree_model = self.tree.tree_model
        self.overview = OverviewPanel(self)
        self.browser = QueueBrowser(self.session, self)
        self.search = SearchPanel(self.session, self)
        self.tabs = QTabWidget(self)
        self.tabs.addTab(self.overview, "Overview")
        self.tabs.addTab(self.browser, "Messages")
        self.tabs.addTab(self.search, "Search")
        self.internals = LazyPanel(self.session, lambda: _internals_panel(self.session), on_created=self._internals_created)
        self.scans = LazyPanel(self.session, lambda: _scan_panel(self.session, self.settings))
        self.tabs.addTab(self.internals, "Internals")
        self.tabs.addTab(self.scans, "Scan")
        self.timers = LazyPanel(self.session, lambda: _timers_view(self.session), on_created=self._timers_created)
        self.tabs.insertTab(self.tabs.indexOf(self.internals), self.timers, "Timers")   # 5.x timer stores only
        self.tabs.setTabVisible(self.tabs.indexOf(self.timers), False)
        self.split = QSplitter(Qt.Horizontal, self)
        self.split.addWidget(self.tree)
        self.split.addWidget(self.tabs)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([420, 1020])
        self.welcome = self._make_welcome()
        self.stack = QStackedWidget(self)
        self.stack.addWidget(self.welcome)
        self.stack.addWidget(self.split)
        central = QWidget(self)
        cl = QVBoxLayout(central)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.setSpacing(0)
        cl.addWidget(self.banners)
        cl.addWidget(self.stack, 1)
        self.setCentralWidget(central)

        # -- status bar
        self.mode_label = QLabel(self)
        self.mode_label.setTextFormat(Qt.PlainText)
        self.path_label = QLabel(self)
        self.path_label.setTextFormat(Qt.PlainText)
        self.statusBar().addPermanentWidget(self.chain_copies.label)
        self.spark_status = SparkStatus(parent=self)   # the Scan tab's Spark, started in the background
        self.statusBar().addPermanentWidget(self.spark_status)
        self.statusBar().addPermanentWidget(self.path_label)
        self.statusBar().addPermanentWidget(self.mode_label)

        self._make_actions()
        self._connect()
        self._set_open_state(False)
        self._apply_utc(self.utc)

    # ---- construction -------------------------------------------------------------------------
    def _make_welcome(self) -> QWidget:
        w = QWidget(self)
        lay = QVBoxLayout(w)
        lay.addStretch(1)
        text = QLabel("No store open.\n\nOpen a RocketMQ store folder (the one holding commitlog/, consumequeue/, "
                      "index/, checkpoint) with File ▸ Open Store Folder (Ctrl+O), or drop the folder here.\n"
                      "Stores open read-only: no byte changes, no lock is taken.", w)
        text.setTextFormat(Qt.PlainText)
        text.setAlignment(Qt.AlignCenter)
        text.setWordWrap(True)
        button = QPushButton("Open Store Folder…", w)
        button.clicked.connect(lambda: self.open_dialog())
        lay.addWidget(text)
        lay.addWidget(button, 0, Qt.AlignCenter)
        lay.addStretch(2)
        return w

    def _make_actions(self) -> None:
        menus.make_actions(self)
        self._rebuild_recent()

    def _connect(self) -> None:
        s = self.session
        s.opening.connect(lambda p, ro: self.statusBar().showMessage(f"opening {p} ({'read-only' if ro else 'read-write'})…"))
        s.opened.connect(self._on_opened)
        s.openFailed.connect(self._on_open_failed)
        s.closed.connect(self._on_closed)
        s.opening.connect(self._show_open_progress)
        s.openProgress.connect(lambda p: self.open_progress is not None and self.open_progress.show_progress(p))
        s.openCancelled.connect(self._on_open_cancelled)
        s.refreshed.connect(self._on_refreshed)
        s.refreshFailed.connect(lambda e: self.statusBar().showMessage(f"refresh failed: {e}"))
        self.tree.queueChosen.connect(lambda t, q, off: self.show_queue(t, q, off))
        self.tree.topicChosen.connect(self.search.follow)   # Search looks where the tree points
        self.browser.status.connect(lambda t: self.statusBar().showMessage(t, 8000))
        self.search.status.connect(lambda t: self.statusBar().showMessage(t, 8000))
        self.search.openInBrowser.connect(self.show_queue)
        self.search.utcToggled.connect(self.act_utc.setChecked)
        self.browser.detail.sendAgainRequested.connect(self.send_dialog)
        self.search.detail.sendAgainRequested.connect(self.send_dialog)
        self.browser.detail.positionRequested.connect(lambda m: self._locate(self.browser.detail, m))
        self.search.detail.positionRequested.connect(lambda m: self._locate(self.search.detail, m))
        for d in (self.browser.detail, self.search.detail):   # the Lineage tab: a life, and a click opens a record
            d.lineageRequested.connect(lambda m, d=d: self._follow_life(d, m))
            d.lineage.recordChosen.connect(lambda r: self.show_queue(r["topic"], r["queueId"], r["queueOffset"]))

    # ---- opening ---------------------------------------------------------------------------------
    def open_dialog(self, read_only: bool | None = None) -> None:
        start = str(self.session.path or Path.home())
        path = QFileDialog.getExistingDirectory(self, "Open RocketMQ store folder", start)
        if path:
            self.open_store(path, read_only)

    def open_store(self, path, read_only: bool | None = None, settings: dict[str, str] | None = None,
                   remember: bool = False) -> None:
        """Open a store folder in the background (read-only unless asked or switched), with
        `settings` (RocketMQ names -> text) or else the settings remembered for that store.
        `remember`: once it opens, remember `settings` for the store (the command line's)."""
        if read_only is None:
            read_only = not self.act_rw.isChecked()
        self._rw_requested = not read_only
        if settings is None:
            settings = st.store_settings(self.settings, path)
        settings = sc.clean(settings)
        self._attempt = (str(path), read_only, settings)
        self._remember_on_open = (_resolved(path), settings) if remember else None
        try:
            config = sc.to_config(settings)
        except StoreError as exc:  # remembered settings the engine no longer takes
            self.session.openFailed.emit(str(Path(path).expanduser()), exc)
            return
        self.session.open(path, read_only=read_only, config=config)

    def _reopen(self, read_only: bool) -> None:
        """The current store again (mode switch, reopen), with the settings it is open with."""
        self.session.open(self.session.path, read_only=read_only, config=self.session.config)

    def current_settings(self) -> dict[str, str]:
        """The settings the open store was opened with ({}: everything detected)."""
        return sc.from_config(self.session.config)

    def store_settings_dialog(self, path=None, reason: str = "", values: dict[str, str] | None = None):
        """The store settings dialog (non-blocking); OK remembers the settings for the store
        and (re)opens it with them. Without a store open or a path, asks for the folder first."""
        read_only = None
        if path is None and self.session.is_open:
            path, read_only = self.session.path, self.session.read_only
            values = self.current_settings() if values is None else values
        elif path is None and self._attempt is not None:
            path, read_only = self._attempt[0], self._attempt[1]
            values = self._attempt[2] if values is None else values
        elif path is None:
            path = QFileDialog.getExistingDirectory(self, "Store settings for which store folder?", str(Path.home()))
            if not path:
                return None
        if self._attempt is not None and _resolved(self._attempt[0]) == _resolved(path):
            read_only = self._attempt[1] if read_only is None else read_only
        if values is None:
            values = st.store_settings(self.settings, path)
        from .views.store_settings import StoreSettingsDialog
        dlg = StoreSettingsDialog(path, values, self, reason=reason)
        dlg.setAttribute(Qt.WA_DeleteOnClose)

        def accepted():
            chosen = dlg.values()
            st.set_store_settings(self.settings, path, chosen)
            if self.session.is_open and _resolved(self.session.path) == _resolved(path):
                self._remember_position()
            self.open_store(path, read_only, settings=chosen)

        dlg.accepted.connect(accepted)
        dlg.open()
        self.settings_dialog = dlg
        return dlg

    def close_store(self) -> None:
        self.session.close()

    def _show_open_progress(self, path: str, read_only: bool) -> None:
        """Opening a store (recovery of a big one takes a while): progress, and Cancel."""
        self._end_open_progress()
        self.open_progress = TaskProgressDialog(
            self, "Opening store", f"opening {path} ({'read-only' if read_only else 'read-write'})…",
            self.session.cancel_open)

    def _end_open_progress(self) -> None:
        if self.open_progress is not None:
            self.open_progress.finish()
            self.open_progress = None

    def _on_open_cancelled(self, path: str) -> None:
        self._end_open_progress()
        self.statusBar().showMessage(f"opening {path} cancelled", 8000)
        self._sync_rw(self.session.store)

    def _on_opened(self, store) -> None:
        self._end_open_progress()
        st.add_recent(self.settings, store.root)
        remember, self._remember_on_open = self._remember_on_open, None
        if remember is not None and remember[0] == _resolved(store.root):
            st.set_store_settings(self.settings, store.root, remember[1])
        self._rebuild_recent()
        self._set_open_state(True)
        first_time = self.stack.currentWidget() is not self.split
        self.stack.setCurrentWidget(self.split)
        if first_time:
            self.split.setSizes([330, max(600, self.width() - 330)])
        self.setWindowTitle(f"{store.root} — rmqstore browser")
        self.path_label.setText(self.path_label.fontMetrics().elidedText(str(store.root), Qt.ElideMiddle, PATH_PX))
        self.path_label.setToolTip(str(store.root))
        self._sync_rw(store)
        self._show_banners(store)
        self.tree.populate(store)
        self.tabs.setTabVisible(self.tabs.indexOf(self.timers), store is not None and store.timer is not None)
        self.search.set_store_lists(store.topics(), store.queue_list(), -1, -1)
        self.overview.clear()
        self._compute_overview()
        restore, self._restore = self._restore, None
        if restore and store.find_queue(restore[0], restore[1]) is not None:
            self.show_queue(*restore)
        else:
            first = self._default_queue(store)
            if first:
                self.show_queue(first[0], first[1], None, switch_tab=False)
            else:
                self.browser.set_queue(None, None)
        self.statusBar().showMessage(
            f"opened {store.root} {'read-only' if store.read_only else 'READ-WRITE'}: "
            f"{len(store.queues)} queues, commitlog offsets [{store.min_offset}, {store.max_offset})", 10000)
        self.storeOpened.emit(store)
        self.chain_copies.schedule()

    def _on_open_failed(self, path: str, exc) -> None:
        self._end_open_progress()
        line = dialogs.one_line(exc)
        if not isinstance(exc, (StoreError, OSError)):  # not an answer the engine gives on purpose
            line = f"{type(exc).__name__}: {line}"
        self.statusBar().showMessage(f"could not open {path}: {line}", 10000)
        if isinstance(exc, StoreLockedError):
            same = self._restore is not None or self.session.is_open
            dialogs.warning(self, "Read-write refused",
                            f"{path} cannot be opened read-write:\n\n{line}" +
                            ("\n\nIt stays open read-only." if same else ""))
        elif sc.offers_settings(exc):
            self._remember_on_open = None
            tried = self._attempt[2] if self._attempt and _resolved(self._attempt[0]) == _resolved(path) else None
            self.error_box = dialogs.error_offering(
                self, "Cannot open store", line, "Store settings…",
                lambda: self.store_settings_dialog(path, reason=line, values=tried), detail=str(path))
        else:
            dialogs.error(self, "Cannot open store", line, detail=str(path))
        self._sync_rw(self.session.store)

    def _on_closed(self) -> None:
        self._set_open_state(False)
        self.tree.populate(None)
        self.tabs.setTabVisible(self.tabs.indexOf(self.timers), False)
        self.browser.set_queue(None, None)
        self.overview.clear()
        self.search.clear()
        self.banners.clear()
        self.path_label.setText("")
        self.setWindowTitle("rmqstore browser")
        self.stack.setCurrentWidget(self.welcome)
        self._sync_rw(None)
        self.storeClosed.emit()

    def _set_open_state(self, is_open: bool) -> None:
        for a in (self.act_close, self.act_refresh, self.act_find, self.act_goto, self.act_gotime, self.act_rw,
                  self.act_compare, self.act_check):
            a.setEnabled(is_open)
        self.act_tail.setEnabled(is_open and self.session.can_refresh)
        self.act_send.setEnabled(is_open and not self.session.read_only)
        if not is_open:
            self.mode_label.setText("no store")

    def _sync_rw(self, store) -> None:
        rw = store is not None and not store.read_only
        self.act_rw.blockSignals(True)
        self.act_rw.setChecked(rw)
        self.act_rw.blockSignals(False)
        self.act_send.setEnabled(rw)
        self.act_tail.setEnabled(store is not None and self.session.can_refresh and store.read_only)
        for d in (self.browser.detail, self.search.detail):
            d.set_send_enabled(rw)
            d.set_store(store.root if store is not None else None, self.settings)
        if store is not None:
            self.mode_label.setText("READ-ONLY" if store.read_only else "READ-WRITE")
            self.mode_label.setStyleSheet("color:#1a6d1a; font-weight:bold; padding:0 6px" if store.read_only
                                          else "color:#b35900; font-weight:bold; padding:0 6px")

    def _show_banners(self, store) -> None:
        self.banners.show_store(store)

    # ---- mode switch -------------------------------------------------------------------------------
    def _rw_toggled(self, on: bool) -> None:
        store = self.session.store
        if store is None or on == (not store.read_only):
            return
        self._remember_position()
        self._rw_requested = on
        self._reopen(read_only=not on)

    def _remember_position(self) -> None:
        m = self.browser.model
        if m.topic is not None:
            idx = self.browser.table.currentIndex()
            self._restore = (m.topic, m.queue_id, m.offset_of_row(idx.row()) if idx.isValid() else None)

    # ---- recent -------------------------------------------------------------------------------------
    def _rebuild_recent(self) -> None:
        for a in self.recent_actions:
            self.removeAction(a)
        self.recent_menu.clear()
        self.recent_actions = []
        items = st.recent_stores(self.settings)
        for i, p in enumerate(items, 1):
            a = QAction(f"&{i}  {p}", self)
            a.setShortcut(QKeySequence(f"Ctrl+{i}"))
            a.triggered.connect(lambda checked=False, p=p: self.open_recent(p))
            self.recent_menu.addAction(a)
            self.addAction(a)
            self.recent_actions.append(a)
        self.recent_menu.setEnabled(bool(items))

    def open_recent(self, path: str) -> None:
        if not Path(path).is_dir():
            st.remove_recent(self.settings, path)
            self._rebuild_recent()
            dialogs.error(self, "Cannot open store", f"{path}: the folder no longer exists")
            return
        self.open_store(path)

    # ---- tree ---------------------------------------------------------------------------------------
    def _update_tree(self) -> None:
        """Counts changed (refresh, send): rebuild the tree and the search lists."""
        store = self.session.store
        if store is None:
            return
        m = self.browser.model
        self.tree.update(store, (m.topic, m.queue_id) if m.topic is not None else None)
        self.search.set_store_lists(store.topics(), store.queue_list(), -1, -1)

    def show_queue(self, topic: str, queue_id: int, offset: int | None = None, switch_tab: bool = True) -> None:
        """Show a queue in the Messages view, at `offset` (a queue offset) if given."""
        m = self.browser.model
        if m.topic == topic and m.queue_id == queue_id and m.has_queue:
            if offset is not None:
                self.browser.go_to_offset(offset)
        else:
            self.browser.set_queue(topic, queue_id, offset)
        self.tree.select_queue(topic, queue_id)
        self.search.follow(topic, queue_id)
        if switch_tab:
            self.tabs.setCurrentWidget(self.browser)

    @staticmethod
    def _default_queue(store) -> tuple[str, int] | None:
        """The queue shown first: the biggest queue of the biggest ordinary topic."""
        best = None
        for q in store.queue_list():
            n = q["maxOffset"] - q["minOffset"]
            if n <= 0:
                continue
            system = q["topic"].startswith(SYSTEM_PREFIXES)
            key = (not system, n)
            if best is None or key > best[0]:
                best = (key, (q["topic"], q["queueId"]))
        return best[1] if best else None

    # ---- overview, position ------------------------------------------------------------------------
    def _compute_overview(self) -> None:
        def done(ov):
            self.overview.show_overview(ov)
            self.search.set_store_lists([t.topic for t in ov.topics], self.session.store.queue_list(),
                                        ov.first_time, ov.last_time)

        self.session.submit(compute_overview, lane=self._overview_lane, on_result=done,
                            on_error=lambda e: self.statusBar().showMessage(f"overview failed: {e}"))

    def _locate(self, detail, message) -> None:
        from .models.position import locate
        self.session.submit(locate, message, on_result=lambda p: detail.show_position(message, p),
                            on_error=lambda e: detail.position.setPlainText(f"could not locate: {e}"))

    def _follow_life(self, detail, message) -> None:
        from .views.lineage_view import compute_lineage
        self.session.submit(compute_lineage, message, on_result=lambda lives: detail.show_lineage(message, lives),
                            on_error=lambda e: detail.lineage.show_note(f"could not follow its life: {e}"))

    # ---- refresh -------------------------------------------------------------------------------------
    def refresh(self) -> None:
        if not self.session.is_open:
            return
        if self.session.can_refresh and self.session.read_only:
            self.session.refresh()
            self.statusBar().showMessage("refreshing…", 3000)
        elif not self.session.read_only:
            self.session.notify_changed()  # read-write: this process is the only writer
        else:
            self._remember_position()
            self._reopen(read_only=self.session.read_only)

    def _on_refreshed(self, changed: bool) -> None:
        if not changed:
            return
        self.browser.on_store_changed()
        self._update_tree()
        self._compute_overview()

    # ---- small actions --------------------------------------------------------------------------------
    def _utc_toggled(self, on: bool) -> None:
        self.utc = on
        st.set_use_utc(self.settings, on)
        self._apply_utc(on)

    def _apply_utc(self, on: bool) -> None:
        self.browser.set_utc(on)
        self.search.set_utc(on)
        self.overview.set_utc(on)
        for lazy in (self.timers, self.internals):
            if lazy.panel is not None:
                lazy.panel.set_utc(on)

    def _find(self) -> None:
        self.tabs.setCurrentWidget(self.search)
        self.search.focus_key()

    def _goto(self) -> None:
        self.tabs.setCurrentWidget(self.browser)
        self.browser.focus_offset()

    def _gotime(self) -> None:
        self.tabs.setCurrentWidget(self.browser)
        self.browser.focus_time()

    def send_dialog(self, message=None):
        """The send dialog (read-write only), optionally filled from a message ("send again")."""
        store = self.session.store
        if store is None or store.read_only:
            dialogs.info(self, "Send test messages", "Sending needs the store open read-write: "
                                                     "turn on Store ▸ Read-write first.")
            return None
        from .views.send_dialog import SendDialog
        dlg = SendDialog(self.session, store.topics(), self.settings, self)
        if message is not None and not isinstance(message, bool):
            dlg.prefill(message)
        elif self.browser.model.topic and not self.browser.model.topic.startswith(SYSTEM_PREFIXES):
            dlg.topic.setCurrentText(self.browser.model.topic)
        dlg.setAttribute(Qt.WA_DeleteOnClose)
        dlg.show()
        self.send_dlg = dlg
        return dlg

    def show_help(self):
        """The keyboard shortcuts as a two-column table (non-blocking; F1 again raises it)."""
        if self.help_dialog is None:
            self.help_dialog = menus.help_dialog(self)
        self.help_dialog.show()
        self.help_dialog.raise_()
        return self.help_dialog

    def show_about(self) -> None:
        dialogs.info(self, "About rmqstore", menus.about_text())

    def _internals_created(self, panel) -> None:
        panel.set_utc(self.utc)
        panel.openRequested.connect(self.show_commitlog_offset)
        panel.queueOffsetsSelected.connect(lambda t, q, first, end: self.show_queue(t, q, first))

    def _timers_created(self, view) -> None:
        view.openRequested.connect(self.show_commitlog_offset)
        view.set_utc(self.utc)

    def show_commitlog_offset(self, offset: int) -> None:
        """Show the message whose record starts at a commitlog offset (from the internals views)."""
        m = self.session.call(lambda s: s.look_message_by_offset(int(offset)))
        if m is None:
            self.statusBar().showMessage(f"no message starts at commitlog offset {offset}", 8000)
            return
        if self.session.store.find_queue(m.topic, m.queueId) is not None:
            self.show_queue(m.topic, m.queueId, m.queueOffset)
        else:
            self.statusBar().showMessage(f"commitlog offset {offset}: {m.topic} / {m.queueId} has no queue", 8000)


    # ---- drag and drop, close -----------------------------------------------------------------------
    @staticmethod
    def _dropped_folder(mime) -> str | None:
        if not mime.hasUrls():
            return None
        for url in mime.urls():
            if url.isLocalFile() and Path(url.toLocalFile()).is_dir():
                return url.toLocalFile()
        return None

    def dragEnterEvent(self, event) -> None:
        if self._dropped_folder(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        folder = self._dropped_folder(event.mimeData())
        if folder:
            event.acceptProposedAction()
            self.open_store(folder)

    def closeEvent(self, event) -> None:
        self.browser.set_tail(False)
        self.session.close()
        self.session.wait_open()
        super().closeEvent(event)


# The two heavier panels are imported when first shown (pyqtgraph and the scan engines cost
# ~0.2 s of startup); plain import statements all the same, so linters and import-linter see them.
def _internals_panel(session):
    from .internals.panel import InternalsPanel
    return InternalsPanel(session)


def _timers_view(session):
    from .views.timers import TimersView
    return TimersView(session)


def _scan_panel(session, settings):
    from .scan_panel import ScanPanel
    return ScanPanel(session, settings)


def _resolved(path) -> str:
    try:
        return str(Path(path).expanduser().resolve())
    except OSError:
        return str(path)
