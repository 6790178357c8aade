"""The `lineage` and `fates` jobs on Spark (engine.scan.lineage_job says what they answer).

Every record gets its life's key (its UNIQ_KEY, else its own offset); an op message takes the
key of the half whose (queueId, queueOffset) its body names (a join, the first named half that
is there, as the local engine does). Lives are grouped on the executors and each group goes
through `life_row` (applyInPandas, so it runs under Spark Connect too): the same function the
local engine calls, so the rows are the same. fates is counted on the executors; only pending
lives' due times are looked up on the driver, in the store's schedule queue."""
from __future__ import annotations

from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, IntegerType, LongType, StringType, StructField, StructType)

from engine.analysis.lineage import HALF_TOPIC, OP_TAG, OP_TOPIC, LifeRules
from engine.scan import lineage_job as LJ

ROW_SCHEMA = [("kind", StringType()), ("finalState", StringType()), ("originalOffset", LongType()),
              ("topic", StringType()), ("keys", StringType()), ("group", StringType()), ("retries", IntegerType()),
              ("delayLevel", IntegerType()), ("txAction", StringType()), ("dueTimestamp", LongType()),
              ("uniqKey", StringType()), ("records", IntegerType()), ("consumedBy", ArrayType(StringType()))]


def _own_key(df):
    """`life`: the record's own life key (lineage_job.own_key)."""
    return df.withColumn("life", F.coalesce(F.col("uniqKey"),
                                            F.concat(F.lit("@"), F.col("commitLogOffset").cast("string"))))


def _records(ld):
    """Every record (filters never apply: a life's copies live in other topics) with `life`."""
    df = ld.messages(LJ.COLUMNS + ["body"], filtered=False)
    df = df.withColumn("body", F.when(F.col("topic") == OP_TOPIC, F.col("body")))
    df = _own_key(df)
    b = ["broker"] if ld.multi else []
    # halves and ops from loads of their own: the data source takes a where() on topic as a
    # pushed-down filter, and scans of one load would share it
    halves = (_own_key(ld.messages(["topic", "queueId", "queueOffset", "uniqKey", "commitLogOffset"], filtered=False))
              .where(F.col("topic") == HALF_TOPIC)
              .select(*b, F.col("queueId").alias("hq"), F.col("queueOffset").alias("hqo"), F.col("life").alias("hlife")))
    ops = (ld.messages(["topic", "tags", "queueId", "commitLogOffset", "body"], filtered=False)
           .where((F.col("topic") == OP_TOPIC) & (F.col("tags") == OP_TAG))
           .select(*b, "commitLogOffset", "queueId",
                   F.posexplode(F.split(F.decode(F.col("body"), "UTF-8"), ",")).alias("pos", "tok"))
           .withColumn("tok", F.trim(F.col("tok")))
           .where(F.col("tok").rlike(r"^-?[0-9]+$"))
           .withColumn("hqo", F.col("tok").cast("long")))
    cond = [F.col("o.queueId") == F.col("h.hq"), F.col("o.hqo") == F.col("h.hqo")]
    if ld.multi:
        cond.append(F.col("o.broker") == F.col("h.broker"))
    matched = (ops.alias("o").join(halves.alias("h"), cond)
               .groupBy(*[F.col(f"o.{c}").alias("mbroker") for c in b], F.col("o.commitLogOffset").alias("opOffset"))
               .agg(F.min_by(F.col("h.hlife"), F.col("o.pos")).alias("halfLife")))
    jcond = F.col("commitLogOffset") == F.col("opOffset")   # only op messages have a row in `matched`
    if ld.multi:
        jcond = jcond & (F.col("broker") == F.col("mbroker"))
    df = (df.join(matched, jcond, "left")
          .withColumn("lifeKey", F.coalesce(F.col("halfLife"), F.col("life")))
          .drop("life", "halfLife", "opOffset", *(["mbroker"] if ld.multi else [])))
    return df


def _life_rows(ld):
    """A DataFrame with one row per life (and broker with several stores)."""
    rules = {m.broker: LifeRules.of_store(m.store) for m in ld.members}
    one = next(iter(rules.values()))
    multi = ld.multi
    fields = ([StructField("broker", StringType())] if multi else []) + [StructField(n, t) for n, t in ROW_SCHEMA]
    names = [f.name for f in fields]

    def per_life(pdf):
        import pandas as pd
        recs = []
        for row in pdf.to_dict("records"):
            props = row["properties"]
            if props is not None and not isinstance(props, dict):
                props = dict(props)
            row["properties"] = props
            for c in ("queueId", "queueOffset", "commitLogOffset", "storeSize", "sysFlag", "bornTimestamp",
                      "storeTimestamp", "reconsumeTimes", "preparedTransactionOffset", "tagsCode"):
                row[c] = int(row[c])
            for c in ("uniqKey", "keys", "tags", "msgId"):
                if not isinstance(row[c], str):
                    row[c] = None
            body = row.get("body")
            recs.append(LJ.RecordView(row, bytes(body) if isinstance(body, (bytes, bytearray)) else b""))
        out = LJ.life_row(recs, rules[pdf["broker"].iloc[0]] if multi else one)
        if multi:
            out["broker"] = pdf["broker"].iloc[0]
        return pd.DataFrame([[out[n] for n in names]], columns=names)

    keys = (["broker"] if multi else []) + ["lifeKey"]
    return _records(ld).groupBy(*keys).applyInPandas(per_life, StructType(fields))


def lineage(ld, run):
    df = _life_rows(ld)
    if ld.params.filter.topics:
        df = df.where(F.col("topic").isin(sorted(ld.params.filter.topics)))
    df = df.orderBy(*(["broker"] if ld.multi else []), "originalOffset")
    limit = ld.params.limit
    if limit is not None:
        df = df.limit(limit + 1)
    rows = [r.asDict(recursive=True) for r in run.collect(df)]
    stores = {m.broker: m.store for m in ld.members}
    by_broker: dict[str, list] = {}
    for r in rows:
        by_broker.setdefault(r.get("broker", ""), []).append(r)
    for broker, part in by_broker.items():
        LJ.finish(part, stores.get(broker, ld.store))
    if limit is not None and len(rows) > limit:
        return rows[:limit], True
    return rows, False


def fates(ld, run):
    df = _life_rows(ld)
    if ld.params.filter.topics:
        df = df.where(F.col("topic").isin(sorted(ld.params.filter.topics)))
    keys = (["broker"] if ld.multi else []) + ["topic", "group"]
    state = F.col("finalState")
    fate = (F.when(state.startswith("consumed-after-"), "retried").when(state.startswith("pending-"), "pending"))
    for s, name in LJ.FATES.items():
        fate = fate.when(state == s, name)
    df = df.withColumn("fate", fate.otherwise("delivered"))
    aggs = [F.count(F.lit(1)).alias("lives")] + [F.sum(F.when(F.col("fate") == c, 1).otherwise(0)).alias(c)
                                                 for c in LJ.FATE_COLUMNS[1:]]
    out = df.groupBy(*keys).agg(*aggs)
    rows = [r.asDict() for r in run.collect(out)]
    for r in rows:
        for c in LJ.FATE_COLUMNS:
            r[c] = int(r[c])
    rows.sort(key=lambda r: tuple("" if r[k] is None else r[k] for k in keys))
    return rows, False
