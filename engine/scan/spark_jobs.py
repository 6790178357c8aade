"""The scan jobs on Spark, and the runner that reports their progress and cancels them.

The driver plans once from the open store (commitlog slices split so every core has work,
CQ and index slices) and hands the plan to the data sources as an option; aggregation is
Spark SQL. Rows come back in the same shape and order as engine.scan.local's.

`SparkRunner` puts every action of a job into one job group (`setJobGroup` on the thread
that runs the job), polls `statusTracker()` for per-stage task counts, and cancels with
`cancelJobGroup` when the CancelToken fires, from whatever thread fires it. Under Spark
Connect (no SparkContext here) the job's operations carry a tag, cancel is `interruptTag`,
and progress says only that the job runs."""
from __future__ import annotations

import json
import os
import threading
import uuid
from functools import singledispatch

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import Window
from pyspark.sql import functions as F

from engine.scan.columns import MESSAGE_COLUMN_NAMES, row_json
from engine.scan.consistency import (MAX_REPORTED, chain_problems_json, cq_file_size, cq_location, diff_row, index_chain_problems,
                                     index_file_for, index_file_ranges, merge_rows, pair_index_differences, unit_dict)
from engine.scan.jobs import (CSV_COLUMNS, DEFAULT_FILTER_LIMIT, DEFAULT_TOP, DISPATCHED_TYPES, JSON_COLUMNS, PERCENTILES,
                              TRANSACTION_MASK, JobParams, discard, is_uri, percentile_rank, percentile_value, publish,
                              temporary_sibling)
from engine.scan.planning import Plan, plan_commitlog, plan_consume_queues, plan_index, plan_to_json, plans_to_json
from engine.scan.spark_session import is_connect, master_of, parallelism_of
from engine.scan.remote import RemoteStore
from engine.scan.stores import ScanStore, members_of
from engine.scan import consistency_5x as c5
from engine.scan import spark_lineage
from engine.format.body_decode import decoded_json
from engine.format.lmq import LMQ_PREFIX
from engine.store.crash_view import disk_index
from engine.tasks import Cancelled, CancelToken, Progress, ProgressFn, StageProgress


class SparkRunner:
    """Context for one job: job group, progress poller, cancel hook."""

    def __init__(self, spark: SparkSession, progress: ProgressFn | None, cancel: CancelToken,
                 description: str = "rmqstore scan", poll_seconds: float = 0.2):
        self.spark = spark
        self.connect = is_connect(spark)
        self.sc = None if self.connect else spark.sparkContext
        self.progress = progress
        self.cancel = cancel
        self.group = f"rmqstore-{uuid.uuid4().hex[:12]}"
        self.description = description
        self.poll_seconds = poll_seconds
        self._done = threading.Event()
        self._stages: dict[int, StageProgress] = {}
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "SparkRunner":
        if self.connect:
            self.spark.addTag(self.group)
            self.cancel.on_cancel(self._cancel_group)
            if self.progress is not None:
                self.progress(Progress(0, 0, "spark", "tasks", f"running on {master_of(self.spark)}"))
            return self
        self.sc.setJobGroup(self.group, self.description, interruptOnCancel=True)
        self._thread = threading.Thread(target=self._poll, name="rmqstore-scan-progress", daemon=True)
        self._thread.start()
        self.cancel.on_cancel(self._cancel_group)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.connect:
            self.spark.removeTag(self.group)
            if exc is not None and self.cancel.cancelled and not isinstance(exc, Cancelled):
                raise Cancelled("cancelled") from None
            return False
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._report()
        self.sc.setLocalProperty("spark.jobGroup.id", None)
        self.sc.setLocalProperty("spark.job.description", None)
        if exc is not None and self.cancel.cancelled and not isinstance(exc, Cancelled):
            raise Cancelled("cancelled") from None
        return False

    def check(self) -> None:
        self.cancel.raise_if_cancelled()

    def _cancel_group(self) -> None:
        try:
            if self.connect:
                self.spark.interruptTag(self.group)
            else:
                self.sc.cancelJobGroup(self.group)
        except Exception:
            pass  # the context may be stopping; the job fails on its own then

    def _poll(self) -> None:
        while not self._done.wait(self.poll_seconds):
            if self.cancel.cancelled:
                self._cancel_group()   # catches jobs submitted after the first cancel
            self._report()

    def _report(self) -> None:
        try:
            st = self.sc.statusTracker()
            for jid in st.getJobIdsForGroup(self.group):
                job = st.getJobInfo(jid)
                if job is None:
                    continue
                for sid in job.stageIds:
                    info = st.getStageInfo(sid)
                    # a stage with nothing done and nothing running is pending or skipped
                    # (AQE re-plans reuse shuffle output): it is shown once it runs
                    if info is not None and (info.numCompletedTasks or info.numActiveTasks):
                        self._stages[sid] = StageProgress(sid, info.name, info.numCompletedTasks,
                                                          info.numActiveTasks, info.numTasks)
        except Exception:
            return
        if self.progress is not None and not self._stages:
            self.progress(Progress(0, 0, "spark", "tasks", "starting"))
        elif self.progress is not None:
            stages = [self._stages[k] for k in sorted(self._stages)]
            done = sum(s.completed for s in stages)
            total = sum(s.total for s in stages)
            active = [s for s in stages if s.completed < s.total]
            msg = (f"stage {active[0].stage_id}: {active[0].completed}/{active[0].total} tasks" if active
                   else f"{len(stages)} stage(s) done")
            self.progress(Progress(done, total, "spark", "tasks", msg, stages))

    def collect(self, df: DataFrame) -> list:
        self.check()
        rows = df.collect()
        self.check()
        return rows


# ---- loading ---------------------------------------------------------------------------------
class Loader:
    """DataFrames over the stores of a job (ScanStores), all planned once on the driver.
    With several stores the message rows carry `broker` and `store`, and `keys` (the
    grouping keys of a job) start with broker."""

    def __init__(self, spark: SparkSession, members: list[ScanStore], params: JobParams):
        self.spark = spark
        self.members = members
        self.multi = len(members) > 1
        self.store = members[0].store
        self.params = params
        parallelism = parallelism_of(spark)   # the cluster's cores, not this machine's
        self.min_partitions = 3 * parallelism   # a few tasks per core: progress moves, tails stay short
        sizes = [max(1, m.store.max_offset - m.store.min_offset) for m in members]
        self.plans: list[Plan] = []
        for m, size in zip(members, sizes):
            share = max(1, round(self.min_partitions * size / sum(sizes)))
            plan = plan_commitlog(m.store, params.split_bytes, min_partitions=share)
            plan.root, plan.broker = m.path, m.broker
            self.plans.append(plan)
        self.plan = self.plans[0]
        self.root = members[0].path

    def keys(self, *names: str) -> list[str]:
        return (["broker"] if self.multi else []) + list(names)

    def messages(self, columns: list[str], filtered: bool = True) -> DataFrame:
        if self.multi:
            columns = [c for c in ("broker", "store") if c not in columns] + list(columns)
        r = (self.spark.read.format("rocketmq").option("plan", plans_to_json([(p,) for p in self.plans]))
             .option("columns", ",".join(columns)).option("minPartitions", str(self.min_partitions)))
        if self.params.split_bytes:
            r = r.option("pack", "false")
        if filtered:
            for k, v in self.params.filter.to_options().items():
                r = r.option(k, v)
        if self.params.throttle_ms:
            r = r.option("throttleMs", str(self.params.throttle_ms))
        if self.params.stats_dir:
            r = r.option("statsDir", self.params.stats_dir)
        if filtered and self.params.via_consume_queue:
            r = r.option("useConsumeQueue", "true")
        return r.load(self.root)

    def consume_queues(self) -> DataFrame:
        plan = Plan(self.root, broker=self.members[0].broker)
        return (self.spark.read.format("rocketmq-cq")
                .option("plan", plan_to_json(plan, cq=plan_consume_queues(self.store))).load(self.root))

    def index(self) -> DataFrame:
        plan = Plan(self.root, broker=self.members[0].broker)
        return (self.spark.read.format("rocketmq-index")
                .option("plan", plan_to_json(plan, index=plan_index(self.store))).load(self.root))


def _dicts(rows) -> list[dict]:
    return [r.asDict(recursive=False) for r in rows]


# ---- jobs --------------------------------------------------------------------------------------
def topic_stats(ld: Loader, run: SparkRunner):
    """Counts, bytes and times per group, and the exact percentiles of storeSize by the one
    rule of engine.scan.jobs: a (group, storeSize) histogram with running counts gives the
    values at the two ranks; the driver does the interpolation (`percentile_value`)."""
    keys = ld.keys("topic", "queueId") if ld.params.by_queue else ld.keys("topic")
    df = ld.messages(["topic", "queueId", "storeSize", "storeTimestamp", "sysFlag"])
    tran = F.col("sysFlag").bitwiseAND(TRANSACTION_MASK)
    hist = df.groupBy(*keys, "storeSize").agg(F.count(F.lit(1)).alias("c"),
                                              F.sum(F.when(tran.isin(*DISPATCHED_TYPES), 1).otherwise(0)).alias("d"),
                                              F.min("storeTimestamp").alias("first"), F.max("storeTimestamp").alias("last"))
    upto = Window.partitionBy(*keys).orderBy("storeSize").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    hist = hist.withColumn("n", F.sum("c").over(Window.partitionBy(*keys))).withColumn("cum", F.sum("c").over(upto))
    ranks = []
    for name, pct in PERCENTILES.items():
        lower = F.expr(f"((n - 1) * {pct}) div 100")
        ranks += [F.min(F.when(F.col("cum") > lower, F.col("storeSize"))).alias(name + "_lo"),
                  F.min(F.when(F.col("cum") > lower + 1, F.col("storeSize"))).alias(name + "_hi")]
    agg = hist.groupBy(*keys).agg(F.sum("c").alias("messages"), F.sum("d").alias("dispatched"),
                                  F.sum(F.col("storeSize") * F.col("c")).alias("bytes"),
                                  F.min("first").alias("firstStoreTimestamp"), F.max("last").alias("lastStoreTimestamp"),
                                  *ranks)
    rows = []
    for r in _dicts(run.collect(agg.orderBy(*keys))):
        row = {k: r[k] for k in keys}
        row.update(messages=r["messages"], dispatched=int(r["dispatched"]), bytes=r["bytes"],
                   firstStoreTimestamp=r["firstStoreTimestamp"],
                   lastStoreTimestamp=r["lastStoreTimestamp"])
        for name, pct in PERCENTILES.items():
            _, rem = percentile_rank(r["messages"], pct)
            lo, hi = r[name + "_lo"], r[name + "_hi"]
            row[name] = percentile_value(lo, hi if rem else lo, rem)
        rows.append(row)
    return rows, False


def traffic(ld: Loader, run: SparkRunner):
    ms = ld.params.bucket_ms
    df = ld.messages(["topic", "storeSize", "storeTimestamp"])
    ts = F.col("storeTimestamp")
    keys = ld.keys("topic", "bucketStart")
    agg = (df.withColumn("bucketStart", ts - F.pmod(ts, F.lit(ms)))
           .groupBy(*keys).agg(F.count(F.lit(1)).alias("messages"), F.sum("storeSize").alias("bytes")))
    return _dicts(run.collect(agg.orderBy(*keys))), False


def size_histogram(ld: Loader, run: SparkRunner):
    size = F.col("storeSize").cast("long")
    bucket = F.greatest(*[F.when(size >= (1 << k), F.lit(1 << k)).otherwise(F.lit(0)) for k in range(32)])
    df = ld.messages(["storeSize"]).withColumn("sizeFrom", bucket)
    agg = (df.groupBy(*ld.keys("sizeFrom")).agg(F.count(F.lit(1)).alias("messages"), F.sum("storeSize").alias("bytes"))
           .withColumn("sizeTo", F.greatest(F.col("sizeFrom") * 2, F.lit(1)))
           .select(*ld.keys("sizeFrom", "sizeTo", "messages", "bytes")))
    return _dicts(run.collect(agg.orderBy(*ld.keys("sizeFrom")))), False


def filter_messages(ld: Loader, run: SparkRunner):
    limit = DEFAULT_FILTER_LIMIT if ld.params.limit is None else ld.params.limit
    # properties travel as an array of entries: a collected map comes back as a Java HashMap,
    # which loses the record's order (the JSON would differ from --local's)
    order = ["broker", "store", "commitLogOffset"] if ld.multi else ["commitLogOffset"]
    df = (ld.messages(MESSAGE_COLUMN_NAMES).withColumn("properties", F.map_entries("properties"))
          .orderBy(*order).limit(limit + 1))
    rows = []
    for r in _dicts(run.collect(df)):
        row = row_json({**r, "properties": {e[0]: e[1] for e in r["properties"] or ()}}, decoded=ld.params.decode_body)
        rows.append({"broker": r["broker"], "store": r["store"], **row} if ld.multi else row)
    return rows[:limit], len(rows) > limit


def _top(ld: Loader, df: DataFrame, label: str, limit: int | None, run: SparkRunner):
    limit = DEFAULT_TOP if limit is None else limit
    agg = (df.groupBy(*ld.keys("topic", label)).agg(F.count(F.lit(1)).alias("messages"))
           .orderBy(F.desc("messages"), *ld.keys("topic", label)).limit(limit + 1))
    rows = _dicts(run.collect(agg))
    return rows[:limit], len(rows) > limit


def top_keys(ld: Loader, run: SparkRunner):
    df = ld.messages(["topic", "keyList"]).select(*ld.keys("topic"), F.explode(F.array_distinct("keyList")).alias("key"))
    return _top(ld, df, "key", ld.params.limit, run)


def top_tags(ld: Loader, run: SparkRunner):
    df = ld.messages(["topic", "tags"]).where(F.col("tags").isNotNull())
    return _top(ld, df, "tags", ld.params.limit, run)


def duplicates(ld: Loader, run: SparkRunner):
    keys = ld.keys("uniqKey", "topic") if ld.params.per_topic else ld.keys("uniqKey")
    df = ld.messages(["topic", "uniqKey", "commitLogOffset"]).where(F.col("uniqKey").isNotNull())
    agg = (df.groupBy(*keys).agg(F.count(F.lit(1)).alias("copies"),
                                 F.sort_array(F.collect_set("topic")).alias("topics"),
                                 F.sort_array(F.collect_list("commitLogOffset")).alias("commitLogOffsets"))
           .where(F.col("copies") > 1).orderBy(*keys))
    if ld.params.limit is not None:
        agg = agg.limit(ld.params.limit + 1)
    rows = _dicts(run.collect(agg))
    if ld.params.limit is not None and len(rows) > ld.params.limit:
        return rows[:ld.params.limit], True
    return rows, False


def consistency(ld: Loader, run: SparkRunner):
    """One Spark job: expected CQ units grouped per (topic, queueId, queueOffset) fully
    joined with the units on disk, expected index entries per (keyHash, commitLogOffset) fully
    joined with the entries on disk; only the groups that differ come back (as JSON), and
    the driver turns them into difference rows exactly as engine.scan.local does."""
    store = ld.store
    cl_min = store.min_offset
    cq_size = cq_file_size(store)
    msgs = ld.messages(["topic", "queueId", "queueOffset", "physicalOffsetField", "storeSize", "tagsCode", "sysFlag",
                        "commitLogOffset", "indexKeys", "indexKeyHashes"], filtered=False)
    tt = F.col("sysFlag").bitwiseAND(0x0C)
    key = ["topic", "queueId", "queueOffset"]
    simple = msgs.where((tt == 0) | (tt == 8))
    if store.batch_topics:  # their units are in batchconsumequeue/ (consistency_5x.batch_problems)
        simple = simple.where(~F.col("topic").isin(sorted(store.batch_topics)))
    exp = (simple.groupBy(*key)
           .agg(F.sort_array(F.collect_list(F.struct("commitLogOffset", F.col("physicalOffsetField").alias("unitOffset"),
                                                     F.col("storeSize").alias("size"), "tagsCode"))).alias("recs")))
    lmq_on = c5.lmq_active(store)
    cqs = ld.consume_queues().where(F.col("commitLogOffset") >= cl_min)
    act = (cqs.where(~F.col("topic").startswith(LMQ_PREFIX)) if lmq_on else cqs).select(
        *key, F.struct("commitLogOffset", "size", "tagsCode", "file", "position").alias("unit"))
    first = F.col("recs")[0]
    j = exp.join(act, on=key, how="full_outer")
    differs = (F.col("recs").isNull() | F.col("unit").isNull() | (F.size("recs") > 1)
               | (first["unitOffset"] != F.col("unit.commitLogOffset")) | (first["size"] != F.col("unit.size"))
               | (first["tagsCode"] != F.col("unit.tagsCode")))
    parts = [j.where(differs).select(F.lit("cq").alias("kind"), F.to_json(F.struct(*key, "recs", "unit")).alias("payload"))]
    if store.cfg.messageIndexEnable:
        keys = (msgs.select("topic", F.col("physicalOffsetField").alias("commitLogOffset"),
                            F.posexplode(F.arrays_zip("indexKeys", "indexKeyHashes")).alias("pos", "k"))
                .select("topic", "commitLogOffset", "pos", F.col("k.indexKeys").alias("key"),
                        F.col("k.indexKeyHashes").alias("keyHash")))
        exp_i = keys.groupBy("keyHash", "commitLogOffset").agg(
            F.count(F.lit(1)).alias("ce"), F.min_by(F.struct("key", "topic"), F.col("pos")).alias("first"))
        act_i = (ld.index().where(F.col("commitLogOffset") >= cl_min).groupBy("keyHash", "commitLogOffset")
                 .agg(F.count(F.lit(1)).alias("ca"),
                      F.sort_array(F.collect_list(F.struct("file", "index", "position"))).alias("entries")))
        jj = (exp_i.join(act_i, on=["keyHash", "commitLogOffset"], how="full_outer").fillna(0, subset=["ce", "ca"])
              .where(F.col("ce") != F.col("ca")))
        parts.append(jj.select(F.lit("index").alias("kind"),
                               F.to_json(F.struct("keyHash", "commitLogOffset", "ce", "ca", "first", "entries")).alias("payload")))
    if lmq_on:
        parts.append(_lmq_differences(ld, simple, cqs))
    diff = parts[0]
    for p in parts[1:]:
        diff = diff.unionByName(p)
    rows: list[dict] = []
    missing, extra = [], []
    lmq_exp: dict = {}
    lmq_act: dict = {}
    ranges = index_file_ranges(store)
    for r in run.collect(diff.limit(MAX_REPORTED)):
        d = json.loads(r.payload)
        if r.kind == "cq":
            t, qid, q = d["topic"], d["queueId"], d["queueOffset"]
            recs, unit = d.get("recs") or [], d.get("unit")
            f, pos = cq_location(t, qid, q, cq_size)
            if recs and unit is None:
                e = recs[0]
                rows.append(diff_row(structure="consumequeue", problem="unit missing", file=f, fileOffset=pos,
                                     topic=t, queueId=qid, queueOffset=q, commitLogOffset=e["unitOffset"],
                                     expected=unit_dict(e["unitOffset"], e["size"], e["tagsCode"])))
            elif unit is not None:
                got = unit_dict(unit["commitLogOffset"], unit["size"], unit["tagsCode"])
                if not recs:
                    rows.append(diff_row(structure="consumequeue", problem="unit without record", file=unit["file"],
                                         fileOffset=unit["position"], topic=t, queueId=qid, queueOffset=q,
                                         commitLogOffset=unit["commitLogOffset"], actual=got))
                elif unit_dict(recs[0]["unitOffset"], recs[0]["size"], recs[0]["tagsCode"]) != got:
                    e = recs[0]
                    rows.append(diff_row(structure="consumequeue", problem="unit differs", file=unit["file"],
                                         fileOffset=unit["position"], topic=t, queueId=qid, queueOffset=q,
                                         commitLogOffset=e["unitOffset"],
                                         expected=unit_dict(e["unitOffset"], e["size"], e["tagsCode"]), actual=got))
            for e in recs[1:]:
                rows.append(diff_row(structure="consumequeue", problem="queue offset already used by an earlier record",
                                     file=f, fileOffset=pos, topic=t, queueId=qid, queueOffset=q,
                                     commitLogOffset=e["unitOffset"],
                                     expected=unit_dict(e["unitOffset"], e["size"], e["tagsCode"])))
        elif r.kind == "lmq":
            lmq_exp.update({(d["lmq"], d["phy"]): (e["size"], e["tagsCode"], e["commitLogOffset"])
                            for e in [d.get("e")] if e})
            lmq_act.update({(d["lmq"], d["phy"]): (a["queueOffset"], a["size"], a["tagsCode"], a["file"], a["position"])
                            for a in [d.get("a")] if a})
        else:
            ce, ca = d["ce"], d["ca"]
            if ce > ca:
                for _ in range(ce - ca):
                    missing.append({"keyHash": d["keyHash"], "commitLogOffset": d["commitLogOffset"], "key": d["first"]["key"],
                                    "topic": d["first"]["topic"], "file": index_file_for(ranges, d["commitLogOffset"])})
            else:
                for e in (d.get("entries") or [])[ce:]:
                    extra.append({"keyHash": d["keyHash"], "commitLogOffset": d["commitLogOffset"], "file": e["file"],
                                  "position": e["position"], "index": e["index"]})
    rows += pair_index_differences(missing, extra)
    rows += c5.lmq_problems(lmq_exp, lmq_act, cq_size) + c5.batch_problems(store, cl_min)
    return merge_rows(rows, _chain_problems(store, ld, run, cl_min)), False


@singledispatch
def _chain_problems(store, ld: Loader, run: SparkRunner, cl_min: int) -> list[dict]:
    """index_chain_problems, on the driver for a mapped store."""
    return index_chain_problems(store, cl_min)


@_chain_problems.register
def _(store: RemoteStore, ld: Loader, run: SparkRunner, cl_min: int) -> list[dict]:
    """A store on a filesystem: each index file's slot table and entries are read by a task (a
    Python UDF per file), not by the driver."""
    files = disk_index(store).files
    if not files:
        return []
    from pyspark.sql.types import ArrayType, StringType
    check = F.udf(lambda d: chain_problems_json(d, cl_min), ArrayType(StringType()), useArrow=False)
    df = ld.spark.createDataFrame([(f.to_json(),) for f in files], "d string")
    return [json.loads(r.row) for r in run.collect(df.select(F.explode(check("d")).alias("row")))]


def _lmq_differences(ld: Loader, simple: DataFrame, cqs: DataFrame) -> DataFrame:
    """LMQ units expected from the records' INNER_MULTI_DISPATCH (5.3.3's dispatch rules)
    fully joined with the LMQ units on disk by (lmq, commitlog offset); the pairs that differ."""
    from pyspark.sql.types import ArrayType, StringType
    targets = F.udf(c5.lmq_targets_of, ArrayType(StringType()), useArrow=False)
    props = ld.messages(["topic", "physicalOffsetField", "storeSize", "tagsCode", "sysFlag", "commitLogOffset",
                         "properties"], filtered=False)
    tt = F.col("sysFlag").bitwiseAND(0x0C)
    if ld.store.batch_topics:
        props = props.where(~F.col("topic").isin(sorted(ld.store.batch_topics)))
    e = (props.where(((tt == 0) | (tt == 8)) & F.col("properties").getItem("INNER_MULTI_DISPATCH").isNotNull())
         .select(F.explode(targets("topic", "properties")).alias("lmq"), F.col("physicalOffsetField").alias("phy"),
                 F.struct(F.col("storeSize").alias("size"), "tagsCode", "commitLogOffset").alias("e")))
    a = cqs.where(F.col("topic").startswith(LMQ_PREFIX)).select(
        F.col("topic").alias("lmq"), F.col("commitLogOffset").alias("phy"),
        F.struct("queueOffset", "size", "tagsCode", "file", "position").alias("a"))
    j = e.join(a, on=["lmq", "phy"], how="full_outer")
    differs = F.col("e").isNull() | F.col("a").isNull() | (F.col("e.size") != F.col("a.size")) | (
        F.col("e.tagsCode") != F.col("a.tagsCode"))
    return j.where(differs).select(F.lit("lmq").alias("kind"), F.to_json(F.struct("lmq", "phy", "e", "a")).alias("payload"))


class _HadoopFS:
    """The session's Hadoop FileSystem for a URI (hdfs://, s3a://, file:...): exists, delete,
    rename and a count of part files, asked on the driver through the JVM; None under
    Spark Connect (no JVM here)."""

    def __init__(self, spark: SparkSession, uri: str):
        jvm = getattr(spark, "_jvm", None) or getattr(spark.sparkContext, "_jvm", None)
        self.jvm = jvm
        self.conf = spark.sparkContext._jsc.hadoopConfiguration()
        self.fs = jvm.org.apache.hadoop.fs.Path(uri).getFileSystem(self.conf)

    def path(self, uri: str):
        return self.jvm.org.apache.hadoop.fs.Path(uri)

    def exists(self, uri: str) -> bool:
        return bool(self.fs.exists(self.path(uri)))

    def delete(self, uri: str) -> None:
        self.fs.delete(self.path(uri), True)

    def rename(self, src: str, dst: str) -> None:
        if not self.fs.rename(self.path(src), self.path(dst)):
            raise OSError(f"cannot rename {src} to {dst}")

    def part_files(self, uri: str) -> int:
        found = self.fs.globStatus(self.path(uri.rstrip("/") + "/part-*"))
        return len(found) if found is not None else 0


def export(ld: Loader, run: SparkRunner):
    """A directory of part files at params.out (parquet: every column, body binary; jsonl:
    Message.to_json() objects; csv: the to_json fields, properties as JSON, body base64).
    A local path is written as a file:// URI and published with the local rules; any other
    URI goes to Spark's writer untouched and is published by a rename in its filesystem."""
    p = ld.params
    if is_connect(ld.spark):
        return _export_connect(ld, run)
    remote = is_uri(p.out)
    final = p.out if remote else os.path.abspath(p.out)
    fs = _HadoopFS(ld.spark, final) if remote else None
    if (fs.exists(final) if remote else os.path.lexists(final)) and not p.overwrite:
        raise FileExistsError(f"{final} exists (use --overwrite)")
    out = temporary_sibling(final)  # renamed to `final` when every task has written its part
    df, obs = _export_frame(ld)
    w = df.write.mode("overwrite")
    target = out if remote else "file://" + out
    try:
        run.check()
        _write(w, p.format, target)
        run.check()
        if remote:
            if fs.exists(final):
                fs.delete(final)
            fs.rename(out, final)
        else:
            publish(out, final, p.overwrite)
    except BaseException:
        if remote:
            try:
                fs.delete(out)
            except Exception:
                pass
        else:
            discard(out)
        raise
    if remote:
        files = fs.part_files(final)
    else:
        files = len([n for n in os.listdir(final) if n.startswith("part-")]) if os.path.isdir(final) else 0
    return [{"path": final, "format": p.format, "rows": int(obs.get["rows"]), "files": files}], False


def _export_connect(ld: Loader, run: SparkRunner):
    """Under Spark Connect the server writes: straight to the target (a path there, or a URI),
    refusing an existing one unless --overwrite; no rename, no listing from here."""
    p = ld.params
    target = p.out if is_uri(p.out) else "file://" + os.path.abspath(p.out)
    df, obs = _export_frame(ld)
    run.check()
    _write(df.write.mode("overwrite" if p.overwrite else "error"), p.format, target)
    return [{"path": p.out, "format": p.format, "rows": int(obs.get["rows"]), "files": None}], False


def _write(w, fmt: str, target: str) -> None:
    if fmt == "parquet":
        w.parquet(target)
    elif fmt == "jsonl":
        w.text(target)
    else:   # RFC 4180: a quote inside a field is doubled (Spark's default escape is a backslash);
        # and Spark's writer trims spaces around values unless told not to (' k ' stays ' k ')
        (w.option("header", "true").option("quote", '"').option("escape", '"')
         .option("ignoreLeadingWhiteSpace", "false").option("ignoreTrailingWhiteSpace", "false").csv(target))


def _export_frame(ld: Loader):
    """The rows of an export in its format's columns, and the Observation counting them."""
    from pyspark.sql import Observation
    p = ld.params
    origin = ["broker", "store"] if ld.multi else []
    df = ld.messages(MESSAGE_COLUMN_NAMES)
    body64 = F.regexp_replace(F.base64("body"), r"[\r\n]", "").alias("body")   # some Spark versions wrap at 76
    dec = F.udf(decoded_json, "string", useArrow=False)("body", "sysFlag") if p.decode_body else None   # in the tasks
    if p.format == "jsonl":   # Message.to_json() lines, "bodyDecoded": false only where it is (as local)
        base = [F.col(c) for c in origin] + [body64 if c == "body" else F.col(c) for c in JSON_COLUMNS]
        keep_nulls = {"ignoreNullFields": "false"}
        line = (F.when(F.col("bodyDecoded"), F.to_json(F.struct(*base), keep_nulls))
                .otherwise(F.to_json(F.struct(*base, "bodyDecoded"), keep_nulls)))
        if p.decode_body:   # decodedBody spliced in as a JSON object, last, as the local rows have it
            line = F.concat(line.substr(F.lit(1), F.length(line) - 1), F.lit(',"decodedBody":'), dec, F.lit("}"))
        df = df.select(line.alias("value"))
    elif p.format == "csv":
        df = df.select(*origin, *[F.to_json("properties").alias("properties") if c == "properties" else
                                  body64 if c == "body" else F.col(c) for c in CSV_COLUMNS],
                       *([dec.alias("decodedBody")] if p.decode_body else []))
    else:
        df = df.select(*origin, *MESSAGE_COLUMN_NAMES)
    obs = Observation("rmqstore-export")
    return df.observe(obs, F.count(F.lit(1)).alias("rows")), obs


JOB_FUNCS = {"topic-stats": topic_stats, "traffic": traffic, "size-histogram": size_histogram,
             "filter": filter_messages, "top-keys": top_keys, "top-tags": top_tags, "duplicates": duplicates,
             "consistency": consistency, "export": export, "lineage": spark_lineage.lineage,
             "fates": spark_lineage.fates}


def run(spark: SparkSession, stores, job: str, params: JobParams, progress: ProgressFn | None,
        cancel: CancelToken):
    """`job` over one store or ScanStores (rows gain broker [and store] with many, as local's)."""
    members = members_of(stores)
    with SparkRunner(spark, progress, cancel, f"rmqstore scan {job}") as runner:
        runner.check()
        if job == "consistency" and len(members) > 1:   # each store against its own CQs and index
            rows = []
            for m in members:
                part, _ = consistency(Loader(spark, [m], params), runner)
                rows += [{"broker": m.broker, "store": m.path, **r} for r in part]
            return rows, False
        return JOB_FUNCS[job](Loader(spark, members, params), runner)
