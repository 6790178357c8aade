"""The `rmqstore` command line: parsing, output and exit codes over the engine's facade."""
from engine.cli.app import build_parser, main

__all__ = ["main", "build_parser"]
