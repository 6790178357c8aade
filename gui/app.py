"""Entry point of `rmqstore-browser [STORE]` (also `python -m gui.app [STORE]`).

With no STORE: the demo store (engine.ensure_demo_task, created on first use in the
user data folder) if the engine has it, else the small conformance fixture of a checkout
(build/conformance/small), else an empty window that asks for a folder.

`--config broker.conf` and `--set KEY=VALUE` give store settings by RocketMQ's names, as for
`rmqstore`; once the store opens with them they are remembered for it (Store ▸ Store Settings…).

The Scan tab's Spark starts in the background once a store is open and the tab is shown
(gui.spark_warmup; RMQSTORE_SPARK_WARMUP=0 turns that off).

RMQSTORE_SCREENSHOT=FILE.png (tests, docs): once the store has opened and the window painted,
save the screen as the display shows it, print one JSON line (platform, window geometry,
screen size) and quit."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def demo_maker():
    """The engine's demo store as a task (the facade's ensure_demo_task), when it has one."""
    import engine
    return getattr(engine, "ensure_demo_task", None)


def demo_path() -> Path:
    from PySide6.QtCore import QStandardPaths
    base = QStandardPaths.writableLocation(QStandardPaths.AppDataLocation) or str(Path.home() / ".rmqstore")
    return Path(base) / "demo-store"


def fallback_store() -> Path | None:
    small = ROOT / "build" / "conformance" / "small"
    return small if small.is_dir() else None


def open_default(win):
    """No STORE given: make (first time, with progress and Cancel) and open the demo store off
    the UI thread; without a demo maker, the small conformance fixture; else leave the window
    asking for a folder. Returns the demo task, if one runs."""
    ensure = demo_maker()
    if ensure is None:
        store = fallback_store()
        if store is not None:
            win.open_store(store, read_only=True)
        return None
    from .views.progress import TaskProgressDialog
    win.statusBar().showMessage("preparing the demo store (created on first use)…")
    task = None
    dialog = TaskProgressDialog(win, "Demo store", "writing the demo store (first use only)…",
                                lambda: task.cancel.cancel())

    def opened(path):
        dialog.finish()
        win.open_store(path, read_only=True)

    def failed(exc):
        from .views import dialogs
        dialog.finish()
        dialogs.error(win, "Demo store", exc, detail="The demo store could not be created.")
        store = fallback_store()
        if store is not None:
            win.open_store(store, read_only=True)

    def cancelled():
        dialog.finish()
        win.statusBar().showMessage("demo store not written (cancelled): open a store folder", 10000)

    task = win.session.runner.submit(ensure, demo_path(), pass_cancel=True, on_result=opened, on_error=failed,
                                     on_progress=dialog.show_progress, on_cancelled=cancelled)
    return task


def _install_excepthook(window_getter) -> None:
    """An unexpected exception on the UI thread becomes a one-line dialog, not a dead window."""
    previous = sys.excepthook

    def hook(etype, value, tb):
        previous(etype, value, tb)  # keep the traceback on stderr for bug reports
        win = window_getter()
        if win is not None and not issubclass(etype, KeyboardInterrupt):
            from .views import dialogs
            dialogs.error(win, "Unexpected error", f"{etype.__name__}: {dialogs.one_line(value)}")

    sys.excepthook = hook


def _screenshot_soon(app, win, path: str, delay_ms: int = 800) -> None:
    """RMQSTORE_SCREENSHOT: after the open's first paints, grab the whole screen from the display
    (not the widget's own rendering: this shows what the platform really drew), say where the
    window is and quit."""
    from PySide6.QtCore import QTimer

    def grab():
        screen = win.screen()
        pixmap = screen.grabWindow(0)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        saved = pixmap.save(path)
        g = win.frameGeometry()
        print(json.dumps({"platform": app.platformName(), "saved": saved, "path": path,
                          "window": [g.x(), g.y(), g.width(), g.height()],
                          "screen": [screen.geometry().width(), screen.geometry().height()],
                          "title": win.windowTitle()}), flush=True)
        win.close()
        app.quit()
    QTimer.singleShot(delay_ms, grab)


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, dict[str, str]]:
    """The command line, and the store settings it gives (`--config FILE`, then `--set K=V`
    over it, like `rmqstore`). A bad file or value: one line on stderr, exit code 2."""
    from engine import __version__
    from engine.errors import ConfigError

    from .store_config import from_command_line
    parser = argparse.ArgumentParser(prog="rmqstore-browser", description="Browse a RocketMQ store folder")
    parser.add_argument("store", nargs="?", help="store root folder (default: the demo store)")
    parser.add_argument("--read-write", action="store_true", help="open read-write (default: read-only)")
    parser.add_argument("--config", metavar="FILE", help="broker.conf-style store settings")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a store setting by its RocketMQ name, e.g. mappedFileSizeCommitLog=65536 "
                             "(repeatable; over --config)")
    parser.add_argument("--version", action="version", version=f"rmqstore-browser {__version__}")
    args = parser.parse_args(argv)
    if (args.config or args.set) and not args.store:
        parser.error("--config and --set need a STORE folder")
    try:
        values, notes = from_command_line(args.config, args.set)
    except ConfigError as e:
        print(f"rmqstore-browser: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    for note in notes:
        print(f"rmqstore-browser: note: {note}", file=sys.stderr)
    return args, values


def main(argv: list[str] | None = None) -> int:
    args, values = parse_args(argv)  # before Qt: a bad setting costs no window

    from PySide6.QtWidgets import QApplication

    from .main_window import MainWindow
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("rmqstore-browser")
    app.setOrganizationName("rmqstore")
    app.setDesktopFileName("rmqstore-browser")
    from . import gc_guard
    gc_guard.install(app)  # cycles collected on the UI thread only: Qt objects die where they live
    import resources
    app.setWindowIcon(resources.app_icon())
    from . import spark_warmup
    spark_warmup.instance().enabled = spark_warmup.enabled_by_env(True)
    win = MainWindow()
    _install_excepthook(lambda: win)
    shot = os.environ.get("RMQSTORE_SCREENSHOT")
    if shot:
        win.storeOpened.connect(lambda _store: _screenshot_soon(app, win, shot))
    win.show()
    if args.store:
        # settings from the command line win over the remembered ones and are remembered once the store opens
        given = bool(args.config or args.set)
        win.open_store(args.store, read_only=not args.read_write, settings=values if given else None,
                       remember=given)
    else:
        open_default(win)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
