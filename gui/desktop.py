"""The window on a real desktop: a size that fits the screen (the status bar on it) and the
platform's colour scheme followed (gui.palette)."""
from __future__ import annotations

from .palette import follow_platform  # noqa: F401 - the window's start-up needs both

DEFAULT_SIZE = (1440, 900)
FRAME_PX = 48     # title bar and borders a window manager adds around the window
PATH_PX = 380     # the store path in the status bar at most (elided in the middle; whole in its tooltip)


def default_size(screen) -> tuple[int, int]:
    """1440x900, or less on a smaller screen: the whole window (its status bar too) on screen."""
    w, h = DEFAULT_SIZE
    if screen is not None:
        avail = screen.availableGeometry()
        w, h = min(w, avail.width() - 8), min(h, avail.height() - FRAME_PX)
    return w, h
