"""The one scan runner: runs a job spec (engine.scan.jobs) on the engine asked for.

`scan_task` is the job as the one task model (engine.tasks): a generator yielding Progress
and returning the JobResult, cancelled by its CancelToken (Spark's job group is cancelled
with it) or by closing it. `run_job` is the same with a progress callback, for callers that
only want the answer. The local engine is imported here; the Spark engine only when a job
runs on it, so pyspark stays optional and confined to engine/scan/spark_*.py."""
from __future__ import annotations

import queue
import tempfile
import threading
import time

from engine.scan import local
from engine.scan.jobs import JobParams, JobResult, export_target, validate
from engine.scan.remote import refuse_remote
from engine.scan.stores import members_of
from engine.scan.tier_source import refuse_tier
from engine.tasks import CancelToken, Progress, ProgressFn, Task

ENGINES = ("spark", "local")


def spark_session(master: str | None = None, memory: str | None = None, conf: dict | None = None,
                  remote: str | None = None):
    """The process's SparkSession (started on first use; seconds), or a Spark Connect session
    on `remote` / $RMQSTORE_SPARK_REMOTE (sc://host:15002); raises SparkUnavailable."""
    from engine.scan.spark_session import get_session
    return get_session(master or None, memory or None, conf, remote=remote or None)


def spark_state() -> str | None:
    """The master of the process's running local/cluster SparkSession, None when none runs
    (never starts one; pyspark is not imported for the asking)."""
    from engine.scan.spark_session import running_session
    s = running_session()
    return None if s is None else _master(s)


def stop_spark() -> None:
    """Stop the process's SparkSession and end its JVM (a later job starts a new one)."""
    from engine.scan.spark_session import shutdown
    shutdown()


def _master(spark) -> str:
    from engine.scan.spark_session import master_of
    return master_of(spark)


def run_job(store, job: str, params: JobParams | None = None, engine: str = "spark", spark=None,
            progress: ProgressFn | None = None, cancel: CancelToken | None = None) -> JobResult:
    """Run `job` over the open `store` (or a list of engine.scan.stores.ScanStore: a cluster's
    stores in one job; rows then carry broker, aggregates group by it). engine='spark' uses `spark` (or the process's session);
    engine='local' runs in this process with numpy. Progress goes to `progress`."""
    params = params or JobParams()
    validate(job, params)
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}")
    members = members_of(store)
    if job == "consistency":
        refuse_remote(members, job)
    refuse_tier(members, job, params.via_consume_queue)
    store = members if len(members) > 1 else members[0].store
    if job == "export":
        params.out = export_target([m.path for m in members], params.out)
    cancel = cancel or CancelToken()
    t0 = time.perf_counter()
    if engine == "local":
        rows, truncated = local.run(store, job, params, progress, cancel)
        master = None
    else:
        from engine.scan import spark_jobs
        spark = spark if spark is not None else spark_session()
        rows, truncated = spark_jobs.run(spark, store, job, params, progress, cancel)
        master = _master(spark)
    result = JobResult(job, engine, master, rows, truncated, time.perf_counter() - t0)
    if len(members) > 1:
        result.stores = [{"broker": m.broker, "store": m.path} for m in members]
    return result


_END = object()


def scan_task(store, job: str, params: JobParams | None = None, engine: str = "spark",
              cancel: CancelToken | None = None, master: str | None = None, memory: str | None = None,
              conf: dict | None = None, spark=None, remote: str | None = None) -> Task[JobResult]:
    """`run_job` as a generator: Progress while it runs (on Spark first "starting Spark…"),
    the JobResult at the end. The job runs on a thread of its own (Spark's calls block), so
    progress flows even when a step is long; closing the generator cancels and waits for it."""
    params = params or JobParams()
    validate(job, params)
    cancel = cancel or CancelToken()
    events: queue.Queue = queue.Queue()
    box: dict = {}

    def work() -> None:
        try:
            session = spark
            if engine == "spark" and session is None:
                events.put(Progress(0, 0, "spark", message="starting Spark…"))
                session = spark_session(master, memory, conf, remote)
                cancel.raise_if_cancelled()
            if engine == "spark":
                events.put(Progress(0, 0, "spark", message=f"running {job} on {_master(session)}…"))
            box["result"] = run_job(store, job, params, engine, session, events.put, cancel)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc
        finally:
            events.put(_END)

    thread = threading.Thread(target=work, name=f"rmqstore-scan-{job}", daemon=True)
    thread.start()
    ended = False
    try:
        while (item := events.get()) is not _END:
            yield item
        ended = True
    finally:
        if not ended:  # the caller stopped listening (closed, Ctrl-C): stop the job first
            cancel.cancel()
        thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def warm_up_task(master: str | None = None, memory: str | None = None, conf: dict | None = None,
                 cancel: CancelToken | None = None) -> Task[str]:
    """Start the process's SparkSession before a job asks for it, then run one tiny job on a
    store of a few messages written in a temporary folder: on a fresh session the first job
    on the data sources costs several times a later one (Python workers, the sources' first
    planning, code generation), so the user's first job finds all of it warm. Returns the
    master. A cancel between the steps ends it; the JVM start itself cannot be interrupted."""
    cancel = cancel or CancelToken()
    yield Progress(0, 2, "spark", "steps", "starting Spark…")
    session = spark_session(master, memory, conf)
    cancel.raise_if_cancelled()
    yield Progress(1, 2, "spark", "steps", f"warming up Spark on {_master(session)}…")
    with tempfile.TemporaryDirectory(prefix="rmqstore-warm-up-") as tmp:
        store = _tiny_store(tmp)
        try:
            run_job(store, "topic-stats", JobParams(), "spark", session, None, cancel)
        finally:
            store.close()
    yield Progress(2, 2, "spark", "steps", "Spark ready")
    return _master(session)


def _tiny_store(root: str):
    """A store of small geometry holding a handful of messages in two topics, opened read-only."""
    from engine.config import StoreConfig
    from engine.store.message_store import MessageStore
    cfg = StoreConfig(mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=1000, maxHashSlotNum=64,
                      maxIndexNum=256)
    w = MessageStore.create(root, cfg)
    try:
        for i in range(8):
            w.put_message("WarmUp" if i % 2 else "WarmUpToo", b"warm-up %d" % i, tags="t", keys=f"k{i}")
    finally:
        w.close()
    return MessageStore.open(root, cfg)
