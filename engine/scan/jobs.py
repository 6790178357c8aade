"""Scan jobs as specs: names, parameters and their validation, result shapes, and the export
file rules. Nothing here runs a job: engine.scan.runner chooses the engine (Spark or the
single-process numpy scanner, the oracle); both engines import this module, never each other.

Every job returns rows (JSON-ready dicts) with the same keys on both engines:

    topic-stats     topic, [queueId,] messages, dispatched, bytes, firstStoreTimestamp,
                    lastStoreTimestamp, sizeP50, sizeP99   (messages: every message record of the
                    commitlog; dispatched: those of them a ConsumeQueue holds, `DISPATCHED_TYPES`;
                    exact percentiles, `percentile_value`: the same digits on both engines)
    traffic         topic, bucketStart (ms), messages, bytes
    size-histogram  sizeFrom, sizeTo (power-of-two buckets of storeSize), messages, bytes
    filter          Message.to_json() of the matches, commitlog order
    top-keys        topic, key, messages     top-tags   topic, tags, messages
    duplicates      uniqKey, [topic,] copies, topics, commitLogOffsets
    consistency     structure, problem, file, fileOffset, topic, queueId, queueOffset, key,
                    commitLogOffset, expected, actual  (CQ and index rebuilt from the commitlog
                    versus the files; nothing for a good store)
    export          path, format, rows, files   (path: a local path, or the URI written to)
    lineage, fates  one row per life / per (topic, retry group): engine.scan.lineage_job
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse
from engine.format.message import TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE
from engine.scan.filters import MessageFilter

JOBS = ["topic-stats", "traffic", "size-histogram", "filter", "top-keys", "top-tags", "duplicates",
        "consistency", "export", "lineage", "fates"]
EXPORT_FORMATS = ["parquet", "jsonl", "csv"]
DEFAULT_FILTER_LIMIT = 1000
DEFAULT_TOP = 20
_DURATION = re.compile(r"(\d+)(ms|s|m|h|d)\Z")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


PERCENTILES = {"sizeP50": 50, "sizeP99": 99}
# the transaction types RocketMQ's dispatch writes a ConsumeQueue unit for: a PREPARED half
# and a ROLLBACK record stay in the commitlog only (so topic-stats' messages can exceed the
# queues' lengths: its `dispatched` column says by how much)
TRANSACTION_MASK = 0x0C
DISPATCHED_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
TOPIC_STATS_NOTE = ("messages: commitlog records; dispatched: those in a ConsumeQueue "
                    "(transaction halves and rollbacks are not)")


def dispatched(sys_flag):
    """True where a record (sysFlag, an int or a numpy array) is dispatched to its ConsumeQueue."""
    t = sys_flag & TRANSACTION_MASK
    return (t == DISPATCHED_TYPES[0]) | (t == DISPATCHED_TYPES[1])


def percentile_rank(n: int, pct: int) -> tuple[int, int]:
    """Where the pct-th percentile of n sorted values lies: linear interpolation at position
    (n-1)*pct/100, as (rank of the lower value, 0-based; hundredths towards the next one).
    Integer arithmetic, so every engine finds the same ranks."""
    k = (n - 1) * pct
    return k // 100, k % 100


def percentile_value(lo: int, hi: int, rem: int) -> float:
    """The percentile from the values at the two ranks: (lo*100 + (hi-lo)*rem) / 100, one
    correctly rounded division of exact integers (the same double on every machine)."""
    return (int(lo) * 100 + (int(hi) - int(lo)) * rem) / 100


def exact_percentile(sorted_values, pct: int) -> float:
    """The pct-th percentile of sorted integers (the one rule of both engines)."""
    lower, rem = percentile_rank(len(sorted_values), pct)
    lo = sorted_values[lower]
    return percentile_value(lo, sorted_values[lower + 1] if rem else lo, rem)


def parse_duration(text: str) -> int:
    """'1m' -> 60000 (ms). Units: ms, s, m, h, d."""
    m = _DURATION.match(text.strip())
    if not m or int(m.group(1)) <= 0:
        raise ValueError(f"bad bucket {text!r}: use e.g. 1s, 1m, 5m, 1h, 1d")
    return int(m.group(1)) * _UNIT_MS[m.group(2)]


@dataclass
class JobParams:
    filter: MessageFilter = field(default_factory=MessageFilter)
    by_queue: bool = False            # topic-stats
    bucket: str = "1m"                # traffic
    limit: int | None = None          # filter (default 1000), top-* (default 20), duplicates (none)
    per_topic: bool = False           # duplicates: group by (topic, UNIQ_KEY)
    format: str = "parquet"           # export
    out: str | None = None
    overwrite: bool = False
    split_bytes: int | None = None    # commitlog slice size (None = automatic)
    throttle_ms: int = 0              # test / benchmark hook: sleep per block read
    stats_dir: str | None = None      # test / benchmark hook: Spark readers write what they read here
    via_consume_queue: bool = False   # read the selected queues' records through their CQ units (a
                                      # consumer's view: engine.scan.queue_reader says what it leaves out)
    decode_body: bool = False         # filter / export (jsonl, csv): rows gain decodedBody

    @property
    def bucket_ms(self) -> int:
        return parse_duration(self.bucket)


@dataclass
class JobResult:
    job: str
    engine: str
    master: str | None
    rows: list[dict]
    truncated: bool = False
    seconds: float = 0.0
    records_scanned: int | None = None
    stores: list[dict] | None = None   # [{broker, store}] when the job covered several stores

    def to_json(self) -> dict:
        d = {"job": self.job, "engine": self.engine, "master": self.master, "rows": self.rows}
        if self.truncated:
            d["truncated"] = True
        if self.stores:
            d["stores"] = self.stores
        return d


def validate(job: str, params: JobParams) -> None:
    if job not in JOBS:
        raise ValueError(f"unknown job {job!r}; jobs: {', '.join(JOBS)}")
    if job == "traffic":
        params.bucket_ms
    if job == "export":
        if params.format not in EXPORT_FORMATS:
            raise ValueError(f"unknown export format {params.format!r}; formats: {', '.join(EXPORT_FORMATS)}")
        if not params.out:
            raise ValueError("export needs --out PATH")
        if params.decode_body and params.format == "parquet":
            raise ValueError("--decode-body: decodedBody goes into jsonl or csv exports (--format jsonl|csv)")
    if job in ("lineage", "fates"):
        f = params.filter
        if f.queue_ids or f.body or f.tags or f.key or f.prop or params.via_consume_queue:
            raise ValueError(f"{job} follows whole lives: only --topic (the life's topic) selects")
    if params.limit is not None and params.limit < 0:
        raise ValueError("--limit must be >= 0")
    if params.via_consume_queue:
        if job == "consistency":
            raise ValueError("consistency reads every record: --via-consume-queue does not apply")
        if not (params.filter.topics or params.filter.queue_ids):
            raise ValueError("--via-consume-queue needs --topic or --queue (the queues to read)")


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+:/")


def is_uri(text: str) -> bool:
    """`scheme:/...` (file:///x, hdfs://nn/x, s3a://bucket/x); a plain path is not one."""
    return bool(_URI.match(text))


def local_path_of(text: str) -> str | None:
    """The local path a plain path or a `file:` URI names (file:///x, file:/x,
    file://localhost/x); None for any other scheme (Spark's / pyarrow's filesystems)."""
    if not is_uri(text):
        return text
    u = urlparse(text)
    if u.scheme.lower() != "file":
        return None
    if u.netloc not in ("", "localhost"):
        raise ValueError(f"{text}: a file URI names no other host; write file:///path")
    return unquote(u.path)


def export_target(store_roots, out: str) -> str:
    """Where an export goes. A local path or file:// URI becomes an absolute path, refused
    when it could harm a store: a symbolic link (even a dangling one: it would be written
    at its target), or a path inside a store being scanned or inside any other RocketMQ
    store. Any other URI (hdfs://, s3a://, ...) is returned untouched for the writer."""
    local = local_path_of(out)
    if local is None:
        return out
    path = os.path.abspath(local)
    if os.path.islink(path):
        raise ValueError(f"--out {out} is a symbolic link; give the real path")
    real = os.path.realpath(path)
    if isinstance(store_roots, (str, os.PathLike)):
        store_roots = [store_roots]
    roots = {os.path.realpath(r) for r in store_roots}
    parent = os.path.dirname(real)
    while True:
        if _looks_like_store(parent):
            roots.add(parent)
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
    for r in roots:
        if real == r or os.path.commonpath([real, r]) == r:
            raise ValueError(f"--out {out} is inside the store {r}; exports never write into a store")
    if not os.path.isdir(os.path.dirname(real)):
        raise ValueError(f"--out {out}: folder {os.path.dirname(real)} does not exist")
    return path


def _looks_like_store(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "checkpoint")) and (
        os.path.isdir(os.path.join(d, "commitlog")) or os.path.isdir(os.path.join(d, "consumequeue")))


def temporary_sibling(path: str) -> str:
    """Where an export is written before it is renamed to `path` on success (a path or a URI)."""
    if is_uri(path):
        d, _, name = path.rstrip("/").rpartition("/")
        return f"{d}/.{name}.rmqstore-{os.getpid()}.tmp"
    d, name = os.path.split(path)
    return os.path.join(d, f".{name}.rmqstore-{os.getpid()}.tmp")


def publish(tmp: str, path: str, overwrite: bool) -> None:
    """Rename a finished export into place (replacing `path` only when asked)."""
    if os.path.lexists(path):
        if not overwrite:
            raise FileExistsError(f"{path} exists (use --overwrite)")
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    os.replace(tmp, path)


def discard(tmp: str) -> None:
    if os.path.isdir(tmp) and not os.path.islink(tmp):
        shutil.rmtree(tmp, ignore_errors=True)
    elif os.path.lexists(tmp):
        os.unlink(tmp)


JSON_COLUMNS = ["topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
                "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
                "preparedTransactionOffset", "properties", "msgId", "uniqKey", "tags", "keys", "tagsCode",
                "transactionType", "magicCode", "bodyLength", "body"]   # Message.to_json() order
CSV_COLUMNS = ["commitLogOffset", "topic", "queueId", "queueOffset", "storeSize", "bodyCRC", "flag", "sysFlag",
               "bornTimestamp", "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes",
               "preparedTransactionOffset", "msgId", "uniqKey", "tags", "keys", "tagsCode", "transactionType",
               "magicCode", "bodyLength", "properties", "body", "bodyDecoded"]
# CSV is RFC 4180 on both engines: fields with a quote, comma or line break are quoted and a
# quote inside is doubled; null and "" both read back as an empty field; booleans true/false.
