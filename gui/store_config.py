"""Store settings as the browser keeps them: a mapping of RocketMQ property names
(MessageStoreConfig fields) to text, exactly what a broker.conf or `--set` would say. Only the
settings a user gave are in it; a missing name means "detect from the files" (file sizes) or
RocketMQ's default (everything else). Pure Python (no Qt): the dialog, the window, the
command line and the remembered preferences all go through here.

The store's location is never a setting here: storePathRootDir is the folder the user opened and
storePathCommitLog could point reads outside it, so both are left out (and reported as ignored)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, fields

from engine import StoreError
from engine.config import StoreConfig, load_store_config, parse_settings
from engine.errors import ConfigError, NotAStoreError, ReadOnlyStoreError, StoreLockedError

EXCLUDED = ("storePathRootDir", "storePathCommitLog", "storePathDLedgerCommitLog")
# sizes none of the files record: detected from the files when left empty
SIZE_KEYS = ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")
CHOICES = {
    "flushDiskType": ("ASYNC_FLUSH", "SYNC_FLUSH"),
    "brokerRole": ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"),
    "tieredStorageLevel": ("DISABLE", "NOT_IN_DISK", "NOT_IN_MEM", "FORCE"),
}
HINTS = {
    "dLegerSelfId": "DLedger mode: read dledger-<this id>/ (when the store has several)",
    "enableDLegerCommitLog": "DLedger mode: the store's log is dledger-<selfId>/",
    "mappedFileSizeCommitLog": "bytes per commitlog file",
    "mappedFileSizeConsumeQueue": "bytes per ConsumeQueue file (a multiple of 20)",
    "maxHashSlotNum": "hash slots per index file",
    "maxIndexNum": "entries per index file",
    "messageIndexEnable": "build the key index",
    "messageIndexSafe": "index recovery trusts only the checkpoint",
    "maxMsgsNumBatch": "batch size of index queries",
    "checkCRCOnRecover": "check body CRCs during recovery",
    "maxMessageSize": "largest message body accepted, bytes",
    "enabledAppendPropCRC": "append a __CRC32# property (5.2+)",
    "forceVerifyPropCRC": "verify the __CRC32# property when reading",
    "autoMessageVersionOnTopicLen": "V2 records for topics longer than 127 bytes",
    "messageDelayLevel": "delay levels of scheduled messages",
    "flushDiskType": "when appends reach the disk",
    "brokerRole": "the broker's replication role",
    "duplicationEnable": "keep queue offsets of a duplicated log",
    "enableConsumeQueueExt": "ConsumeQueue extension files (not supported)",
    "maxTransferCountOnMessageInMemory": "messages per getMessage page",
    "maxTransferBytesOnMessageInMemory": "bytes per getMessage page",
    "brokerIP1": "host in new offset msgIds",
    "listenPort": "port in new offset msgIds",
    "brokerClusterName": "cluster name",
    "flushIntervalCommitLog": "async flush interval, ms",
    "timerPrecisionMs": "timer wheel precision, ms (5.x; read from the files when not set)",
    "mappedFileSizeTimerLog": "bytes per timerlog file (5.x; read from the files when not set)",
    "tieredStoreFilePath": "5.x tiered storage: the store's tier folder (read-only; reads route as the level says)",
    "tieredStorageLevel": "which reads the tier serves (TieredMessageStore)",
}


@dataclass(frozen=True)
class Setting:
    name: str
    kind: str            # "int" | "bool" | "str" | "choice"
    default: str         # RocketMQ's default, as text
    hint: str
    detected: bool       # a file size: detected from the files when empty

    @property
    def choices(self) -> tuple[str, ...]:
        return ("true", "false") if self.kind == "bool" else CHOICES.get(self.name, ())


def _text(v) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _settings() -> tuple[Setting, ...]:
    base = StoreConfig()
    out = []
    for f in fields(StoreConfig):
        typ = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        if f.name in EXCLUDED or typ not in ("int", "bool", "str"):
            continue  # the paths, and bookkeeping (explicit / detected / notes)
        kind = "choice" if f.name in CHOICES else {"int": "int", "bool": "bool"}.get(typ, "str")
        out.append(Setting(f.name, kind, _text(getattr(base, f.name)), HINTS.get(f.name, ""), f.name in SIZE_KEYS))
    out.sort(key=lambda s: not s.detected)  # the sizes first, then in MessageStoreConfig order
    return tuple(out)


SETTINGS: tuple[Setting, ...] = _settings()
NAMES = frozenset(s.name for s in SETTINGS)


def clean(mapping) -> dict[str, str]:
    """Known names with non-empty values, as text, in the order of SETTINGS."""
    mapping = dict(mapping or {})
    out = {}
    for s in SETTINGS:
        v = mapping.get(s.name)
        if v is None:
            continue
        v = _text(v).strip()
        if v:
            out[s.name] = v
    return out


def to_config(mapping) -> StoreConfig | None:
    """The StoreConfig for MessageStore.open (None: everything detected / default). Raises
    ConfigError with a one-line message for a value RocketMQ would not take."""
    values = clean(mapping)
    cfg = load_store_config(None, values) if values else None
    if cfg is not None:
        cfg.validate()
    return cfg


def check(mapping) -> str:
    """'' when the settings are acceptable, else the one-line reason."""
    try:
        to_config(mapping)
    except ConfigError as e:
        return str(e)
    return ""


def from_config(cfg: StoreConfig | None) -> dict[str, str]:
    """The settings a config was given explicitly (by a file or a caller), as text."""
    if cfg is None:
        return {}
    return clean({k: getattr(cfg, k) for k in cfg.explicit if k in NAMES})


@dataclass
class Imported:
    values: dict[str, str]       # the settings the file set, that the browser offers
    ignored: list[str]           # settings the file set that are left out (paths)
    path: str


def import_file(path: str | os.PathLike) -> Imported:
    """The settings a broker.conf sets explicitly; raises ConfigError (unreadable file, bad value)."""
    cfg = StoreConfig.from_file(path)
    return Imported(from_config(cfg), sorted(cfg.ignored), str(path))


def from_command_line(config_file: str | None, pairs: list[str] | None) -> tuple[dict[str, str], list[str]]:
    """`--config FILE` and `--set K=V` as one settings mapping (the --set values win), plus
    notes on what was ignored. Raises ConfigError on an unreadable file or a bad value."""
    notes: list[str] = []
    values: dict[str, str] = {}
    if config_file:
        imp = import_file(config_file)
        values.update(imp.values)
        if imp.ignored:
            notes.append(f"ignored {', '.join(imp.ignored)} from {config_file}: the store is the folder given")
    given = parse_settings(pairs or [])
    for k in given:
        if k in EXCLUDED:
            notes.append(f"ignored --set {k}: the store is the folder given")
        elif k not in NAMES:
            notes.append(f"ignored --set {k}: not a store setting")
    values.update({k: v for k, v in given.items() if k in NAMES})
    to_config(values)  # raises on a bad value
    return clean(values), notes


_SETTINGS_WORDS = re.compile(r"size|mappedFileSize|maxHashSlotNum|maxIndexNum|maxMessageSize|setting", re.I)


def offers_settings(exc: BaseException) -> bool:
    """Whether a failed open may be fixed by store settings (file sizes, bad values)."""
    if isinstance(exc, ConfigError):
        return True
    if isinstance(exc, (NotAStoreError, StoreLockedError, ReadOnlyStoreError)) or not isinstance(exc, StoreError):
        return False
    return bool(_SETTINGS_WORDS.search(str(exc)))
