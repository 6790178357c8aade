"""The `lineage` and `fates` scan jobs, the part both engines share: which record columns they
read, how a record finds its life (its UNIQ_KEY; an op message through the half whose queue
offset its body holds), the one function that turns a life's records into its row (the rules
of engine.analysis.lineage, the same as `rmqstore lineage`), and the fates summary. The local
engine (engine.scan.local) groups in a dict, Spark (engine.scan.spark_lineage) with groupByKey;
each calls `life_row` on every group, so both give the same rows.

    lineage  kind, finalState, originalOffset, topic, keys, group, retries, delayLevel, txAction,
             dueTimestamp, uniqKey, records, consumedBy    (one row per life, by originalOffset)
    fates    topic, group, lives, delivered, resent, retried, deadLettered, pending, committed,
             rolledBack, unresolved                        (per topic and retry group; group is
             null for lives that were never sent back)
"""
from __future__ import annotations

from engine.analysis.lineage import HALF_TOPIC, OP_TOPIC, LifeRules, Lineage, op_body_offsets

COLUMNS = ["topic", "queueId", "queueOffset", "commitLogOffset", "storeSize", "sysFlag", "bornTimestamp",
           "storeTimestamp", "reconsumeTimes", "preparedTransactionOffset", "properties", "msgId", "uniqKey",
           "tags", "keys", "tagsCode"]
ROW_COLUMNS = ["kind", "finalState", "originalOffset", "topic", "keys", "group", "retries", "delayLevel",
               "txAction", "dueTimestamp", "uniqKey", "records", "consumedBy"]
FATES = {"delivered": "delivered", "resent": "resent", "dead-lettered": "deadLettered", "committed": "committed",
         "rolled-back": "rolledBack", "unresolved": "unresolved"}
FATE_COLUMNS = ["lives", "delivered", "resent", "retried", "deadLettered", "pending", "committed", "rolledBack",
                "unresolved"]


class RecordView:
    """A scanned record with the attributes the lineage rules read (a Message's names)."""
    __slots__ = tuple(COLUMNS) + ("body",)

    def __init__(self, row: dict, body: bytes = b""):
        for c in COLUMNS:
            setattr(self, c, row[c])
        self.properties = dict(self.properties or {})
        self.body = body or b""


def own_key(uniq_key, offset: int) -> str:
    """The life a record belongs to, by itself: its UNIQ_KEY, else its own offset."""
    return uniq_key or f"@{offset}"


def life_row(records, rules: LifeRules) -> dict:
    """The row of one life from its records (any order)."""
    life = rules.life_of(records)
    row = {k: life.get(k) for k in ROW_COLUMNS if k not in ("records", "consumedBy")}
    row["records"] = len(life["records"])
    row["consumedBy"] = sorted(g for g, c in life["consumption"].items() if c["consumed"])
    return row


def finish(rows: list[dict], store) -> list[dict]:
    """Pending lives' due times from the store's own schedule queue units (the deliver time
    CommitLog computed with the broker's level table, which the store's config may not know)."""
    pending = [r for r in rows if r["finalState"] in ("pending-delay", "pending-retry")]
    if pending:
        lin = Lineage(store)
        for r in pending:
            lives = lin.lives(lin.seeds(offset=r["originalOffset"]))
            if lives and lives[0]["originalOffset"] == r["originalOffset"]:
                r["dueTimestamp"] = lives[0].get("dueTimestamp")
    return rows


def selected(rows: list[dict], params) -> list[dict]:
    """--topic picks lives by their topic (a life's copies live in other topics: the records
    themselves are never filtered)."""
    topics = params.filter.topics
    return [r for r in rows if r["topic"] in topics] if topics else rows


def fate_of(final_state: str) -> str:
    if final_state.startswith("consumed-after-"):
        return "retried"
    if final_state.startswith("pending-"):
        return "pending"
    return FATES.get(final_state, "delivered")


def fates(rows: list[dict]) -> list[dict]:
    """Per (topic, retry group): how many lives ended which way."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = tuple(r[k] for k in ("broker", "topic", "group") if k in r)
        agg = out.get(key)
        if agg is None:
            agg = out[key] = dict(zip([k for k in ("broker", "topic", "group") if k in r], key),
                                  **{c: 0 for c in FATE_COLUMNS})
        agg["lives"] += 1
        agg[fate_of(r["finalState"])] += 1
    return [out[k] for k in sorted(out, key=lambda k: tuple("" if v is None else v for v in k))]


def local_rows(blocks, rules: LifeRules) -> list[dict]:
    """The local engine's lineage rows: records grouped by life in a dict, ops joined to their
    halves once every record is read."""
    lives: dict[str, list] = {}
    halves: dict[tuple[int, int], str] = {}
    ops: list[RecordView] = []
    for b in blocks:
        cols = {c: b.column(c) for c in COLUMNS}
        cols = {c: v.tolist() if hasattr(v, "tolist") else v for c, v in cols.items()}
        bodies = None
        for i in range(len(cols["topic"])):
            row = {c: cols[c][i] for c in COLUMNS}
            t = row["topic"]
            if t == OP_TOPIC:
                bodies = bodies if bodies is not None else b.column("body")
                ops.append(RecordView(row, bytes(bodies[i])))
                continue
            key = own_key(row["uniqKey"], row["commitLogOffset"])
            lives.setdefault(key, []).append(RecordView(row))
            if t == HALF_TOPIC:
                halves[(row["queueId"], row["queueOffset"])] = key
    for op in ops:
        key = next((halves[(op.queueId, q)] for q in op_body_offsets(op.properties.get("TAGS"), op.body)
                    if (op.queueId, q) in halves), None)
        lives.setdefault(key or own_key(None, op.commitLogOffset), []).append(op)
    rows = [life_row(recs, rules) for recs in lives.values()]
    return sorted(rows, key=lambda r: r["originalOffset"])
