"""Store configuration under RocketMQ's own property names (MessageStoreConfig fields), read
from a broker.conf-style file. None of the file sizes is recorded in the files, so a store can
only be read with the sizes it was written with: sizes left unset are detected from the files
where that is unambiguous."""
from __future__ import annotations

import dataclasses
import os
import re
import stat
from dataclasses import dataclass, field, fields
from pathlib import Path

from engine.errors import ConfigError

from engine.format.checkpoint_layout import CHECKPOINT_SIZE  # noqa: F401 - the layouts are engine/format's
from engine.format.cq_unit import CQ_UNIT_SIZE
from engine.format.index_layout import INDEX_ENTRY_SIZE, INDEX_HEADER_SIZE, INDEX_SLOT_SIZE

INT32_MAX = (1 << 31) - 1  # Java's int: the largest file a MappedFile maps
# Sizes are not recorded in RocketMQ's files, so `rmqstore init` writes the settings it made a
# store with here (broker.conf syntax); RocketMQ ignores the file, opens read it below what the
# caller sets and what the files decide.
STORE_SETTINGS_FILE = "rmqstore.conf"
SIZE_SETTINGS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


DELAY_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}   # messageDelayLevel's units


def delay_level_token(ms: int) -> str:
    """One messageDelayLevel token for a delay (the largest unit that divides it; whole seconds)."""
    for unit in ("d", "h", "m"):
        if ms and ms % DELAY_UNITS_MS[unit] == 0:
            return f"{ms // DELAY_UNITS_MS[unit]}{unit}"
    return f"{ms // 1000}s"


@dataclass(slots=True)  # slots: the compiled key query reads maxMsgsNumBatch in place
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
    timerPrecisionMs: int = 1000                      # 5.x timer store: read from the files unless set
    mappedFileSizeTimerLog: int = 100 * 1024 * 1024   # 5.x timerlog files: read from the files unless set
    # 5.x tiered storage (engine/store/tiered_view.py): the store's tier, read-only; "" = none
    tieredStoreFilePath: str = ""
    tieredStorageLevel: str = "NOT_IN_DISK"
    # DLedger mode (engine/store/dledger_commit_log.py): which dledger-<selfId> folder, where its data is
    enableDLegerCommitLog: bool = False
    dLegerSelfId: str = ""
    storePathDLedgerCommitLog: str = ""
    # 5.x LMQ multi-dispatch (engine/store/lmq.py) and BatchConsumeQueue file size
    enableLmq: bool = False
    enableMultiDispatch: bool = False
    mapperFileSizeBatchConsumeQueue: int = 300_000 * 46
    # which settings were given explicitly (by file or caller) rather than defaulted
    explicit: set[str] = field(default_factory=set, repr=False, compare=False)
    # which sizes were detected from the files
    detected: set[str] = field(default_factory=set, repr=False, compare=False)
    # what detection could not decide and assumed (shown as store warnings)
    notes: list[str] = field(default_factory=list, repr=False, compare=False)
    # settings a config file gave that were passed over (the broker's store paths)
    ignored: list[str] = field(default_factory=list, repr=False, compare=False)
    # check's open: files of the wrong size are passed over and listed instead of refused
    tolerant: bool = field(default=False, repr=False, compare=False)

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
    def index_file_size(self) -> int:
        return (INDEX_HEADER_SIZE + self.maxHashSlotNum * INDEX_SLOT_SIZE
                + self.maxIndexNum * INDEX_ENTRY_SIZE)

    @property
    def delay_level_millis(self) -> list[int]:
        """delay_level_millis[level-1] in ms, parsed like ScheduleMessageService.parseDelayLevel."""
        out = []
        for token in self.messageDelayLevel.split(" "):
            if token:
                out.append(int(token[:-1]) * DELAY_UNITS_MS[token[-1]])
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
    def from_mapping(cls, values: dict[str, str | int | bool], source: str | None = None,
                     strict: bool = False) -> "StoreConfig":
        """strict: every key must be a store setting (--set); otherwise other broker settings
        are passed over (a broker.conf carries many the store does not use)."""
        known = {f.name: f for f in fields(cls) if f.name not in _META}
        kwargs = {}
        for key, raw in values.items():
            if key not in known:
                if strict:
                    raise ConfigError(f"unknown store setting {key!r} (MessageStoreConfig names, e.g. "
                                      "mappedFileSizeCommitLog, maxHashSlotNum, maxIndexNum)", path=source)
                continue
            kwargs[key] = _coerce(known[key].type, raw, key, source)
        cfg = cls(**kwargs)
        cfg.explicit = set(kwargs)
        return cfg

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "StoreConfig":
        """A broker.conf (Java properties: key=value or key: value, # and ! comments). Bounded
        and checked: a device, a huge or binary file, or one with no RocketMQ setting in it is
        refused. Its store paths describe where the broker kept the store, not this copy: they
        are passed over with a note (the store is the folder given)."""
        values = _read_properties(Path(path))
        if not any(k in STORE_KEYS or k in BROKER_KEYS for k in values):
            raise ConfigError("no RocketMQ broker or store setting in it; not a broker.conf", path=str(path))
        ignored = sorted(k for k in values if k in PATH_KEYS)
        cfg = cls.from_mapping({k: v for k, v in values.items() if k not in PATH_KEYS}, source=str(path))
        if ignored:
            cfg.ignored = ignored
            cfg.notes = [f"{path}: {', '.join(ignored)} passed over (the store is the folder given)"]
        return cfg

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
        for name in ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue"):
            if getattr(self, name) > INT32_MAX:
                raise ConfigError(f"{name}={getattr(self, name)} is larger than RocketMQ maps a file (2 GiB - 1)")
        if self.index_file_size > INT32_MAX:
            raise ConfigError(f"index files of {self.index_file_size} bytes are larger than RocketMQ maps a file "
                              f"(2 GiB - 1): maxHashSlotNum={self.maxHashSlotNum} maxIndexNum={self.maxIndexNum}")
        checks = [
            ("mappedFileSizeCommitLog", self.mappedFileSizeCommitLog > 64),
            ("mappedFileSizeConsumeQueue", self.mappedFileSizeConsumeQueue >= CQ_UNIT_SIZE),
            ("maxHashSlotNum", self.maxHashSlotNum > 0),
            ("maxIndexNum", self.maxIndexNum > 1),
            ("maxMsgsNumBatch", self.maxMsgsNumBatch >= 0),
            ("maxMessageSize", self.maxMessageSize > 0),
            ("timerPrecisionMs", self.timerPrecisionMs > 0),
            ("mappedFileSizeTimerLog", self.mappedFileSizeTimerLog >= 52),
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
    StoreConfig.from_mapping(values, strict=True)  # every --set must be a store setting
    base = {k: v for k, v in cfg.to_dict().items() if k in cfg.explicit} if cfg else {}
    base.update(values)
    out = StoreConfig.from_mapping(base, source=str(config_file) if config_file else None)
    out.notes = list(cfg.notes) if cfg else []
    return out


_META = ("explicit", "detected", "notes", "ignored", "tolerant")
STORE_KEYS = {f.name for f in fields(StoreConfig) if f.name not in _META}
PATH_KEYS = {"storePathRootDir", "storePathCommitLog", "storePathConsumeQueue", "storePathIndex",
             "storeCheckpoint", "abortFile", "storePathEpochFile", "storePathBrokerIdentity",
             "storePathDLedgerCommitLog"}
# broker.conf settings outside MessageStoreConfig (BrokerConfig, NettyServerConfig, ...): known, not used
BROKER_KEYS = {"brokerName", "brokerId", "namesrvAddr", "deleteWhen", "fileReservedTime", "brokerIP2",
               "autoCreateTopicEnable", "autoCreateSubscriptionGroup", "sendMessageThreadPoolNums",
               "pullMessageThreadPoolNums", "dLegerGroup", "dLegerPeers", "transientStorePoolEnable", "diskMaxUsedSpaceRatio", "haListenPort",
               "storeType", "enableControllerMode", "timerWheelEnable",
               "aclEnable", "traceTopicEnable", "defaultTopicQueueNums", "useReentrantLockWhenPutMessage"}
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
MAX_CONFIG_BYTES = 1 << 20


def _read_properties(path: Path) -> dict[str, str]:
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise ConfigError(f"cannot read config file: {e.strerror}", path=str(path)) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError("config file is not a regular file", path=str(path))
        data = os.read(fd, MAX_CONFIG_BYTES + 1)
    except OSError as e:
        raise ConfigError(f"cannot read config file: {e.strerror}", path=str(path)) from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES or b"\0" in data:
        raise ConfigError("not a broker.conf (binary, or over 1 MiB)", path=str(path))
    values: dict[str, str] = {}
    for n, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        seps = [i for i in (line.find("="), line.find(":")) if i >= 0]
        sep = min(seps) if seps else len(line)
        key = line[:sep].strip()
        if not _KEY_RE.match(key):
            raise ConfigError(f"line {n} is not key=value: {line[:60]!r}", path=str(path))
        values[key] = line[sep + 1:].strip()
    return values


def read_properties(path) -> dict[str, str]:
    """A broker.conf's key=value pairs (bounded, typed errors), e.g. its brokerName."""
    return _read_properties(Path(path))


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
