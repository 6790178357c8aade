"""Store configuration under RocketMQ's own property names (MessageStoreConfig fields), read
from a broker.conf-style file. None of the file sizes is recorded in the files, so a store can
only be read with the sizes it was written with: sizes left unset are detected from the files
where that is unambiguous."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from .errors import ConfigError

CQ_UNIT_SIZE = 20
INDEX_HEADER_SIZE = 40
INDEX_SLOT_SIZE = 4
INDEX_ENTRY_SIZE = 20
CHECKPOINT_SIZE = 4096
# Sizes are not recorded in RocketMQ's files, so `rmqstore init` writes the settings it made a
# store with here (broker.conf syntax); RocketMQ ignores the file, opens read it below what the
# caller sets and what the files decide.
STORE_SETTINGS_FILE = "rmqstore.conf"
SIZE_SETTINGS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


@dataclass
class StoreConfig:
    storePathRootDir: str = ""
    storePathCommitLog: str = ""  # derived from the root when empty
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    mappedFileSizeConsumeQueue: int = 300_000 * CQ_UNIT_SIZE
    maxHashSlotNum: int = 5_000_000
    maxIndexNum: int = 5_000_000 * 4
    messageIndexEnable: bool = True
    messageIndexSafe: bool = False
    maxMsgsNumBatch: int = 64
    checkCRCOnRecover: bool = True
    maxMessageSize: int = 1024 * 1024 * 4
    enabledAppendPropCRC: bool = False
    forceVerifyPropCRC: bool = False
    autoMessageVersionOnTopicLen: bool = True
    messageDelayLevel: str = DEFAULT_DELAY_LEVELS
    flushDiskType: str = "ASYNC_FLUSH"
    brokerRole: str = "ASYNC_MASTER"
    duplicationEnable: bool = False
    enableConsumeQueueExt: bool = False
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    brokerIP1: str = "127.0.0.1"
    listenPort: int = 10911
    brokerClusterName: str = "DefaultCluster"
    flushIntervalCommitLog: int = 500
    # which settings were given explicitly (by file or caller) rather than defaulted
    explicit: set[str] = field(default_factory=set, repr=False, compare=False)
    # which sizes were detected from the files
    detected: set[str] = field(default_factory=set, repr=False, compare=False)
    # what detection could not decide and assumed (shown as store warnings)
    notes: list[str] = field(default_factory=list, repr=False, compare=False)

    # ---- derived values -------------------------------------------------------------
    def __post_init__(self) -> None:
        self.mappedFileSizeConsumeQueue = _round_cq(self.mappedFileSizeConsumeQueue)

    @property
    def root(self) -> Path:
        return Path(self.storePathRootDir or os.path.expanduser("~/store"))

    @property
    def commitlog_dirs(self) -> list[Path]:
        if self.storePathCommitLog:
            return [Path(p) for p in self.storePathCommitLog.split(",") if p]
        return [self.root / "commitlog"]

    @property
    def cq_units_per_file(self) -> int:
        return self.mappedFileSizeConsumeQueue // CQ_UNIT_SIZE

    @property
    def index_file_size(self) -> int:
        return (INDEX_HEADER_SIZE + self.maxHashSlotNum * INDEX_SLOT_SIZE
                + self.maxIndexNum * INDEX_ENTRY_SIZE)

    @property
    def delay_level_millis(self) -> list[int]:
        """delay_level_millis[level-1] in ms, parsed like ScheduleMessageService.parseDelayLevel."""
        units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        out = []
        for token in self.messageDelayLevel.split(" "):
            if token:
                out.append(int(token[:-1]) * units[token[-1]])
        return out

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType.upper() == "SYNC_FLUSH"

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _META}

    def with_values(self, **values) -> "StoreConfig":
        new = dataclasses.replace(self, **values)
        new.explicit = set(self.explicit) | set(values)
        return new

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: dict[str, str | int | bool], source: str | None = None) -> "StoreConfig":
        known = {f.name: f for f in fields(cls) if f.name not in _META}
        kwargs = {}
        for key, raw in values.items():
            if key not in known:
                continue  # a broker.conf carries many broker settings the store does not use
            kwargs[key] = _coerce(known[key].type, raw, key, source)
        cfg = cls(**kwargs)
        cfg.explicit = set(kwargs)
        return cfg

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "StoreConfig":
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            raise ConfigError(f"cannot read config file: {e.strerror}", path=str(path)) from None
        values: dict[str, str] = {}
        for line in text.splitlines():
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if sep <= 0:
                continue
            values[line[:sep].strip()] = line[sep + 1:].strip()
        return cls.from_mapping(values, source=str(path))

    def under_store_settings(self, root: Path) -> "StoreConfig":
        """This config with the store's own settings file (STORE_SETTINGS_FILE) filling what the
        caller did not set. They stay non-explicit: sizes the files decide still win."""
        path = Path(root) / STORE_SETTINGS_FILE
        if not path.is_file():
            return self
        saved = StoreConfig.from_file(path)
        values = {k: getattr(saved, k) for k in saved.explicit - self.explicit}
        if not values:
            return self
        cfg = dataclasses.replace(self, **values)
        cfg.explicit, cfg.detected = set(self.explicit), set(self.detected)
        return cfg

    def store_settings_text(self) -> str:
        """The STORE_SETTINGS_FILE a new store gets: its sizes and every setting given."""
        keys = list(SIZE_SETTINGS) + sorted(self.explicit - set(SIZE_SETTINGS) - {"storePathRootDir"})
        lines = ["# written by `rmqstore init`: the settings this store was made with (RocketMQ ignores this file)"]
        lines += [f"{k}={str(getattr(self, k)).lower() if isinstance(getattr(self, k), bool) else getattr(self, k)}"
                  for k in keys]
        return "\n".join(lines) + "\n"

    def validate(self) -> None:
        checks = [
            ("mappedFileSizeCommitLog", self.mappedFileSizeCommitLog > 64),
            ("mappedFileSizeConsumeQueue", self.mappedFileSizeConsumeQueue >= CQ_UNIT_SIZE),
            ("maxHashSlotNum", self.maxHashSlotNum > 0),
            ("maxIndexNum", self.maxIndexNum > 1),
            ("maxMsgsNumBatch", self.maxMsgsNumBatch >= 0),
            ("maxMessageSize", self.maxMessageSize > 0),
        ]
        for name, ok in checks:
            if not ok:
                raise ConfigError(f"invalid {name}={getattr(self, name)}")
        try:
            self.delay_level_millis
        except (ValueError, KeyError, IndexError):
            raise ConfigError(f"invalid messageDelayLevel={self.messageDelayLevel!r}") from None


def parse_settings(pairs) -> dict[str, str]:
    """`KEY=VALUE` strings (the CLI's and the browser's `--set`) as a mapping."""
    values: dict[str, str] = {}
    for s in pairs:
        k, sep, v = str(s).partition("=")
        if not sep or not k.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {s!r}")
        values[k.strip()] = v.strip()
    return values


def load_store_config(config_file: str | os.PathLike | None = None, settings=None) -> StoreConfig | None:
    """A broker.conf-style file, then `settings` (a mapping or KEY=VALUE strings) over it;
    None when neither is given (everything detected from the files)."""
    cfg = StoreConfig.from_file(config_file) if config_file else None
    if not settings:
        return cfg
    values = dict(settings) if isinstance(settings, dict) else parse_settings(settings)
    base = {k: v for k, v in cfg.to_dict().items() if k in cfg.explicit} if cfg else {}
    base.update(values)
    return StoreConfig.from_mapping(base, source=str(config_file) if config_file else None)


_META = ("explicit", "detected", "notes")


def _round_cq(v: int) -> int:
    """MessageStoreConfig rounds the CQ file size up to a whole number of 20-byte units."""
    return -(-int(v) // CQ_UNIT_SIZE) * CQ_UNIT_SIZE


def _coerce(typ, raw, key: str, source: str | None):
    if isinstance(raw, str):
        raw = raw.strip()
    try:
        if typ in (bool, "bool"):
            if isinstance(raw, bool):
                return raw
            if str(raw).lower() in ("true", "false"):
                return str(raw).lower() == "true"
            raise ValueError
        if typ in (int, "int"):
            return int(raw)
        return str(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"invalid value {raw!r} for {key}", path=source) from None
