"""Entry point of `rmqstore-browser [STORE]`."""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    from engine import __version__
    parser = argparse.ArgumentParser(prog="rmqstore-browser", description="Browse a RocketMQ store folder")
    parser.add_argument("store", nargs="?", help="store root folder (default: the demo store)")
    parser.add_argument("--version", action="version", version=f"rmqstore-browser {__version__}")
    args = parser.parse_args(argv)
    from PySide6.QtWidgets import QApplication, QLabel
    app = QApplication.instance() or QApplication(sys.argv[:1])
    w = QLabel(f"rmqstore: {args.store or 'no store'}")
    w.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
