"""Files on a filesystem (a URI: hdfs://, s3://, gs://, file://, fsspec's), read by byte ranges
(`read_at`) in whichever process reads a slice: the filesystem of a URI, ranged reads, and the
commitlog reader over windows (engine.scan.remote plans the slices).

A commitlog slice is read in windows growing from 1 MiB to WINDOW_BYTES and decoded exactly as a
mapped file: a record is taken only when it lies whole in the window; one that runs past the
window is read again at the start of the next one. The readable end of a file is where the walk
meets a BLANK, zeros or a header check_record refuses. A slice cut at a byte position (`sync`:
a large file split without reading it) starts at the first record found at or after its start
by a header probe (sync_start), so the pieces of a file are read in parallel."""
from __future__ import annotations

import struct
from typing import Iterator

import numpy as np

from engine.format.dledger_layout import BLANK_MAGIC as ENTRY_BLANK
from engine.format.dledger_layout import ENTRY_BODY_OFFSET, ENTRY_MAGIC, ENTRY_POS_OFFSET, hop_entries
from engine.format.record import BLANK_MAGIC, MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2, OFF_PHYSICALOFFSET, hop

WINDOW_BYTES = 32 << 20         # the largest read; the first of a slice is FIRST_WINDOW_BYTES,
FIRST_WINDOW_BYTES = 1 << 20    # and each next one twice the last
_HEAD = OFF_PHYSICALOFFSET + 8  # bytes a header check reads (records: 36; DLedger entries: 32)
SYNC_CHAIN = 16                 # records a found start must lead on to, each at its own offset
_TM = struct.Struct(">ii")


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


FETCHED = [0]   # bytes read_range fetched in this process (a task's ReadStats takes the difference)


def read_range(uri: str, pos: int, n: int) -> np.ndarray:
    """Bytes [pos, pos + n) of `uri` (fewer at the end of the file) as a uint8 array."""
    fh, size = _open(uri)
    n = max(0, min(n, size - pos))
    FETCHED[0] += n
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


def _entry_cut_by_window(buf: np.ndarray, p: int, abs_p: int, limit: int, uri: str) -> int:
    """_cut_by_window for DLedger entries (magic, size first): the bytes the next window needs
    when the entry at `p` runs past this one (or its header is cut), else 0."""
    head = bytes(buf[p:p + 8]) if len(buf) - p >= 8 else bytes(read_range(uri, abs_p, 8))
    if len(head) < 8:
        return 0
    magic, size = _TM.unpack(head)
    if magic != ENTRY_MAGIC or size <= ENTRY_BODY_OFFSET or size > limit - abs_p or size <= len(buf) - p:
        return 0
    return size


def be_int(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian signed integers of `width` bytes at positions `at` of `buf` (vectorised)."""
    v = np.zeros(len(at), dtype=np.uint64)
    for k in range(width):
        v = (v << np.uint64(8)) | buf[at + k].astype(np.uint64)
    return v.view(np.int64) if width == 8 else (v.astype(np.int64) ^ (1 << 31)) - (1 << 31)


def record_starts_in(buf: np.ndarray, base: int, file_from: int, limit: int) -> np.ndarray:
    """Positions (in the file) of `buf` (the file's bytes from `base`) where a record header
    stands: V1/V2 magic, 0 < TOTALSIZE <= what is left of the file, and a stored PHYSICALOFFSET
    equal to that very commitlog offset (RocketMQ writes each record's own offset there)."""
    n = len(buf) - _HEAD
    if n <= 0:
        return np.empty(0, np.int64)
    b1 = buf[4:n + 4]
    at = np.flatnonzero((b1 == 0xDA) & (buf[5:n + 5] == 0xA3) & (buf[6:n + 6] == 0x20)
                        & ((buf[7:n + 7] == 0xA7) | (buf[7:n + 7] == 0xAB)))
    if not len(at):
        return np.empty(0, np.int64)
    pos = at.astype(np.int64) + base
    ok = be_int(buf, at + OFF_PHYSICALOFFSET, 8) == file_from + pos
    total = be_int(buf, at, 4)
    ok &= (total > 0) & (total <= limit - pos)
    return pos[ok]


def entry_starts_in(buf: np.ndarray, base: int, file_from: int, limit: int) -> np.ndarray:
    """record_starts_in for a DLedger data file: where an entry header stands (magic 1,
    48 < size <= what is left of the file, its stored pos equal to its own offset)."""
    n = len(buf) - _HEAD
    if n <= 0:
        return np.empty(0, np.int64)
    at = np.flatnonzero((buf[:n] == 0) & (buf[1:n + 1] == 0) & (buf[2:n + 2] == 0) & (buf[3:n + 3] == ENTRY_MAGIC))
    if not len(at):
        return np.empty(0, np.int64)
    pos = at.astype(np.int64) + base
    ok = be_int(buf, at + ENTRY_POS_OFFSET, 8) == file_from + pos
    size = be_int(buf, at + 4, 4)
    ok &= (size > ENTRY_BODY_OFFSET) & (size <= limit - pos)
    return pos[ok]


def sync_start(s, window: int = FIRST_WINDOW_BYTES) -> int | None:
    """The first record (DLedger: entry) start >= s.start and < s.end of a slice cut at a byte
    position (`sync`): a header at its own offset (record_starts_in / entry_starts_in) that
    leads, by its size, to SYNC_CHAIN more such headers (or to the end of the data: BLANK,
    zeros, the file's end). No walk from the file's start, so the pieces of a file are read in
    parallel; the piece before stops at the same record (its walk takes every record starting
    before its end). None: no record starts in the slice (the file's data ended before it)."""
    find = entry_starts_in if s.entry_header else record_starts_in
    pos, window = s.start, max(window, 4096)
    while pos < s.end:
        n = min(window, s.limit - pos)
        buf = read_range(s.path, pos, n)
        if len(buf) < _HEAD:
            return None
        ends_here = pos + len(buf) >= s.limit
        for c in find(buf, pos, s.file_from_offset, s.limit).tolist():
            if c >= s.end:
                return None
            if _chain_holds(s, buf, pos, c):
                return c
        if ends_here:
            return None
        pos += len(buf) - _HEAD   # a header cut by the window is seen again
    return None


def _chain_holds(s, buf: np.ndarray, base: int, c: int) -> bool:
    """Do SYNC_CHAIN records (entries) follow the one at `c`, each at its own offset, up to the data's end?"""
    def head(p: int) -> bytes:
        k = p - base
        return bytes(buf[k:k + _HEAD]) if k + _HEAD <= len(buf) else bytes(read_range(s.path, p, _HEAD))

    def parse(h: bytes) -> tuple[int, int, int | None]:   # (size, magic, stored own offset)
        if s.entry_header:
            magic, size = _TM.unpack(h[:8])
            own = struct.unpack_from(">q", h, ENTRY_POS_OFFSET)[0] if len(h) >= ENTRY_POS_OFFSET + 8 else None
            return size, magic, own
        size, magic = _TM.unpack(h[:8])
        return size, magic, struct.unpack_from(">q", h, OFF_PHYSICALOFFSET)[0] if len(h) >= _HEAD else None

    good = (ENTRY_MAGIC,) if s.entry_header else (MESSAGE_MAGIC_V1, MESSAGE_MAGIC_V2)
    blank = ENTRY_BLANK if s.entry_header else BLANK_MAGIC
    smallest = ENTRY_BODY_OFFSET + 1 if s.entry_header else 1
    p = c
    for _ in range(SYNC_CHAIN):
        p += parse(head(p))[0]               # a header already checked: its size fits the file
        if s.limit - p < 8:
            return True                      # the file's data ends here
        size, magic, own = parse(head(p))
        if magic == blank or (size == 0 and magic == 0):
            return True
        if magic not in good or own is None or size < smallest or size > s.limit - p or own != s.file_from_offset + p:
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
        if s.entry_header:   # DLedger: the records are the bodies of the entries
            h = hop_entries(buf, pos - w, s.end - w, len(buf), s.file_from_offset + w, max_records, max_bytes)
        else:
            h = hop(buf, pos - w, s.end - w, len(buf), max_records, max_bytes)
        block, skipped, invalid_at = RecordBlock.decode(buf, s.file_from_offset + w, h.starts, delay_level_millis)
        nxt = w + h.next_pos
        cut = _entry_cut_by_window if s.entry_header else _cut_by_window
        need = (cut(buf, h.next_pos, nxt, s.limit, s.path)
                if h.stop in ("invalid", "blank" if s.entry_header else "invalid") and invalid_at is None
                and w + len(buf) < s.limit else 0)
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
