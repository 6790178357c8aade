"""Entry script of the bundled `rmqstore-browser` (PyInstaller); runs gui.app:main, the
wheel's gui script.

Smoke check for packaging tests (the bundle cannot be driven from Python): with
RMQSTORE_SMOKE=PATH set, the app runs as usual, then after RMQSTORE_SMOKE_MS milliseconds
(default 3000) saves a screenshot of its main window to PATH, prints one JSON line
{"title", "status", "width", "height", "windows", "icons"} on stdout and quits with code 0
("icons": the names resources.icon() rendered non-empty, a check of the bundled resources
and of Qt's SVG plugins)."""
import multiprocessing
import os
import sys


def arm_smoke(path: str, delay_ms: int) -> None:
    import json
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication, QMainWindow
    app = QApplication.instance() or QApplication(sys.argv[:1])

    def shoot():
        wins = [w for w in app.topLevelWidgets() if w.isVisible()]
        main = next((w for w in wins if isinstance(w, QMainWindow)), wins[0] if wins else None)
        from PySide6.QtCore import QSize
        from resources import icon, icon_names
        info = {"title": None, "status": None, "width": 0, "height": 0, "windows": len(wins),
                "icons": [n for n in icon_names() if not icon(n).pixmap(QSize(24, 24)).isNull()]}
        if main is not None:
            main.grab().save(path)
            status = main.statusBar().currentMessage() if isinstance(main, QMainWindow) else None
            info.update(title=main.windowTitle(), status=status, width=main.width(), height=main.height())
        print(json.dumps(info, ensure_ascii=False), flush=True)
        app.exit(0)

    QTimer.singleShot(delay_ms, shoot)


if __name__ == "__main__":
    multiprocessing.freeze_support()
    if os.environ.get("RMQSTORE_SMOKE") and "--version" not in sys.argv and "-h" not in sys.argv \
            and "--help" not in sys.argv:
        arm_smoke(os.environ["RMQSTORE_SMOKE"], int(os.environ.get("RMQSTORE_SMOKE_MS", "3000")))
    from gui.app import main
    sys.exit(main())
