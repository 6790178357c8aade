"""Shim (issue 18, to remove after the merge): the internals views' workers now live in the
GUI's one runner, gui.workers. Import `Background`, `internals_pool`, `RefreshWhenShown`
from there."""
from gui.workers import Background, RefreshWhenShown, internals_pool

__all__ = ["Background", "RefreshWhenShown", "internals_pool"]
