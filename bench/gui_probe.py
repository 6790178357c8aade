"""Run in a fresh process (offscreen Qt): the browser window opens a store read-only and shows
a queue; prints the time from the open action to the first painted page of that queue.

    python -m bench.gui_probe STORE TOPIC QUEUE_ID"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def main(root: str, topic: str, qid: int) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    t_process = time.perf_counter()
    from PySide6.QtCore import QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication
    app = QApplication([])
    from gui.main_window import MainWindow
    with tempfile.TemporaryDirectory() as tmp:
        settings = QSettings(os.path.join(tmp, "settings.ini"), QSettings.IniFormat)
        w = MainWindow(settings=settings)
        w.resize(1440, 900)
        w.show()
        app.processEvents()
        t_imports = time.perf_counter()
        loop = QEventLoop()
        opened = []
        w.storeOpened.connect(lambda s: (opened.append(s), loop.quit()))
        QTimer.singleShot(3_600_000, loop.quit)
        t0 = time.perf_counter()
        w.open_store(root, read_only=True)
        if not opened:
            loop.exec()
        t_open = time.perf_counter()
        w.show_queue(topic, qid, None)
        w.browser.table.viewport().grab()  # paints the visible page now
        t_paint = time.perf_counter()
        model = w.browser.model
        rows, loaded = model.rowCount(), model.is_loaded(0)
        w.session.close()
        w.session.wait_open()
    print(json.dumps({"openToFirstPaintSeconds": t_paint - t0, "openSeconds": t_open - t0,
                      "startupSeconds": t_imports - t_process, "rows": rows, "firstPageLoaded": loaded}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
