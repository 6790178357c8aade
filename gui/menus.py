"""The main window's actions, menus, toolbar, keyboard shortcuts table and About text."""
from __future__ import annotations

import resources
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QDialog, QDialogButtonBox, QToolBar, QVBoxLayout

from engine import __version__

from .views.new_demo import new_demo_store
from .views.store_check import open_check_dialog
from .views.store_compare import open_compare_dialog
from .views.tables import fill_table, make_table

SHORTCUTS = [
    ("Ctrl+O", "Open a store folder (in the mode of the read-write switch; read-only by default)"),
    ("Ctrl+Shift+O", "Open a store folder read-only"),
    ("Ctrl+1 … Ctrl+9", "Open a recent store"),
    ("Ctrl+W", "Close the store"),
    ("F5", "Refresh: re-read the end of the store (or reopen it)"),
    ("Ctrl+F", "Find by key"),
    ("Ctrl+G", "Go to a queue offset"),
    ("Ctrl+T", "Go to a time in the queue"),
    ("Ctrl+Home / Ctrl+End", "First / last message of the queue"),
    ("Ctrl+L", "Live tail on/off"),
    ("Ctrl+Shift+M", "Send test messages (read-write only)"),
    ("Ctrl+Shift+U", "Times in UTC / local time"),
    ("Ctrl+Q", "Quit"),
    ("F1", "This help"),
]


def about_text() -> str:
    """Versions of everything the browser stands on (for bug reports)."""
    import platform

    import numpy
    import PySide6
    import pyqtgraph
    try:
        from importlib.metadata import version
        spark = version("pyspark")
    except Exception:  # noqa: BLE001 - optional
        spark = "not installed (scans run locally; pip install 'rmqstore[spark]')"
    return (f"rmqstore browser {__version__}\n\nBrowse Apache RocketMQ's on-disk message store: CommitLog, "
            f"ConsumeQueue, IndexFile (RocketMQ 4.9 and 5.x formats).\n\n"
            f"Python {platform.python_version()} · PySide6 {PySide6.__version__} · pyqtgraph {pyqtgraph.__version__}"
            f" · numpy {numpy.__version__}\nPySpark {spark}")


def action(win, text: str, slot, shortcut=None, tip: str = "", checkable: bool = False) -> QAction:
    """A window-wide action (its shortcut works wherever the focus is)."""
    a = QAction(text, win)
    if shortcut:
        a.setShortcut(QKeySequence(shortcut))
    if tip:
        a.setStatusTip(tip)
        a.setToolTip(tip)
    a.setCheckable(checkable)
    (a.toggled if checkable else a.triggered).connect(slot)
    win.addAction(a)
    return a

def make_actions(self) -> None:
    """The window's actions (as its act_* attributes), menus and toolbar."""
    def A(*a, **k):
        return action(self, *a, **k)
    self.act_open = A("&Open Store Folder…", lambda: self.open_dialog(), "Ctrl+O",
                      "Open a store folder (read-only unless the read-write switch is on)")
    self.act_open_ro = A("Open Store Folder &Read-Only…", lambda: self.open_dialog(read_only=True),
                         "Ctrl+Shift+O", "Open a store folder read-only")
    self.act_new_demo = A("New &Demo Store…", lambda: new_demo_store(self), None,
                          "Write a demo store of any size into a new folder (progress and Cancel), then open it")
    self.act_close = A("&Close Store", self.close_store, "Ctrl+W")
    self.act_quit = A("&Quit", self.close, "Ctrl+Q")
    self.act_refresh = A("&Refresh", self.refresh, "F5", "Re-read the end of the store")
    self.act_utc = A("Times in &UTC", self._utc_toggled, "Ctrl+Shift+U", "Show every time in UTC", True)
    self.act_utc.setChecked(self.utc)
    self.act_find = A("&Find by Key…", self._find, "Ctrl+F")
    self.act_goto = A("&Go to Queue Offset…", self._goto, "Ctrl+G")
    self.act_gotime = A("Go to &Time…", self._gotime, "Ctrl+T")
    self.act_tail = A("&Live Tail", self.browser.tail.setChecked, "Ctrl+L",
                      "Follow a store that another process writes", True)
    self.browser.tail.toggled.connect(self.act_tail.setChecked)
    self.act_rw = A("Read-&write", self._rw_toggled, None,
                    "Reopen the store read-write (refused while a broker or another writer holds the lock)",
                    True)
    self.act_send = A("&Send Test Messages…", self.send_dialog, "Ctrl+Shift+M",
                      "Append test messages (read-write only)")
    self.act_store_settings = A("Store S&ettings…", lambda: self.store_settings_dialog(), None,
                                "File sizes and other settings by RocketMQ's names (or from a broker.conf); "
                                "remembered for the store")
    self.act_compare = A("&Compare with Store…", lambda: open_compare_dialog(self), None,
                         "Compare the open store with another store folder (both read, never written)")
    self.act_check = A("C&heck Store…", lambda: open_check_dialog(self), None,
                       "Verify the store (records, CRCs, ConsumeQueues, index, checkpoint) without writing a byte")
    self.act_chain_copies = A("Make In-Memory &Index Copies for Key Queries", self.chain_copies.set_enabled, None,
                              "After a store opens, copy each index file's hash chains into memory in the "
                              "background: key searches cost one or two cache misses per file (up to 2 GiB)", True)
    self.act_chain_copies.blockSignals(True)
    self.act_chain_copies.setChecked(self.chain_copies.enabled)
    self.act_chain_copies.blockSignals(False)
    self.act_help = A("&Keyboard Shortcuts", self.show_help, "F1")
    self.act_about = A("&About", self.show_about)

    mb = self.menuBar()
    m = mb.addMenu("&File")
    m.addAction(self.act_open)
    m.addAction(self.act_open_ro)
    self.recent_menu = m.addMenu("Recent &Stores")
    m.addAction(self.act_new_demo)
    m.addAction(self.act_close)
    m.addSeparator()
    m.addAction(self.act_quit)
    m = mb.addMenu("&View")
    for a in (self.act_refresh, self.act_tail, self.act_utc):
        m.addAction(a)
    m.addSeparator()
    for a in (self.act_find, self.act_goto, self.act_gotime):
        m.addAction(a)
    m = mb.addMenu("&Store")
    m.addAction(self.act_rw)
    m.addAction(self.act_send)
    m.addSeparator()
    m.addAction(self.act_check)
    m.addAction(self.act_compare)
    m.addAction(self.act_store_settings)
    m.addSeparator()
    m.addAction(self.act_chain_copies)
    m = mb.addMenu("&Help")
    m.addAction(self.act_help)
    m.addAction(self.act_about)
    self.recent_actions = []

    tb = QToolBar("Main", self)
    tb.setObjectName("main-toolbar")
    tb.setMovable(False)
    tb.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
    for a, name in ((self.act_open, "open"), (self.act_refresh, "refresh"), (self.act_find, "search"),
                    (self.act_send, "send"), (self.act_tail, "live-tail")):
        a.setIcon(resources.icon(name))
    for a in (self.act_open, self.act_refresh):
        tb.addAction(a)
    tb.addSeparator()
    tb.addAction(self.act_rw)
    tb.addAction(self.act_send)
    tb.addSeparator()
    tb.addAction(self.act_tail)
    tb.addAction(self.act_utc)
    self.addToolBar(tb)
    self.toolbar = tb


def help_dialog(win) -> QDialog:
    """The keyboard shortcuts as a two-column table."""
    dlg = QDialog(win)
    dlg.setWindowTitle("Keyboard shortcuts")
    table = make_table(["Shortcut", "Does"], dlg)
    table.setSelectionMode(QAbstractItemView.NoSelection)
    table.setFocusPolicy(Qt.NoFocus)
    table.setShowGrid(False)
    fill_table(table, [list(r) for r in SHORTCUTS], tooltips=False)
    for r in range(table.rowCount()):
        f = table.item(r, 0).font()
        f.setBold(True)
        table.item(r, 0).setFont(f)
    table.resizeColumnsToContents()
    buttons = QDialogButtonBox(QDialogButtonBox.Close, dlg)
    buttons.rejected.connect(dlg.close)
    lay = QVBoxLayout(dlg)
    lay.addWidget(table)
    lay.addWidget(buttons)
    w = table.columnWidth(0) + table.columnWidth(1) + 40
    h = table.verticalHeader().length() + table.horizontalHeader().height() + 90
    dlg.resize(min(w, 900), min(h, 700))
    dlg.table = table
    return dlg
