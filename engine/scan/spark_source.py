"""Spark Python Data Sources over a RocketMQ store (pyspark.sql.datasource, Spark 4+).

    spark.read.format("rocketmq").load(STORE)         one row per message (MessageExt names;
                                                       body binary, properties map<string,string>)
    spark.read.format("rocketmq-cq").load(STORE)      ConsumeQueue units: topic, queueId,
                                                       queueOffset, commitLogOffset, size, tagsCode, file, position
                                                       (and phyOffset, its name before, as an alias)
    spark.read.format("rocketmq-index").load(STORE)   index entries: file, slot, index, keyHash,
                                                       commitLogOffset, timeDiff, prevIndex, timestamp, position

Options (names are case-insensitive):
    topic=T1,T2  queueId=0,3            only these topics / queue ids (all three sources)
    columns=topic,storeSize,...         rocketmq: only these columns (the rest is not decoded);
                                        also indexKeys / indexKeyHashes on request
    bodyRegex, tags, key, prop=K=REGEX  rocketmq: message filters (engine.scan.filters)
    splitBytes                          rocketmq: cut commitlog files into slices of at most this
                                        many bytes, one slice per task
    minPartitions, maxPartitionBytes    rocketmq: otherwise slices are packed into about
                                        minPartitions tasks of at most maxPartitionBytes
    useConsumeQueue=true                rocketmq: with a pushed topic / queueId filter, read only the
                                        records the selected queues' CQ units name (a consumer's view:
                                        engine.scan.queue_reader says what it leaves out);
                                        queueReadGap: records closer than this many bytes are
                                        fetched in one ranged read (64 KiB)
    rangedReads=true                    read a local store by byte ranges as a remote one (bench, tests)
    plan=<json>                         a plan made by engine.scan.planning on an open store
                                        (then the store is not reopened to plan)
    any StoreConfig name                e.g. mappedFileSizeCommitLog=65536 (else detected)

Partitions are commitlog slices (one per file, large files split at record boundaries), CQ
and index file slices; `read()` maps the files itself and yields Arrow record batches."""
from __future__ import annotations

import json
import os
import time
from dataclasses import fields

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, IntegerType, LongType, MapType, StringType, StructField,
                               StructType)

from engine.config import StoreConfig
from engine.scan.arrow import CQ_COLUMNS, INDEX_COLUMNS, ORIGIN_KINDS, block_to_arrow, numpy_to_arrow
from engine.scan.columns import COLUMN_KINDS, MESSAGE_COLUMN_NAMES
from engine.scan.filters import Condition, MessageFilter, apply_conditions, offset_bounds
from engine.scan.planning import (CQ_UNITS_PER_PARTITION, INDEX_ENTRIES_PER_PARTITION, MAX_PARTITION_BYTES, Plan,
                                  cq_weight, index_weight, pack, plan_commitlog, plan_consume_queues, plan_index,
                                  plans_from_json, slice_weight)
from engine.scan.queue_reader import GAP_BYTES, QueueRead, queue_read, queue_selection, read_queue_records
from engine.scan.ranges import FETCHED
from engine.scan.remote import RemoteStore, open_scan_store, refuse_remote, store_uri
from engine.scan.stores import resolve_stores
from engine.scan.reader import read_commitlog, read_cq, read_index

SPARK_KINDS = {
    "int": IntegerType(), "long": LongType(), "string": StringType(), "binary": BinaryType(),
    "map": MapType(StringType(), StringType()), "array": ArrayType(StringType()),
    "intarray": ArrayType(IntegerType()), "bool": BooleanType(),
}
_CONFIG_NAMES = {f.name.lower(): f.name for f in fields(StoreConfig) if f.name not in ("explicit", "detected")}


def spark_schema(columns: list[tuple[str, str]]) -> StructType:
    return StructType([StructField(n, SPARK_KINDS[k], True) for n, k in columns])


def _opt(options, name: str, default=None):
    v = options.get(name.lower())
    if v is None:
        v = options.get(name)
    return default if v in (None, "") else v


def store_config(options) -> StoreConfig | None:
    values = {_CONFIG_NAMES[k.lower()]: v for k, v in dict(options).items() if k.lower() in _CONFIG_NAMES}
    return StoreConfig.from_mapping(values) if values else None


def _store_specs(options) -> list[str]:
    """The stores named by load(PATH) (a store, a glob, a cluster layout; several paths as
    load([A, B]) or `stores=A,B`)."""
    specs = []
    paths = _opt(options, "paths")
    if paths:
        specs += [p for p in json.loads(paths) if p]
    path = _opt(options, "path")
    if path:
        specs.append(path)
    stores = _opt(options, "stores")
    if stores:
        specs += [p.strip() for p in stores.split(",") if p.strip()]
    if not specs:
        raise ValueError("rocketmq data sources need a store path: load(STORE)")
    return specs


def _open_plans(options, what: str, min_parts: int = 1) -> list[tuple]:
    """(Plan, cq, index) per store named by the options, planned here (on the driver)."""
    refs = resolve_stores(_store_specs(options))
    out = []
    for ref in refs:
        with _open_store(ref.path, options) as store:
            split = _opt(options, "splitBytes")
            if what == "commitlog":
                plan = plan_commitlog(store, int(split) if split else None, max(1, min_parts // len(refs)))
            else:
                if what == "cq":
                    refuse_remote([store], f"the {RocketMQCQDataSource.name()} source")
                plan = Plan(ref.path)
            plan.root, plan.broker = ref.path, ref.broker
            out.append((plan, plan_consume_queues(store) if what == "cq" else None,
                        plan_index(store) if what == "index" else None))
    return out


def _open_store(path: str, options):
    """The store a read plans from; rangedReads=true: a local one too is listed and read by byte
    ranges, as a store on HDFS / S3 is (RMQSTORE_SCAN_FS_READER for one read: the bench)."""
    if _opt(options, "rangedReads", "false").lower() == "true":
        return RemoteStore(store_uri(path), store_config(options))
    return open_scan_store(path, store_config(options))


def _given_plans(options) -> list[tuple] | None:
    text = _opt(options, "plan")
    return plans_from_json(text) if text else None


KINDS = {**COLUMN_KINDS, **ORIGIN_KINDS}
QUEUE_UNITS_PER_PARTITION = 1 << 18   # useConsumeQueue: CQ units (records) per task, at most


def _columns(options) -> list[str]:
    cols = _opt(options, "columns")
    if not cols:
        return list(MESSAGE_COLUMN_NAMES) + list(ORIGIN_KINDS)
    names = [c.strip() for c in cols.split(",") if c.strip()]
    unknown = [c for c in names if c not in KINDS]
    if unknown:
        raise ValueError(f"unknown rocketmq columns {unknown}; known: {', '.join(KINDS)}")
    return names


def _default_min_partitions() -> int:
    """Without register()'s figure (a bare spark.dataSource.register): 2 x this machine's CPUs."""
    return 2 * (os.cpu_count() or 2)


# ---- messages ---------------------------------------------------------------------------------
class RocketMQDataSource(DataSource):
    default_partitions: int | None = None   # set by register(): 3 x the cluster's default parallelism

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return spark_schema([(n, KINDS[n]) for n in _columns(self.options)])

    def reader(self, schema: StructType) -> "RocketMQReader":
        return RocketMQReader(self.options, schema, self.default_partitions)


class RocketMQReader(DataSourceReader):
    """Reads the columns of the schema it is built with (the `columns` option, or a schema the
    user gives: `.schema("topic string, queueId int")`): nothing else is decoded. A
    DataFrame's filters on topic, queueId, tags, keys, storeTimestamp and commitLogOffset are
    pushed here (`pushFilters`) and evaluated before any other field is decoded;
    commitLogOffset ranges skip whole slices."""

    def __init__(self, options, schema: StructType, default_partitions: int | None = None):
        self.options = {k.lower(): v for k, v in dict(options).items()}
        self.schema = schema
        self.default_partitions = default_partitions or _default_min_partitions()
        self.columns = schema.fieldNames()
        unknown = [c for c in self.columns if c not in KINDS]
        if unknown:
            raise ValueError(f"unknown rocketmq columns {unknown}; known: {', '.join(KINDS)}")
        self.filter = MessageFilter.from_options(self.options)
        self.throttle = int(_opt(self.options, "throttleMs", 0))
        self.conditions: list = []
        self.stats_dir = _opt(self.options, "statsDir")

    def pushFilters(self, filters):
        """Accept what engine.scan.filters.Condition can evaluate; yield the rest back."""
        from pyspark.sql import datasource as ds
        ops = {ds.EqualTo: "=", ds.In: "in", ds.GreaterThan: ">", ds.GreaterThanOrEqual: ">=",
               ds.LessThan: "<", ds.LessThanOrEqual: "<="}
        for f in filters:
            op, attr = ops.get(type(f)), getattr(f, "attribute", ())
            if isinstance(f, ds.IsNotNull) and len(attr) == 1 and KINDS.get(attr[0]) in ("int", "long", "bool"):
                continue   # numbers are never null here: nothing to do
            cond = Condition.make(attr[0], op, f.value) if op and len(attr) == 1 else None
            if cond is None:
                yield f
            else:
                self.conditions.append(cond)

    def _queue_partitions(self, topics, qids, min_parts: int) -> list[InputPartition]:
        """useConsumeQueue: the selected queues' CQ slices, packed; each task reads their records.
        The stores are those of a given plan (rmqstore scan's), else the ones load() names."""
        given = _given_plans(self.options)
        refs = ([(p.root, p.broker) for p, _, _ in given] if given
                else [(r.path, r.broker) for r in resolve_stores(_store_specs(self.options))])
        gap = int(_opt(self.options, "queueReadGap", GAP_BYTES))
        out = []
        for path, broker in refs:
            with _open_store(path, self.options) as store:
                refuse_remote([store], "useConsumeQueue")
                plan = plan_commitlog(store, None)
                q = queue_read(store, plan, topics, qids, gap)
            for g in pack(q.cq, cq_weight, QUEUE_UNITS_PER_PARTITION, min_parts):
                out.append(InputPartition((QueueRead(g, q.files, q.min_offset, q.max_offset, gap),
                                           plan.delay_level_millis, (broker, path))))
        return out or [InputPartition(([], [], ("", "")))]

    def partitions(self) -> list[InputPartition]:
        """Commitlog slices, several per task: a Spark task costs tens of milliseconds of
        its own, so slices are packed into about `minPartitions` tasks of at most
        `maxPartitionBytes` (512 MiB) each; a task reads one store. An explicit splitBytes
        means one slice per task. Slices outside a pushed commitLogOffset range are skipped."""
        split = _opt(self.options, "splitBytes")
        min_parts = int(_opt(self.options, "minPartitions", self.default_partitions))
        topics, qids = queue_selection(self.conditions)   # pushed, and the topic / queueId options
        if self.filter.topics:
            topics = set(self.filter.topics) if topics is None else topics & self.filter.topics
        if self.filter.queue_ids:
            qids = set(self.filter.queue_ids) if qids is None else qids & self.filter.queue_ids
        if (topics or qids) and _opt(self.options, "useConsumeQueue", "false").lower() == "true":
            return self._queue_partitions(topics, qids, min_parts)
        plans = _given_plans(self.options) or _open_plans(self.options, "commitlog", min_parts)
        lo, hi = offset_bounds(self.conditions)
        for plan, _, _ in plans:
            plan.commitlog = [s for s in plan.commitlog
                              if s.file_from_offset + s.start < hi and s.file_from_offset + s.end > lo]
        total = sum(slice_weight(s) for p, _, _ in plans for s in p.commitlog) or 1
        out = []
        for plan, _, _ in plans:
            if split or _opt(self.options, "pack", "true").lower() == "false":
                groups = [[s] for s in plan.commitlog]
            else:
                share = sum(slice_weight(s) for s in plan.commitlog) / total
                groups = pack(plan.commitlog, slice_weight,
                              int(_opt(self.options, "maxPartitionBytes", MAX_PARTITION_BYTES)),
                              max(1, round(min_parts * share)))
            out += [InputPartition((g, plan.delay_level_millis, (plan.broker, plan.root))) for g in groups]
        return out or [InputPartition(([], [], ("", "")))]

    def read(self, partition: InputPartition):
        slices, delays, origin = partition.value
        pa_schema = to_arrow_schema(self.schema, timezone="UTC")
        stats = ReadStats(self.columns)
        reads = (read_queue_records(slices, delays) if isinstance(slices, QueueRead)
                 else (b for s in slices for b in read_commitlog(s, delays)))
        for block in reads:
            stats.records += len(block)
            if self.throttle:
                time.sleep(self.throttle / 1000)
            block = apply_conditions(self.conditions, self.filter.apply(block))
            if len(block):
                stats.add(block)
                yield block_to_arrow(block, self.columns, pa_schema, origin)
        if self.stats_dir:
            stats.write(self.stats_dir)


class ReadStats:
    """What one task read, written to `statsDir` when that option is set (tests, bench):
    records (headers read), rows (records decoded and returned), bytes (their storeSize),
    columns (the fields decoded)."""

    def __init__(self, columns: list[str]):
        self.columns = columns
        self.records = self.rows = self.bytes = 0
        self._fetched = FETCHED[0]

    def add(self, block) -> None:
        self.rows += len(block)
        self.bytes += int(block.array("storeSize").sum())

    def write(self, folder: str) -> None:
        import uuid
        d = {"records": self.records, "rows": self.rows, "bytes": self.bytes, "columns": self.columns,
             "fetched": FETCHED[0] - self._fetched}
        tmp = os.path.join(folder, f".{uuid.uuid4().hex}.tmp")
        with open(tmp, "w") as fh:
            json.dump(d, fh)
        os.replace(tmp, os.path.join(folder, f"read-{uuid.uuid4().hex}.json"))


def read_stats(folder: str) -> dict:
    """The sum of the ReadStats files in `folder`."""
    out = {"tasks": 0, "records": 0, "rows": 0, "bytes": 0, "fetched": 0, "columns": None}
    for name in sorted(os.listdir(folder)):
        if name.startswith("read-") and name.endswith(".json"):
            with open(os.path.join(folder, name)) as fh:
                d = json.load(fh)
            out["tasks"] += 1
            for k in ("records", "rows", "bytes", "fetched"):
                out[k] += d.get(k, 0)
            out["columns"] = d["columns"]
    return out


# ---- consume queues ---------------------------------------------------------------------------
class RocketMQCQDataSource(DataSource):
    default_partitions: int | None = None

    @classmethod
    def name(cls) -> str:
        return "rocketmq-cq"

    def schema(self) -> StructType:
        return spark_schema(CQ_COLUMNS)

    def reader(self, schema: StructType) -> "RocketMQCQReader":
        return RocketMQCQReader(self.options, schema, self.default_partitions)


class _SliceReader(DataSourceReader):
    def __init__(self, options, schema: StructType, default_partitions: int | None = None):
        self.options = {k.lower(): v for k, v in dict(options).items()}
        self.schema = schema
        self.default_partitions = default_partitions or _default_min_partitions()
        flt = MessageFilter.from_options(self.options)
        self.topics, self.queue_ids = flt.topics, flt.queue_ids


class RocketMQCQReader(_SliceReader):
    def partitions(self) -> list[InputPartition]:
        out = []
        for plan, slices, _ in _given_plans(self.options) or _open_plans(self.options, "cq"):
            slices = [s for s in slices or () if (not self.topics or s.topic in self.topics)
                      and (not self.queue_ids or s.queue_id in self.queue_ids)]
            out += [InputPartition((p, (plan.broker, plan.root)))
                    for p in pack(slices, cq_weight, CQ_UNITS_PER_PARTITION, self.default_partitions)]
        return out

    def read(self, partition: InputPartition):
        pa_schema = to_arrow_schema(self.schema, timezone="UTC")
        slices, (broker, root) = partition.value
        for s in slices:
            u = read_cq(s)
            n = len(u["queueOffset"])
            if n:
                u.update(topic=s.topic, queueId=[s.queue_id] * n, file=s.rel_path, broker=broker, store=root)
                yield numpy_to_arrow(u, CQ_COLUMNS, pa_schema, n)


# ---- index ------------------------------------------------------------------------------------
class RocketMQIndexDataSource(DataSource):
    default_partitions: int | None = None

    @classmethod
    def name(cls) -> str:
        return "rocketmq-index"

    def schema(self) -> StructType:
        return spark_schema(INDEX_COLUMNS)

    def reader(self, schema: StructType) -> "RocketMQIndexReader":
        return RocketMQIndexReader(self.options, schema, self.default_partitions)


class RocketMQIndexReader(_SliceReader):
    def partitions(self) -> list[InputPartition]:
        out = []
        for plan, _, slices in _given_plans(self.options) or _open_plans(self.options, "index"):
            out += [InputPartition((p, (plan.broker, plan.root)))
                    for p in pack(slices or [], index_weight, INDEX_ENTRIES_PER_PARTITION, self.default_partitions)]
        return out

    def read(self, partition: InputPartition):
        pa_schema = to_arrow_schema(self.schema, timezone="UTC")
        slices, (broker, root) = partition.value
        for s in slices:
            e = read_index(s)
            n = len(e["index"])
            if n:
                e.update(file=os.path.join("index", s.name), broker=broker, store=root)
                yield numpy_to_arrow(e, INDEX_COLUMNS, pa_schema, n)


SOURCES = (RocketMQDataSource, RocketMQCQDataSource, RocketMQIndexDataSource)


def register(spark, partitions: int | None = None) -> None:
    """Register the three sources on `spark` (idempotent) and let Spark push filters to them
    (Python data sources that take filters need spark.sql.python.filterPushdown.enabled).
    `partitions`: how many tasks a read aims at when it is not told (minPartitions); the
    session gives 3 x the cluster's default parallelism (spark_session.register_sources)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    for cls in SOURCES:
        # a subclass carrying the figure (pickled by value to the planner, which has no SparkContext)
        spark.dataSource.register(type(cls.__name__, (cls,), {"default_partitions": partitions,
                                                              "__module__": cls.__module__}))
