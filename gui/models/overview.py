"""The numbers of the store overview, computed from the engine (no Qt)."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TopicSummary:
    topic: str
    queues: int
    messages: int
    first_time: int = -1
    last_time: int = -1
    lmq: bool = False          # an LMQ (%LMQ%...): its count is CQ units, copies of other topics' records
    batch_units: int = -1      # BatchCQ: batch records (units) holding the `messages`; -1 otherwise

    @property
    def unit(self) -> str:
        """What `messages` counts."""
        if self.lmq:
            return "CQ units (LMQ dispatch copies)"
        if self.batch_units >= 0:
            return f"messages (BatchCQ: in {self.batch_units:,} batch records)"
        return "messages"


@dataclass
class Overview:
    root: str
    read_only: bool
    abort: bool
    lock_holder: int | None
    commitlog_min: int
    commitlog_max: int
    commitlog_files: list[dict]
    file_size: int
    topics: list[TopicSummary]
    queue_count: int
    message_count: int
    first_time: int
    last_time: int
    index_files: list[dict]
    index_entries: int
    lag: list[dict]
    groups: list[str]
    checkpoint: dict
    recovery: dict
    config_files: list[str]
    warnings: list[str] = field(default_factory=list)
    dledger: dict | None = None   # DLedger mode: selfId, term, ledger indexes, checkpoint (info()["dledger"])
    generation: dict = field(default_factory=dict)  # info()'s: version, evidence, defaults
    consume_queue_store: dict = field(default_factory=dict)  # info()["consumeQueueStore"]: files or RocksDB
    lmq_units: int = 0       # units of the LMQ queues: dispatch copies, not in message_count
    lmq_queues: int = 0
    timer_store: dict | None = None  # info()["timerStore"]: timerlog, wheel and timercheck, None without one

    @property
    def commitlog_bytes(self) -> int:
        return max(0, self.commitlog_max - self.commitlog_min)


def compute_overview(store) -> Overview:
    info = store.info()
    topics: dict[str, TopicSummary] = {}
    first_all, last_all = -1, -1
    lmq_units = lmq_queues = 0  # LMQ units are copies of other topics' records: not counted again in the total
    for q in info["queues"]:
        if q.get("lmq"):
            lmq_units += q["maxOffset"] - q["minOffset"]
            lmq_queues += 1
        t = topics.setdefault(q["topic"], TopicSummary(q["topic"], 0, 0))
        t.lmq = t.lmq or bool(q.get("lmq"))
        if "units" in q:   # BatchCQ: queue offsets count inner messages, units count batch records
            t.batch_units = max(0, t.batch_units) + int(q["units"])
        t.queues += 1
        n = q["maxOffset"] - q["minOffset"]
        t.messages += n
        if n > 0:
            a = store.store_time_at(q["topic"], q["queueId"], q["minOffset"])
            b = store.store_time_at(q["topic"], q["queueId"], q["maxOffset"] - 1)
            if a >= 0:
                t.first_time = a if t.first_time < 0 else min(t.first_time, a)
                first_all = a if first_all < 0 else min(first_all, a)
            if b >= 0:
                t.last_time = max(t.last_time, b)
                last_all = max(last_all, b)
    for name in store.topics():
        topics.setdefault(name, TopicSummary(name, 0, 0))
    lag = store.consumer_lag()
    cl = info["commitlog"]
    return Overview(
        root=info["root"], read_only=info["readOnly"], abort=info["abort"],
        lock_holder=store.broker_holding_lock(),
        commitlog_min=cl["minOffset"], commitlog_max=cl["maxOffset"], commitlog_files=cl["files"],
        file_size=info["config"].get("mappedFileSizeCommitLog", 0),
        topics=sorted(topics.values(), key=lambda t: t.topic),
        queue_count=len(info["queues"]),
        message_count=sum(t.messages for t in topics.values()) - lmq_units,
        first_time=first_all, last_time=last_all,
        index_files=info["indexFiles"],
        index_entries=sum(max(0, f["indexCount"] - 1) for f in info["indexFiles"]),
        lag=lag, groups=sorted({r["group"] for r in lag}),
        checkpoint=info["checkpoint"], recovery=info.get("recovery", {}),
        config_files=info.get("configFiles", []), warnings=list(info.get("warnings", [])),
        dledger=info.get("dledger"),
        generation=info.get("generation", {}),
        consume_queue_store=info.get("consumeQueueStore") or {},
        timer_store=info.get("timerStore"),
        lmq_units=lmq_units, lmq_queues=lmq_queues,
    )
