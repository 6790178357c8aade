"""StoreSession: the one open MessageStore behind the window, and the only way views reach it.

- Opening runs on a worker as a task with progress (recovery of a big store can take a
  while) and can be cancelled; the current store stays in place until the new one is
  ready, so a failed or cancelled open changes nothing.
- Every engine call from a worker holds `lock` (a long generator holds it per step), so a
  refresh or a close never remaps files under a running read.
- `generation` changes whenever the store changes; results computed for an older store are
  dropped by the TaskRunner.
- Switching the same store to read-write closes the read-only maps first (recovery may cut
  files), and falls back to read-only when the lock is refused."""
from __future__ import annotations

import contextlib
import threading
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal

from engine import MessageStore, StoreWithTier, TieredStore, is_tier_folder, parse_tier_level as parse_level
from engine.tasks import Cancelled, CancelToken, Progress

from .workers import Lane, TaskRunner, holding


def open_task(path: Path, config, read_only: bool, cancel: CancelToken):
    """Opening a store as a task. The one line to swap once the engine has the generator:
    `store = yield from MessageStore.open_task(path, config=config, read_only=read_only, cancel=cancel)`."""
    yield Progress(0, 0, "open", message=f"opening {path} ({'read-only' if read_only else 'read-write'})…")
    if is_tier_folder(path):  # a tier of tiered storage: its own reader, read-only
        store = TieredStore.open(path, _tier_settings(config))
    else:
        store = MessageStore.open(path, config=config, read_only=read_only)
        if config is not None and getattr(config, "tieredStoreFilePath", "") and read_only:
            try:  # a store with its tier: reads as TieredMessageStore's
                store = StoreWithTier(store, TieredStore.open(config.tieredStoreFilePath, _tier_settings(config)),
                                      parse_level(config.tieredStorageLevel))
            except BaseException:
                store.close()
                raise
    if cancel.cancelled:  # asked to stop while the engine worked: give back the maps and the lock
        store.close()
        raise Cancelled()
    return store


def _tier_settings(config) -> dict:
    """The cluster the settings name chooses within a tier (when it holds several brokers)."""
    name = getattr(config, "brokerClusterName", "") if config is not None else ""
    return {"brokerClusterName": name} if config is not None and "brokerClusterName" in config.explicit else {}


class StoreSession(QObject):
    opening = Signal(str, bool)        # path, read_only
    opened = Signal(object)            # the MessageStore
    openFailed = Signal(str, object)   # path, the exception (a StoreError or OSError)
    openProgress = Signal(object)      # Progress of the open running
    openCancelled = Signal(str)        # path
    aboutToClose = Signal(object)      # the store, still open: panels with their own workers let go now
    closed = Signal()
    refreshed = Signal(bool)           # True when the store changed (new data)
    refreshFailed = Signal(object)     # the exception

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.store: MessageStore | None = None
        self.lock = threading.RLock()
        self.runner = TaskRunner(self)
        self._open_runner = TaskRunner(self, max_threads=1)  # never cancelled by close()
        self.generation = 0
        self._open_gen = 0
        self._open_task = None
        self._open_cancelled = lambda: None
        self._refresh_task = None
        self.config = None   # the StoreConfig the current store was opened with (None: detected)

    # ---- state -----------------------------------------------------------------------
    @property
    def path(self) -> Path | None:
        return self.store.root if self.store is not None else None

    @property
    def read_only(self) -> bool:
        return self.store.read_only if self.store is not None else True

    @property
    def is_open(self) -> bool:
        return self.store is not None

    @property
    def busy_opening(self) -> bool:
        return self._open_task is not None and not self._open_task.done

    # ---- open / close ------------------------------------------------------------------
    def open(self, path, read_only: bool = True, config=None) -> None:
        """Open `path` in the background with `config` (an engine StoreConfig, or None to detect
        everything from the files); emits opened or openFailed."""
        path = Path(path).expanduser()
        same = self.store is not None and _same(self.store.root, path)
        fallback = None
        fallback_config = self.config
        if same and (read_only != self.store.read_only or not read_only):
            # the same folder in another mode, or again read-write: let go of the current maps
            # (and of the lock, which one process holds once) first
            fallback = self.store.root if read_only is False and self.store.read_only else None
            self.close()
        self.opening.emit(str(path), read_only)
        self._open_gen += 1
        gen = self._open_gen

        def done(store):
            if gen != self._open_gen:  # a newer open superseded this one: never leak its maps/lock
                store.close()
                return
            if self.store is not None:
                self.close()
            self.store = store
            self.config = config
            self.generation += 1
            self.opened.emit(store)

        def failed(exc):
            if gen != self._open_gen:
                return
            self.openFailed.emit(str(path), exc)
            if fallback is not None and self.store is None:
                self.open(fallback, read_only=True, config=fallback_config)

        def cancelled():
            if gen != self._open_gen:
                return
            self._open_gen += 1   # whatever this open still delivers is closed on arrival
            self.openCancelled.emit(str(path))
            if fallback is not None and self.store is None:
                self.open(fallback, read_only=True, config=fallback_config)

        # `done` closes a superseded store; a cancelled open's store is closed when it arrives
        self._open_cancelled = cancelled
        self._open_task = self._open_runner.submit(
            open_task, path, config, read_only, pass_cancel=True, on_result=done, on_error=failed,
            on_cancelled=cancelled, on_dropped=lambda store: store.close(),
            on_progress=lambda p: self.openProgress.emit(p) if gen == self._open_gen else None)

    def wait_open(self, msecs: int = -1) -> bool:
        """Block until the open running (if any) has finished (startup, tests, shutdown)."""
        return self._open_runner.wait(msecs, cancel=False)

    def cancel_open(self) -> bool:
        """Stop the open running, at once for the window (openCancelled; the current store, if
        any, stays); the engine stops at its next step. False when no open runs."""
        if not self.busy_opening or self._open_task.cancel.cancelled:
            return False
        self._open_task.cancel.cancel()
        self._open_cancelled()
        return True

    def open_blocking(self, path, read_only: bool = True, config=None) -> MessageStore:
        """Open on the calling thread (startup, tests); raises the engine's errors."""
        store = MessageStore.open(Path(path).expanduser(), config=config, read_only=read_only)
        if self.store is not None:
            self.close()
        self.store = store
        self.config = config
        self.generation += 1
        self.opened.emit(store)
        return store

    def close(self) -> None:
        if self.store is None:
            return
        self.generation += 1
        self._refresh_task = None
        self.aboutToClose.emit(self.store)
        self.runner.wait()
        with self.lock:
            store, self.store = self.store, None
            self.config = None
            store.close()
        self.closed.emit()

    # ---- work on the store ---------------------------------------------------------------
    def submit(self, fn: Callable, *args, lane: Lane | None = None, locked: bool = True, **kw):
        """Run fn(store, *args) on a worker holding the lock; callbacks on the UI thread;
        dropped when the store changed meanwhile. Generators hold the lock per step.
        `locked=False` only for work that maps the files itself (scans): it runs beside
        refreshes, and a runner other than `runner` must be waited for on aboutToClose."""
        store, gen = self.store, self.generation
        if store is None:
            return None
        lock = self.lock if locked else contextlib.nullcontext()

        def job(*a, **k):
            return holding(lock, fn)(store, *a, **k)

        outer = kw.pop("stale", None)
        kw["stale"] = lambda: self.generation != gen or bool(outer and outer())
        if lane is not None:
            return lane.submit(job, *args, **kw)
        return self.runner.submit(job, *args, **kw)

    def call(self, fn: Callable, *args, **kw):
        """Run fn(store, ...) on the calling thread under the lock (quick reads only)."""
        if self.store is None:
            return None
        with self.lock:
            return fn(self.store, *args, **kw)

    # ---- live data ---------------------------------------------------------------------------
    @property
    def can_refresh(self) -> bool:
        return self.store is not None and hasattr(self.store, "refresh")

    def refresh(self) -> bool:
        """Ask the engine to re-read the end of a store another process writes (async).
        Returns False when the engine cannot (no refresh()) or a refresh is running."""
        if not self.can_refresh or (self._refresh_task is not None and not self._refresh_task.done):
            return False

        def done(changed):
            self.refreshed.emit(bool(changed))

        def failed(exc):
            self.refreshFailed.emit(exc)

        self._refresh_task = self.submit(lambda store: store.refresh(), on_result=done, on_error=failed)
        return self._refresh_task is not None

    def notify_changed(self) -> None:
        """After this process wrote to the store (send dialog): views re-read their bounds."""
        self.refreshed.emit(True)


def _same(a: Path, b: Path) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return str(a) == str(b)
