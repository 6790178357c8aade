"""What the files say before a store is opened: the sizes the caller did not set (detected
from the data files and the index files), and the refusals that protect the files (paths
outside the store, links or special files where a writer would write)."""
from __future__ import annotations

import os
import stat
from pathlib import Path

from engine.config import INT32_MAX, StoreConfig
from engine.errors import ConfigError, StoreError
from engine.format import compaction_layout as _compaction
from engine.store import index_geometry


def detect_config(root: Path, cfg: StoreConfig, read_only: bool = True,
                  data_dirs: list[Path] | None = None) -> StoreConfig:
    """Fill in file sizes the caller did not set, from the files, when they agree. data_dirs:
    where the commitlog's data files are when not in commitlog/ (DLedger's data folder)."""
    values = {}
    if "mappedFileSizeCommitLog" not in cfg.explicit:
        dirs = data_dirs or cfg.commitlog_dirs
        sizes = _sizes(dirs)
        if len(sizes) > 1 and not cfg.tolerant:
            raise _mixed_sizes("DLedger data" if data_dirs else "commitlog", dirs, sizes, "mappedFileSizeCommitLog")
        if sizes:
            values["mappedFileSizeCommitLog"] = _mappable(_majority(sizes), dirs[0])
    if "mappedFileSizeConsumeQueue" not in cfg.explicit:
        cq_root = root / "consumequeue"
        dirs = [q for t in _subdirs(cq_root) for q in _subdirs(t)]
        sizes = _sizes(dirs)
        if len(sizes) > 1 and not cfg.tolerant:
            raise _mixed_sizes("consume queue", dirs, sizes, "mappedFileSizeConsumeQueue")
        if sizes:
            values["mappedFileSizeConsumeQueue"] = _mappable(_majority(sizes), cq_root)
    notes: list[str] = []
    if not {"maxHashSlotNum", "maxIndexNum"} & cfg.explicit:
        values.update(_index_geometry(root / "index", cfg, read_only, notes))
    if values:
        explicit = cfg.explicit
        cfg = cfg.with_values(**values)
        cfg.explicit = set(explicit)  # detected, not chosen
        cfg.detected = set(values)
    cfg.notes = list(cfg.notes) + notes
    return cfg


def _index_geometry(index_dir: Path, cfg: StoreConfig, read_only: bool, notes: list[str]) -> dict:
    """maxHashSlotNum and maxIndexNum as the index files' entries decide them (index_geometry).
    Files with no entries cannot decide: a reader loses nothing by any fitting pair; a writer
    would write entries where RocketMQ would not look, so it is refused with the candidates."""
    verdict = index_geometry.read_store(index_dir)
    g = verdict.geometry
    if g is not None:
        return {"maxHashSlotNum": g.slots, "maxIndexNum": g.entries}
    size = verdict.size
    if size is None or size == cfg.index_file_size:
        return {}
    fits = index_geometry.candidates(size, limit=4)
    problems = "; ".join(f"{Path(f.path).name}: {f.problem}" for f in verdict.files if f.problem)
    if not fits:
        raise ConfigError(f"index file size {size} fits no index geometry (40 + 4 x maxHashSlotNum + "
                          f"20 x maxIndexNum); set maxHashSlotNum and maxIndexNum", path=str(index_dir))
    listed = ", ".join(f"maxHashSlotNum={c.slots} maxIndexNum={c.entries}" for c in fits)
    why = (f"no index file of {size} bytes decides its geometry ({problems})" if problems else
           f"the index files ({size} bytes) hold no entries, so their geometry cannot be decided")
    count = index_geometry.count_candidates(size)
    if not read_only:
        raise ConfigError(f"{why}: {count} pairs fit, e.g. {listed}; set maxHashSlotNum and maxIndexNum",
                          path=str(index_dir))
    notes.append(f"{why}; reading them as maxHashSlotNum={fits[0].slots} maxIndexNum={fits[0].entries} "
                 f"({count} pairs fit)")
    return {"maxHashSlotNum": fits[0].slots, "maxIndexNum": fits[0].entries}


def _mappable(size: int, where: Path) -> int:
    """A data file RocketMQ could have written: Java maps files of at most 2 GiB - 1."""
    if size > INT32_MAX:
        raise ConfigError(f"a data file of {size} bytes: more than RocketMQ maps (2 GiB - 1); not a store file",
                          path=str(where))
    return size


def refuse_escaping_paths(root: Path, cfg: StoreConfig) -> None:
    """storePathRootDir and storePathCommitLog may only name the store folder and folders inside
    it: a setting must never make a command read or write files elsewhere."""
    real = os.path.realpath(root)
    if cfg.storePathRootDir and os.path.realpath(cfg.storePathRootDir) != real:
        raise ConfigError(f"storePathRootDir={cfg.storePathRootDir} is not the store folder; files outside the "
                          "store are never used", path=str(root))
    for d in filter(None, cfg.storePathCommitLog.split(",")):
        p = os.path.realpath(d)
        if os.path.commonpath([p, real]) != real:
            raise ConfigError(f"storePathCommitLog={d} is outside the store; files outside the store are never used",
                              path=str(root))


def refuse_foreign_files(root: Path, cfg: StoreConfig) -> None:
    """Before anything is written: every file a writer may touch must be a regular file. A
    symbolic link (a store unpacked from elsewhere) would make recovery or a put write wherever
    it points; a FIFO would block. Links to directories are trusted (a commitlog on another disk)."""
    dirs = [root / "config", root / "index", *cfg.commitlog_dirs]
    dirs += [q for t in _subdirs(root / "consumequeue") for q in _subdirs(t)]
    entries = [root / "lock", root / "abort", root / "checkpoint"]
    for d in dirs:
        try:
            entries.extend(d / n for n in os.listdir(d))
        except OSError:
            continue
    for p in entries:
        try:
            st = os.lstat(p)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) and p.is_dir():
            continue
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            raise StoreError("refusing to write: a symbolic link or special file among the store's files", path=str(p))


def refuse_crashed_compaction(root: Path) -> None:
    """Before anything is written: a crashed store (its abort file left) with compaction logs.
    The broker's abnormal recovery also copies the keyed messages past its checkpoint into the
    compaction logs (CompactionStore.doDispatch); rmqstore's recovery does not, and once it has
    run the broker starts normally and never will. The broker recovers such a store."""
    logs = root / _compaction.COMPACTION_DIR / _compaction.LOG_DIR
    if (root / "abort").exists() and _subdirs(logs):
        raise StoreError("refusing to recover: the store crashed (abort file left) and has compacted topics; the "
                         "broker's restart also copies the messages past its checkpoint into their compaction logs, "
                         "which rmqstore's recovery does not do and after which the broker would not. Start the broker "
                         "to recover it; rmqstore reads it read-only meanwhile", path=str(root / "abort"))


def _subdirs(p: Path) -> list[Path]:
    try:
        return [e for e in p.iterdir() if e.is_dir()]
    except OSError:
        return []


def _mixed_sizes(kind: str, dirs, sizes: dict[int, int], setting: str) -> ConfigError:
    """Data files of one kind with more than one size, the error naming the odd file(s): its
    path, its size and the size the others have. RocketMQ's MappedFileQueue.load refuses the
    same store ("length not matched message store config value"), so no broker serves it."""
    ranked = sorted(sizes, key=lambda s: (-sizes[s], -s))
    expected = ranked[0]
    tie = sizes[ranked[1]] == sizes[expected]
    files = sorted(_files_with_sizes(dirs))
    if tie:  # no size to expect: the first file of each size
        odd = [next(f for f in files if f[1] == n) for n in sorted(sizes)]
    else:
        odd = [f for f in files if f[1] != expected]
    first, size = odd[0]
    others = "" if len(odd) == 1 else f"; {len(odd) - 1} more: " + ", ".join(
        f"{p.name} ({n} bytes)" for p, n in odd[1:4]) + (", ..." if len(odd) > 4 else "")
    why = f"{kind} files have different sizes {sorted(sizes)}: " + (
        f"no size is the majority; {first.name} is {size} bytes" if tie else
        f"{first.name} is {size} bytes, expected {expected} (the size of the other {sizes[expected]})")
    return ConfigError(f"{why}{others}; RocketMQ does not load such a store either; set {setting} if "
                       f"another size is right, or run `rmqstore check` to read the rest", path=str(first))


def _files_with_sizes(dirs):
    """(path, size) of every non-empty data file in the folders."""
    for d in dirs:
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            try:
                if e.name.isdigit() and e.is_file() and e.stat().st_size:
                    yield Path(e.path), e.stat().st_size
            except OSError:
                continue


def _majority(sizes: dict[int, int]) -> int:
    return max(sizes, key=lambda s: (sizes[s], s))


def _sizes(dirs) -> dict[int, int]:
    """{file size: how many data files have it} over the folders."""
    sizes: dict[int, int] = {}
    for d in dirs:
        try:
            for e in os.scandir(d):
                if e.name.isdigit() and e.is_file():
                    s = e.stat().st_size
                    if s:
                        sizes[s] = sizes.get(s, 0) + 1
        except OSError:
            continue
    return sizes
