"""Stores on a Hadoop-compatible filesystem (hdfs://, s3://, gs://, ... as pyarrow.fs opens
them; fsspec's filesystems where fsspec is installed), scanned without a local copy.

A store given as a URI is never mapped or recovered: the driver plans from the listing of
`commitlog/` alone (a file's first offset is its 20-digit name, its size the listing's), one
slice per commitlog file, and reads a broker.conf beside the store for the broker name.
Each reader (a Spark task, or the local engine) then reads its slice's bytes through the
filesystem in windows growing from 1 MiB to WINDOW_BYTES (`read_at`), and decodes them exactly as a mapped file:
a record is taken only when it lies whole in the window; one that runs past the window is
read again at the start of the next one. The readable end of every file is found where the
walk meets a BLANK, zeros or a header check_record refuses (the last file's written data ends
there), as the mapped reader's hop does.

Local stores (a path or a file:// URI) stay mapped, unless RMQSTORE_SCAN_FS_READER=1 asks for
this path for them too (file:// URIs through pyarrow's LocalFileSystem): how the tests run the
remote code for real. Only the commitlog is read remotely: jobs that read the ConsumeQueues or
the index (consistency) refuse a remote store."""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from engine.format.record import BLANK_MAGIC, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, OFF_PHYSICALOFFSET, hop

FORCE_ENV = "RMQSTORE_SCAN_FS_READER"
WINDOW_BYTES = 32 << 20         # the largest read; the first of a slice is FIRST_WINDOW_BYTES,
FIRST_WINDOW_BYTES = 1 << 20    # and each next one twice the last
SYNC_CHAIN = 16                 # records a found start must lead on to, each at its own offset
_TM = struct.Struct(">ii")
_NAME_DIGITS = 20


def forced() -> bool:
    """RMQSTORE_SCAN_FS_READER=1: local stores too are planned from listings and read by ranges."""
    return os.environ.get(FORCE_ENV, "") not in ("", "0")


def is_remote(spec: str) -> bool:
    """A store spec read through a filesystem: any URI but file:, or any store when forced."""
    from engine.scan.jobs import is_uri, local_path_of
    return forced() or (is_uri(spec) and local_path_of(spec) is None)


def store_uri(spec: str) -> str:
    """The URI a remote store spec is opened by (a local path becomes file:///abs/path)."""
    from engine.scan.jobs import local_path_of
    local = local_path_of(spec)
    if local is None:
        return spec.rstrip("/")
    from urllib.parse import quote
    return "file://" + quote(os.path.abspath(local))   # pyarrow parses URIs: a space must be %20


def filesystem(uri: str):
    """(pyarrow FileSystem, path inside it) for `uri`: pyarrow's own (file, hdfs, s3 -- also
    spelt s3a/s3n as Hadoop does --, gs, ...), else fsspec's through pyarrow's FSSpecHandler.
    ValueError when neither can open it."""
    import pyarrow.fs as pafs
    scheme, sep, rest = uri.partition("://")
    if sep and scheme.lower() in ("s3a", "s3n"):   # Hadoop's names for S3: pyarrow's s3://
        uri = "s3://" + rest
    try:
        return pafs.FileSystem.from_uri(uri)
    except Exception as first:   # ArrowInvalid / ArrowNotImplementedError / OSError
        try:
            import fsspec
            fs, path = fsspec.core.url_to_fs(uri)
        except Exception:
            raise ValueError(f"{redacted(uri)}: no filesystem for this URI here ({str(first).splitlines()[0]})") from None
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def redacted(uri: str) -> str:
    """`uri` without the secret of a user:secret@ part (for messages and the `store` column)."""
    scheme, sep, rest = uri.partition("://")
    if not sep:
        return uri
    auth, at, tail = rest.partition("@")
    if not at or "/" in auth:
        return uri
    return f"{scheme}://{auth.partition(':')[0]}:***@{tail}" if ":" in auth else uri


def join(uri: str, *parts: str) -> str:
    """`uri`/parts, its query (s3's endpoint_override=..., region=...) kept at the end."""
    base, sep, query = uri.partition("?")
    return "/".join([base.rstrip("/"), *parts]) + sep + query


# ---- the driver: a store from its listing --------------------------------------------------------
@dataclass
class RemoteFile:
    path: str             # URI of the file
    file_from_offset: int
    file_size: int

    @property
    def wrote_position(self) -> int:
        return self.file_size     # unknown without reading: the walk finds the end


@dataclass
class RemoteCommitLog:
    files: list[RemoteFile] = field(default_factory=list)
    is_dledger: bool = False

    @property
    def min_offset(self) -> int:
        return self.files[0].file_from_offset if self.files else 0


class RemoteStore:
    """What a scan needs of a store it cannot map: its root URI, broker name, configuration and
    commitlog listing. No ConsumeQueues, no index, no recovery."""
    remote = True

    def __init__(self, uri: str, cfg=None, broker: str | None = None):
        from engine.config import StoreConfig
        self.root = uri
        self.display_root = redacted(uri)
        self.cfg = cfg or StoreConfig()
        self.fs, self.path = filesystem(uri)
        self.queues: dict = {}
        self.batch_topics: set = set()
        self.commitlog = RemoteCommitLog(self._list_commitlog())
        self.scan_broker = broker or remote_broker_name(uri, self.fs, self.path)

    def _list_commitlog(self) -> list[RemoteFile]:
        import pyarrow.fs as pafs
        d = join(self.path, "commitlog")
        info = self.fs.get_file_info(d)
        if info.type != pafs.FileType.Directory:
            what = "no such folder" if info.type == pafs.FileType.NotFound else "not a folder"
            raise ValueError(f"{join(self.display_root, 'commitlog')}: {what} (a store URI names the store folder; "
                             f"DLedger stores are read from local paths only)")
        files = []
        for f in self.fs.get_file_info(pafs.FileSelector(d)):
            name = f.base_name
            if f.type == pafs.FileType.File and len(name) == _NAME_DIGITS and name.isdigit() and f.size:
                files.append(RemoteFile(join(self.root, "commitlog", name), int(name), int(f.size)))
        files.sort(key=lambda f: f.file_from_offset)
        return files

    @property
    def min_offset(self) -> int:
        return self.commitlog.min_offset

    @property
    def max_offset(self) -> int:
        f = self.commitlog.files
        return f[-1].file_from_offset + f[-1].file_size if f else 0

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _is_dir(fs, path: str) -> bool:
    import pyarrow.fs as pafs
    return fs.get_file_info(path).type == pafs.FileType.Directory


def _subdirs(fs, path: str) -> list[str]:
    import pyarrow.fs as pafs
    return sorted(f.base_name for f in fs.get_file_info(pafs.FileSelector(path))
                  if f.type == pafs.FileType.Directory and not f.base_name.startswith("."))


def remote_stores(uri: str) -> list[tuple[str, str]]:
    """(store URI, broker name) of a store URI, or of a cluster layout under it
    (<root>/<brokerName>/store, <root>/<brokerName>/<store>...): from listings only."""
    fs, path = filesystem(uri)
    if not _is_dir(fs, path) or _is_dir(fs, join(path, "commitlog")):
        return [(uri, remote_broker_name(uri, fs, path))]   # a store (or nothing: opening says why)
    out = []
    for b in _subdirs(fs, path):
        if _is_dir(fs, join(path, b, "commitlog")):
            out.append((join(uri, b), remote_broker_name(join(uri, b), fs, join(path, b))))
            continue
        for s in _subdirs(fs, join(path, b)):
            if _is_dir(fs, join(path, b, s, "commitlog")):
                name = remote_broker_name(join(uri, b, s), fs, join(path, b, s), default=b)
                out.append((join(uri, b, s), name))
    return out or [(uri, remote_broker_name(uri, fs, path))]


def remote_broker_name(uri: str, fs=None, path: str | None = None, default: str | None = None) -> str:
    """brokerName of a broker.conf beside the store (read whole: a few hundred bytes), else
    `default` (a layout's broker folder), else the folder's name (the parent's when the folder
    is called `store`)."""
    if fs is None:
        fs, path = filesystem(uri)
    for rel in ("broker.conf", "config/broker.conf", "../broker.conf", "../conf/broker.conf"):
        p = os.path.normpath(join(path, rel))
        try:
            with fs.open_input_file(p) as fh:
                if fh.size() > 1 << 20:
                    continue
                name = _properties(fh.read().decode("utf-8", "replace")).get("brokerName", "").strip()
        except Exception:   # absent or unreadable: the folder names the broker
            continue
        if name:
            return name
    if default:
        return default
    parts = [p for p in path.rstrip("/").split("/") if p]
    if len(parts) >= 2 and parts[-1] == "store":
        return parts[-2]
    return parts[-1] if parts else uri


def _properties(text: str) -> dict[str, str]:
    """key=value (or key:value) lines of a broker.conf; comments and odd lines ignored."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and line[0] not in "#!":
            seps = [i for i in (line.find("="), line.find(":")) if i >= 0]
            if seps:
                out[line[:min(seps)].strip()] = line[min(seps) + 1:].strip()
    return out


def open_scan_store(spec: str, cfg=None):
    """A store for a scan: mapped and recovered (MessageStore, read-only) when local, else a
    RemoteStore planned from its listing."""
    if is_remote(spec):
        return RemoteStore(store_uri(spec), cfg)
    from engine.store.message_store import MessageStore
    return MessageStore.open(spec, config=cfg, read_only=True)


def refuse_remote(stores, job: str) -> None:
    """A job that reads ConsumeQueues or index files needs mapped stores: one line saying so."""
    if any(getattr(getattr(m, "store", m), "remote", False) for m in stores):
        raise ValueError(f"{job} reads the ConsumeQueues and the index, which are read from local stores only "
                         f"(a path or a file:// URI on every node); commitlog jobs read stores on any filesystem")


# ---- the readers: byte ranges in windows ---------------------------------------------------------
_FILES: dict[str, tuple] = {}
_FOLDERS: dict[str, tuple] = {}


def _file_path(uri: str):
    """(filesystem, path) of a file URI; one filesystem per folder (an S3 client costs)."""
    base, sep, query = uri.partition("?")
    folder, _, name = base.rpartition("/")
    key = folder + sep + query
    hit = _FOLDERS.get(key)
    if hit is None:
        if len(_FOLDERS) > 64:
            _FOLDERS.clear()
        hit = _FOLDERS[key] = filesystem(key)
    return hit[0], hit[1].rstrip("/") + "/" + name


def _open(uri: str):
    """(input file, size) of `uri`, cached per process (a Spark worker reads many slices)."""
    hit = _FILES.get(uri)
    if hit is None:
        fs, path = _file_path(uri)
        fh = fs.open_input_file(path)
        hit = _FILES[uri] = (fh, fh.size())
        if len(_FILES) > 64:
            old = next(iter(_FILES))
            _FILES.pop(old)[0].close()
    return hit


def read_range(uri: str, pos: int, n: int) -> np.ndarray:
    """Bytes [pos, pos + n) of `uri` (fewer at the end of the file) as a uint8 array."""
    fh, size = _open(uri)
    n = max(0, min(n, size - pos))
    return np.frombuffer(fh.read_at(n, pos), dtype=np.uint8) if n else np.empty(0, np.uint8)


def _cut_by_window(buf: np.ndarray, p: int, abs_p: int, limit: int, uri: str) -> int:
    """When the walk stopped at window position `p` only because the window ends there, the
    bytes the next window needs (>= 8); else 0 (a real stop: BLANK, zeros, bad header)."""
    head = bytes(buf[p:p + 8]) if len(buf) - p >= 8 else bytes(read_range(uri, abs_p, 8))
    if len(head) < 8:
        return 0
    total, magic = _TM.unpack(head)
    if magic == BLANK_MAGIC or magic not in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) or total <= 0:
        return 0
    if total <= len(buf) - p or total > limit - abs_p:
        return 0     # the record fitted (so it was refused for itself), or runs past the file
    return total


def _be(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian signed integers of `width` bytes at positions `at` of `buf` (vectorised)."""
    v = np.zeros(len(at), dtype=np.uint64)
    for k in range(width):
        v = (v << np.uint64(8)) | buf[at + k].astype(np.uint64)
    return v.view(np.int64) if width == 8 else (v.astype(np.int64) ^ (1 << 31)) - (1 << 31)


def record_starts_in(buf: np.ndarray, base: int, file_from: int, limit: int) -> np.ndarray:
    """Positions (in the file) of `buf` (the file's bytes from `base`) where a record header
    stands: V1/V2 magic, 0 < TOTALSIZE <= what is left of the file, and a stored PHYSICALOFFSET
    equal to that very commitlog offset (RocketMQ writes each record's own offset there)."""
    n = len(buf) - (OFF_PHYSICALOFFSET + 8)
    if n <= 0:
        return np.empty(0, np.int64)
    b1 = buf[4:n + 4]
    at = np.flatnonzero((b1 == 0xDA) & (buf[5:n + 5] == 0xA3) & (buf[6:n + 6] == 0x20)
                        & ((buf[7:n + 7] == 0xA7) | (buf[7:n + 7] == 0xAB)))
    if not len(at):
        return np.empty(0, np.int64)
    pos = at.astype(np.int64) + base
    ok = _be(buf, at + OFF_PHYSICALOFFSET, 8) == file_from + pos
    total = _be(buf, at, 4)
    ok &= (total > 0) & (total <= limit - pos)
    return pos[ok]


def sync_start(s, window: int = FIRST_WINDOW_BYTES) -> int | None:
    """The first record start >= s.start and < s.end of a slice cut at a byte position (`sync`):
    a header at its own offset (record_starts_in) that leads, by TOTALSIZE, to SYNC_CHAIN more
    such headers (or to the end of the data: BLANK, zeros, the file's end). No walk from the
    file's start, so the pieces of a file are read in parallel; the piece before stops at the
    same record (its walk takes every record starting before its end). None: no record starts
    in the slice (the file's data ended before it)."""
    pos = s.start
    while pos < s.end:
        n = min(window, s.limit - pos)
        buf = read_range(s.path, pos, n)
        if len(buf) < OFF_PHYSICALOFFSET + 8:
            return None
        ends_here = pos + len(buf) >= s.limit
        for c in record_starts_in(buf, pos, s.file_from_offset, s.limit).tolist():
            if c >= s.end:
                return None
            if _chain_holds(s, buf, pos, c):
                return c
        if ends_here:
            return None
        pos += len(buf) - (OFF_PHYSICALOFFSET + 8)   # a header cut by the window is seen again
    return None


def _chain_holds(s, buf: np.ndarray, base: int, c: int) -> bool:
    """Do SYNC_CHAIN records follow the header at `c`, each at its own offset, up to the data's end?"""
    n = OFF_PHYSICALOFFSET + 8

    def head(p: int) -> bytes:
        k = p - base
        return bytes(buf[k:k + n]) if k + n <= len(buf) else bytes(read_range(s.path, p, n))

    p = c
    for _ in range(SYNC_CHAIN):
        p += _TM.unpack(head(p)[:8])[0]     # a header already checked: TOTALSIZE fits the file
        if s.limit - p < 8:
            return True                      # the file's data ends here
        h = head(p)
        total, magic = _TM.unpack(h[:8])
        if magic == BLANK_MAGIC or (total == 0 and magic == 0):
            return True
        if (magic not in (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2) or len(h) < n or total <= 0 or total > s.limit - p
                or struct.unpack_from(">q", h, OFF_PHYSICALOFFSET)[0] != s.file_from_offset + p):
            return False
    return True


def read_commitlog_ranges(s, delay_level_millis: list[int], stats=None, max_records: int = 1 << 16,
                          max_bytes: int = 32 << 20, window: int = WINDOW_BYTES) -> Iterator:
    """reader.read_commitlog for a slice whose path is a URI: the same blocks, from ranged reads.
    A slice cut at a byte position (`sync`) starts at the first record found there (sync_start)."""
    from engine.scan.columns import RecordBlock
    start = s.start
    if getattr(s, "sync", False) and s.start > 0:
        start = sync_start(s, min(window, FIRST_WINDOW_BYTES))
        if start is None:
            return
    pos, w, buf = start, start, np.empty(0, np.uint8)
    size = min(window, FIRST_WINDOW_BYTES)   # windows grow: a file's data may end early (the last one)
    while pos < s.end:
        if pos < w or pos + 8 > w + len(buf):
            w, buf = pos, read_range(s.path, pos, min(size, s.limit - pos))
            size = min(window, size * 2)
        h = hop(buf, pos - w, s.end - w, len(buf), max_records, max_bytes)
        block, skipped, invalid_at = RecordBlock.decode(buf, s.file_from_offset + w, h.starts, delay_level_millis)
        nxt = w + h.next_pos
        need = (_cut_by_window(buf, h.next_pos, nxt, s.limit, s.path)
                if h.stop == "invalid" and invalid_at is None and w + len(buf) < s.limit else 0)
        if stats is not None:
            stats.records += len(block)
            stats.size_mismatch += skipped
            if invalid_at is not None:
                stats.stops.append((s.file_from_offset + w + int(h.starts[invalid_at]), "invalid topic length"))
            elif h.stop == "invalid" and not need:
                stats.stops.append((s.file_from_offset + nxt, "invalid record header"))
        if len(block):
            yield block
        if need:   # the record runs past this window: read the next one from its start
            w, buf = nxt, read_range(s.path, nxt, min(max(size, need), s.limit - nxt))
            size = min(window, size * 2)
            pos = nxt
            continue
        if invalid_at is not None or h.stop:
            return
        pos = nxt
