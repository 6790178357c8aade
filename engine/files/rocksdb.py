"""A RocksDB database read without touching it (the RocksDB ConsumeQueue folder).

RocksDB, and the `rocksdict` binding, write even when opened read-only: rocksdict leaves a
`rocksdict-config.json` in the database folder and RocksDB an info LOG. So the database is
never opened in place: a private temporary folder gets a symbolic link to each of its files
(not LOCK: a read-only open takes no lock) and RocksDB opens that folder read-only, with its
info log pointed there too. Nothing is created, written or locked in the store; a broker
holding the database is not disturbed (its files are only read). The options are our own
(raw bytes, the bytewise comparator), so the broker's OPTIONS file, which names RocketMQ's
compaction filter, is never loaded."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from engine.errors import StoreError

# never linked: a read-only open takes no lock; rocksdict (re)writes its own config file, which
# must land in the private folder, not through a link into the store
SKIP = {"LOCK", "rocksdict-config.json"}
OPEN_ATTEMPTS = 3
PREFIX = "rmqstore-rocksdb-"  # + pid: the private folder of links
INFO_LOGS = ("LOG",)   # RocksDB's own info logs (LOG, LOG.old.*): not needed to read


def binding():
    """The rocksdict module, or a StoreError that says how to get it."""
    try:
        import rocksdict
    except ImportError as e:  # pragma: no cover - a dependency of the package
        raise StoreError("reading consume queues kept in RocksDB needs the 'rocksdict' package "
                         f"(pip install rocksdict): {e}") from None
    return rocksdict


def _sweep_stale() -> None:
    """Private folders a killed process left (named after its pid) go: links only, never data."""
    tmp = Path(tempfile.gettempdir())
    for d in tmp.glob(PREFIX + "*-*"):
        try:
            pid = int(d.name[len(PREFIX):].split("-", 1)[0])
            os.kill(pid, 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, OSError):
            continue


class ReadOnlyRocksDB:
    """Column families by name; `scan(cf, lower, upper)` reads a key range in one pass."""

    def __init__(self, path: Path, column_families: tuple[str, ...]):
        self.path = Path(path)
        self._rd = binding()
        self._db = None
        _sweep_stale()
        for attempt in range(OPEN_ATTEMPTS):
            self._shadow = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
            try:
                self._open(column_families)
                return
            except Exception as e:
                shutil.rmtree(self._shadow, ignore_errors=True)
                if not self.path.is_dir():
                    raise StoreError("the RocksDB folder is gone", path=str(self.path)) from None
                if attempt == OPEN_ATTEMPTS - 1:  # a live broker may replace a file between link and open
                    raise StoreError(f"cannot read the RocksDB database: {e}", path=str(self.path)) from None
            except BaseException:
                shutil.rmtree(self._shadow, ignore_errors=True)
                raise

    def _open(self, column_families) -> None:
        rd = self._rd
        for name in sorted(os.listdir(self.path)):
            if name in SKIP or name.startswith(INFO_LOGS):
                continue
            src = self.path / name
            if src.is_file():
                os.symlink(src.resolve(), self._shadow / name)
        opts = rd.Options(raw_mode=True)
        opts.create_if_missing(False)
        opts.set_db_log_dir(str(self._shadow))
        cfs = {name: rd.Options(raw_mode=True) for name in column_families}
        self._db = rd.Rdict(str(self._shadow), options=opts, column_families=cfs,
                            access_type=rd.AccessType.read_only())
        self._cfs = {name: self._db.get_column_family(name) for name in column_families}

    def get(self, cf: str, key: bytes) -> bytes | None:
        return self._cfs[cf].get(key)

    def scan(self, cf: str, lower: bytes, upper: bytes | None = None, limit: int | None = None,
             reverse: bool = False) -> tuple[list[bytes], list[bytes]]:
        """Keys and values in [lower, upper) in key order (reverse: from the last below
        `upper` down to `lower`), at most `limit` of them."""
        # (rocksdict encodes ReadOptions' bounds in its own non-raw format: the bounds are ours)
        it = self._cfs[cf].iter()
        if reverse:
            if upper is None:
                it.seek_to_last()
            else:
                it.seek_for_prev(upper)
                if it.valid() and it.key() >= upper:
                    it.prev()
        else:
            it.seek(lower)
        keys, values = [], []
        step = it.prev if reverse else it.next
        n = limit if limit is not None else -1
        while n and it.valid():
            k = it.key()
            if (k < lower) if reverse else (upper is not None and k >= upper):
                break
            keys.append(k)
            values.append(it.value())
            step()
            n -= 1
        del it
        return keys, values

    def close(self) -> None:
        db = getattr(self, "_db", None)
        if db is not None:
            self._cfs = {}
            db.close()
            self._db = None
        shutil.rmtree(self._shadow, ignore_errors=True)
