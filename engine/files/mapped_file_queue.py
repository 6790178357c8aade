"""An ordered run of MappedFiles of one size forming one virtual address space
(MappedFileQueue): commitlog files by physical offset, CQ files by byte position."""
from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path

from engine.errors import ConfigError, StoreError
from engine.accel import load as _load_accel, state_property
from engine.files.mapped_file import DEFAULT_RESERVE_STEP, MappedFile, offset_to_name


class PyFilesState:
    """FilesState's pure twin (engine/accel/_state.pyx): a MappedFileQueue's files and size."""
    __slots__ = ("files", "file_size")


_STATE = _load_accel("_state")
FilesState = PyFilesState if _STATE is None else _STATE.FilesState   # C fields for the compiled reads


class MappedFileQueue:
    """`files` and `file_size` live in `state` (a FilesState), which the compiled reads take."""
    __slots__ = ("state", "__dict__")
    files = state_property("files", "the MappedFiles, by offset")
    file_size = state_property("file_size")

    def __init__(self, dirs: Path | list[Path], file_size: int, writable: bool = False,
                 reserve_step: int = DEFAULT_RESERVE_STEP, populate: bool = False):
        self.state = FilesState()
        self.dirs = [Path(d) for d in (dirs if isinstance(dirs, list) else [dirs])]
        self.file_size = file_size
        self.reserve_step = reserve_step  # blocks reserved ahead of the appends (MappedFile.ensure_room)
        self.populate = populate          # and their pages faulted in (the commitlog's appends)
        self.writable = writable
        self.files: list[MappedFile] = []
        self.skipped: list[str] = []     # names that are not data files
        self.gaps: list[tuple[int, int]] = []  # (expected start, found start)
        self.refused: list[str] = []     # tolerant loads: files that do not fit, and why

    def load(self, tolerant: bool = False) -> "MappedFileQueue":
        """tolerant (check): a file of the wrong size or name is listed in `refused` and passed
        over instead of refusing the whole store."""
        entries = []
        for d in self.dirs:
            try:
                names = os.listdir(d)
            except FileNotFoundError:
                continue
            except OSError as e:
                raise StoreError(f"cannot list directory: {e.strerror}", path=str(d)) from None
            for name in names:
                p = d / name
                if not name.isdigit() or not p.is_file():
                    self.skipped.append(str(p))
                    continue
                entries.append((int(name), p))
        entries.sort()
        for i, (start, p) in enumerate(entries):
            size = p.stat().st_size
            if size == 0 and i == len(entries) - 1:
                # a zero-length last file: a creation cut short by a crash. Tolerated; a writer
                # deletes it (as 5.1.4+ does), or creating that file again would fail
                if self.writable:
                    p.unlink(missing_ok=True)
                self.skipped.append(str(p))
                continue
            try:
                if start % self.file_size:
                    raise ConfigError(f"file name is not a multiple of the configured file size {self.file_size}",
                                      path=str(p))
                self.files.append(MappedFile(p, self.file_size, writable=self.writable,
                                             reserve_step=self.reserve_step, populate=self.populate))
            except ConfigError as e:
                if not tolerant:
                    raise
                self.refused.append(str(e))
        for a, b in zip(self.files, self.files[1:]):
            if b.file_from_offset != a.end_offset:
                self.gaps.append((a.end_offset, b.file_from_offset))
        for f in self.files:  # provisionally full; recovery sets the last ones
            f.wrote_position = f.flushed_position = self.file_size
        return self

    def load_new(self) -> list[MappedFile]:
        """Map files another process created after ours (live stores, read-only)."""
        known = {f.file_from_offset for f in self.files}
        last = self.files[-1].file_from_offset if self.files else -1
        added = []
        for d in self.dirs:
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for name in sorted(names):
                if not name.isdigit() or int(name) in known or int(name) < last:
                    continue
                p = d / name
                try:
                    if p.stat().st_size != self.file_size:
                        continue  # still being created
                    f = MappedFile(p, self.file_size, writable=self.writable)
                except (OSError, StoreError):
                    continue
                f.wrote_position = f.flushed_position = 0
                added.append(f)
        self.files.extend(sorted(added, key=lambda f: f.file_from_offset))
        return added

    # ---- lookups -------------------------------------------------------------------
    # (the lookups read the state once: each property read of it is an attrgetter call)
    @property
    def first(self) -> MappedFile | None:
        files = self.state.files
        return files[0] if files else None

    @property
    def last(self) -> MappedFile | None:
        files = self.state.files
        return files[-1] if files else None

    def unsynced(self) -> list:
        """(file, written end) of the files with bytes not yet synced, oldest first: the last
        file, and those before it that rolled since the last flush (files are synced in order,
        so the walk stops at the first older file that is synced)."""
        files = self.state.files
        out = [(f, f.wrote_position) for f in files[-1:]]
        for f in reversed(files[:-1]):
            if f.flushed_position >= f.wrote_position:
                break
            out.append((f, f.wrote_position))
        return out[::-1]

    def sync_written(self) -> None:
        """Sync every file's written bytes (unsynced()), oldest first."""
        for f, end in self.unsynced():
            f.flush(end)

    @property
    def min_offset(self) -> int:
        files = self.state.files
        return files[0].state.file_from_offset if files else 0

    @property
    def max_offset(self) -> int:
        """End of written data: the last file holding any, at its write position."""
        files = self.state.files
        for f in reversed(files):
            st = f.state
            if st.wrote_position > 0:
                return st.file_from_offset + st.wrote_position
        return files[0].state.file_from_offset if files else 0

    def find(self, offset: int) -> MappedFile | None:
        files = self.state.files
        if not files:
            return None
        i = bisect_right(self._starts(files), offset) - 1
        if i < 0:
            return None
        f = files[i]
        return f if offset < f.state.file_from_offset + f.file_size else None

    def index_of(self, f: MappedFile) -> int:
        return self.files.index(f)

    def _starts(self, files: list | None = None) -> list[int]:
        if files is None:
            files = self.state.files
        key = (len(files), files[0].state.file_from_offset if files else 0)
        if getattr(self, "_starts_key", None) != key:
            self._starts_cache = [f.file_from_offset for f in files]
            self._starts_key = key
        return self._starts_cache

    # ---- writing -------------------------------------------------------------------
    def create_next(self, start: int | None = None) -> MappedFile:
        if start is None:
            start = self.last.end_offset if self.last else 0
        d = self.dirs[0]
        d.mkdir(parents=True, exist_ok=True)
        f = MappedFile(d / offset_to_name(start), self.file_size, writable=True, create=True,
                       reserve_step=self.reserve_step, populate=self.populate)
        self.files.append(f)
        return f

    def truncate_to(self, offset: int, zero: bool = True) -> list[str]:
        """Drop everything at and after `offset` (MappedFileQueue.truncateDirtyFiles): files
        starting after it are deleted, the file holding it gets its write position there.
        Returns the deleted file names."""
        deleted = []
        for f in list(self.files):
            if f.end_offset <= offset:
                continue
            if f.file_from_offset > offset:
                deleted.append(f.path.name)
                f.destroy()
                self.files.remove(f)
                continue
            pos = offset - f.file_from_offset
            f.wrote_position = f.flushed_position = pos
            if zero and self.writable:
                f.zero_tail(pos)
        return deleted

    def close(self) -> None:
        for f in self.files:
            f.close()
