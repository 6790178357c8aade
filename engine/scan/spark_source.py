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
    plan=<json>                         a plan made by engine.scan.planning on an open store
                                        (then the store is not reopened to plan)
    any StoreConfig name                e.g. mappedFileSizeCommitLog=65536 (else detected)

Partitions are commitlog slices (one per file, large files split at record boundaries), CQ
and index file slices; `read()` maps the files itself and yields Arrow record batches."""
from __future__ import annotations

import os
import time
from dataclasses import fields

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, IntegerType, LongType, MapType, StringType, StructField,
                               StructType)

from engine.config import StoreConfig
from engine.scan.arrow import CQ_COLUMNS, INDEX_COLUMNS, block_to_arrow, numpy_to_arrow
from engine.scan.columns import COLUMN_KINDS, MESSAGE_COLUMN_NAMES
from engine.scan.filters import MessageFilter
from engine.scan.planning import (CQ_UNITS_PER_PARTITION, INDEX_ENTRIES_PER_PARTITION, MAX_PARTITION_BYTES, cq_weight,
                       index_weight, pack, plan_commitlog, plan_consume_queues, plan_from_json, plan_index,
                       slice_weight)
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


def _open_store(options):
    from engine.store.message_store import MessageStore
    path = _opt(options, "path")
    if not path:
        raise ValueError("rocketmq data sources need a store path: load(STORE)")
    return MessageStore.open(path, config=store_config(options), read_only=True)


def _columns(options) -> list[str]:
    cols = _opt(options, "columns")
    if not cols:
        return list(MESSAGE_COLUMN_NAMES)
    names = [c.strip() for c in cols.split(",") if c.strip()]
    unknown = [c for c in names if c not in COLUMN_KINDS]
    if unknown:
        raise ValueError(f"unknown rocketmq columns {unknown}; known: {', '.join(COLUMN_KINDS)}")
    return names


def _default_min_partitions() -> int:
    return 2 * (os.cpu_count() or 2)


# ---- messages ---------------------------------------------------------------------------------
class RocketMQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> StructType:
        return spark_schema([(n, COLUMN_KINDS[n]) for n in _columns(self.options)])

    def reader(self, schema: StructType) -> "RocketMQReader":
        return RocketMQReader(self.options, schema)


class RocketMQReader(DataSourceReader):
    def __init__(self, options, schema: StructType):
        self.options = {k.lower(): v for k, v in dict(options).items()}
        self.schema = schema
        self.columns = schema.fieldNames()
        self.filter = MessageFilter.from_options(self.options)
        self.throttle = int(_opt(self.options, "throttleMs", 0))

    def partitions(self) -> list[InputPartition]:
        """Commitlog slices, several per task: a Spark task costs tens of milliseconds of
        its own, so slices are packed into about `minPartitions` tasks of at most
        `maxPartitionBytes` (512 MiB) each. An explicit splitBytes means one slice per task."""
        text = _opt(self.options, "plan")
        split = _opt(self.options, "splitBytes")
        min_parts = int(_opt(self.options, "minPartitions", _default_min_partitions()))
        if text:
            plan = plan_from_json(text)[0]
        else:
            with _open_store(self.options) as store:
                plan = plan_commitlog(store, int(split) if split else None, min_parts)
        if split or _opt(self.options, "pack", "true").lower() == "false":
            groups = [[s] for s in plan.commitlog]
        else:
            groups = pack(plan.commitlog, slice_weight,
                          int(_opt(self.options, "maxPartitionBytes", MAX_PARTITION_BYTES)), min_parts)
        return [InputPartition((g, plan.delay_level_millis)) for g in groups]

    def read(self, partition: InputPartition):
        slices, delays = partition.value
        pa_schema = to_arrow_schema(self.schema, timezone="UTC")
        for s in slices:
            for block in read_commitlog(s, delays):
                if self.throttle:
                    time.sleep(self.throttle / 1000)
                block = self.filter.apply(block)
                if len(block):
                    yield block_to_arrow(block, self.columns, pa_schema)


# ---- consume queues ---------------------------------------------------------------------------
class RocketMQCQDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-cq"

    def schema(self) -> StructType:
        return spark_schema(CQ_COLUMNS)

    def reader(self, schema: StructType) -> "RocketMQCQReader":
        return RocketMQCQReader(self.options, schema)


class _SliceReader(DataSourceReader):
    def __init__(self, options, schema: StructType):
        self.options = {k.lower(): v for k, v in dict(options).items()}
        self.schema = schema
        flt = MessageFilter.from_options(self.options)
        self.topics, self.queue_ids = flt.topics, flt.queue_ids


class RocketMQCQReader(_SliceReader):
    def partitions(self) -> list[InputPartition]:
        text = _opt(self.options, "plan")
        slices = plan_from_json(text)[1] if text else None
        if slices is None:
            with _open_store(self.options) as store:
                slices = plan_consume_queues(store)
        slices = [s for s in slices if (not self.topics or s.topic in self.topics)
                  and (not self.queue_ids or s.queue_id in self.queue_ids)]
        return [InputPartition(p) for p in pack(slices, cq_weight, CQ_UNITS_PER_PARTITION, _default_min_partitions())]

    def read(self, partition: InputPartition):
        pa_schema = to_arrow_schema(self.schema, timezone="UTC")
        for s in partition.value:
            u = read_cq(s)
            n = len(u["queueOffset"])
            if n:
                u.update(topic=s.topic, queueId=[s.queue_id] * n, file=s.rel_path)
                yield numpy_to_arrow(u, CQ_COLUMNS, pa_schema, n)


# ---- index ------------------------------------------------------------------------------------
class RocketMQIndexDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "rocketmq-index"

    def schema(self) -> StructType:
        return spark_schema(INDEX_COLUMNS)

    def reader(self, schema: StructType) -> "RocketMQIndexReader":
        return RocketMQIndexReader(self.options, schema)


class RocketMQIndexReader(_SliceReader):
    def partitions(self) -> list[InputPartition]:
        text = _opt(self.options, "plan")
        slices = plan_from_json(text)[2] if text else None
        if slices is None:
            with _open_store(self.options) as store:
                slices = plan_index(store)
        return [InputPartition(p) for p in pack(slices, index_weight, INDEX_ENTRIES_PER_PARTITION,
                                                 _default_min_partitions())]

    def read(self, partition: InputPartition):
        pa_schema = to_arrow_schema(self.schema, timezone="UTC")
        for s in partition.value:
            e = read_index(s)
            n = len(e["index"])
            if n:
                e["file"] = os.path.join("index", s.name)
                yield numpy_to_arrow(e, INDEX_COLUMNS, pa_schema, n)


SOURCES = (RocketMQDataSource, RocketMQCQDataSource, RocketMQIndexDataSource)


def register(spark) -> None:
    """Register the three sources on `spark` (idempotent)."""
    for cls in SOURCES:
        spark.dataSource.register(cls)
