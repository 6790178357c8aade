"""Two figures the internals and Spark issues ask for, on stores of several sizes made of many
small commitlog files (so per-file work shows):

- segment-fill: engine.analysis.store_fill (walk every commitlog file once, topic byte
  ranges, CQ and index fill) against the raw page-cache read of the same commitlog bytes;
- scan-sizes: the Spark data source (topic-stats, local[*]) and the single-process numpy scan
  against the raw read, per store size: where (if anywhere) Spark pays off on this machine;
- scan-pushdown: what the reader decodes for `where("queueId = 1")` and for a one-column read,
  against a full read (rows decoded, bytes, seconds; from the reader's statsDir counts), and the
  bytes a store read by ranges fetches for `where("queueId = 1")` with every header read against
  useConsumeQueue (the queue's CQ units and records only)."""
from __future__ import annotations

from pathlib import Path

from engine import MessageStore, StoreConfig

from . import baselines
from .common import MB, GiB, Row, Timer, log, row
from .workload import MIX, Workload

FILE_SIZE = 16 << 20  # many files: 16 MiB commitlog files


def _store(ctx, size: int) -> Path:
    root = ctx.tmp / f"many-files-{size >> 20}MiB"
    cfg = StoreConfig.from_mapping(dict(mappedFileSizeCommitLog=FILE_SIZE))
    w = Workload(MIX)
    log(f"internals-scan: writing a {size >> 20} MiB store of {FILE_SIZE >> 20} MiB files")
    with MessageStore.create(root, cfg) as s:
        b = 0
        while s.max_offset < size:
            topic, bodies, tags, keys = w.batch(b, 32)
            s.put_messages(topic, bodies, tags=tags, keys=keys)
            b += 1
    return root


def _raw(store) -> tuple[float, int]:
    ranges = [(f.path, 0, f.wrote_position) for f in store.commitlog.files]
    return baselines.raw_read(ranges)


def _read(ctx, spark, store, where: str | None = None, columns: str | None = None, ranges: bool = False,
          **opts) -> tuple[float, dict]:
    """A count through the source; ranges=True: the store as a file:// URI read by byte ranges
    (as a store on HDFS / S3 is), so the stats count the bytes fetched."""
    import tempfile

    from engine.scan.spark_source import read_stats
    stats = tempfile.mkdtemp(dir=ctx.tmp)
    r = spark.read.format("rocketmq").option("statsDir", stats)
    if columns:
        r = r.option("columns", columns)
    if ranges:
        r = r.option("rangedReads", "true")   # listed and read by byte ranges, as on HDFS / S3
    for k, v in opts.items():
        r = r.option(k, v)
    df = r.load(str(store.root))
    if where:
        df = df.where(where)
    with Timer() as t:
        df.count()
    return t.wall, read_stats(stats)


def pushdown_rows(ctx, spark, store, label: str) -> list[Row]:
    """Rows decoded and seconds: where("queueId = 1") and a one-column read against a full read."""
    _read(ctx, spark, store, columns="storeSize")   # warm: the first read of a session pays the workers' start
    full_s, full = _read(ctx, spark, store)
    q_s, q = _read(ctx, spark, store, where="queueId = 1")
    c_s, c = _read(ctx, spark, store, columns="storeSize")
    return [row(f"scan-pushdown queueId=1 {label}", q["rows"], "rows decoded", "full read", full["rows"],
                better="lower", target="reported", bytesDecoded=q["bytes"], fullBytes=full["bytes"],
                headersRead=q["records"], seconds=round(q_s, 3), fullSeconds=round(full_s, 3)),
            row(f"scan-pushdown one column {label}", c_s, "s", "all 29 columns", full_s, better="lower",
                target="reported", columns=c["columns"], rows=c["rows"]),
            *queue_read_rows(ctx, spark, store, label)]


def queue_read_rows(ctx, spark, store, label: str) -> list[Row]:
    """Bytes fetched by ranged reads (a store on a filesystem) for where("queueId = 1"): every
    record header (the pushed filter) against the queue's CQ units and records (useConsumeQueue)."""
    h_s, h = _read(ctx, spark, store, where="queueId = 1", ranges=True)
    q_s, q = _read(ctx, spark, store, where="queueId = 1", ranges=True, useConsumeQueue="true")
    z_s, z = _read(ctx, spark, store, where="queueId = 1", ranges=True, useConsumeQueue="true", queueReadGap="0")
    return [row(f"scan-pushdown queueId=1 via ConsumeQueue {label}", q["fetched"], "bytes fetched",
                "every header read", h["fetched"], better="lower", target="reported", rows=q["rows"],
                headerRows=h["rows"], seconds=round(q_s, 3), headerSeconds=round(h_s, 3),
                fetchedGap0=z["fetched"], secondsGap0=round(z_s, 3))]


def run(ctx) -> list[Row]:
    from engine import analysis as A
    sizes = [64 << 20, 256 << 20] if ctx.quick else [256 << 20, 1 << 30, 4 << 30]
    rows: list[Row] = []
    spark = None
    try:
        from engine.scan.api import run_job
        from engine.scan.spark_session import SparkUnavailable, get_session, stop_session
    except ImportError as e:  # noqa: F841
        run_job = None
    for size in sizes:
        root = _store(ctx, size)
        with MessageStore.open(root) as store:
            raw_s, raw_b = _raw(store)
            raw_mbps = raw_b / raw_s / MB
            with Timer() as t:
                fill = A.store_fill(store, A.CommitLogFillCache())
            rows.append(row(f"segment-fill {size >> 20} MiB", t.wall, "s", "raw mmap read of the same bytes",
                            raw_s, better="lower", target="reported", files=len(store.commitlog.files),
                            commitlogFiles=len(fill.commitlog) if hasattr(fill, "commitlog") else None))
            if run_job is None:
                continue
            with Timer() as t:
                run_job(store, "topic-stats", engine="local")
            local_mbps = raw_b / t.wall / MB
            rows.append(row(f"scan-local {size >> 20} MiB", local_mbps, "MB/s", "raw mmap read", raw_mbps,
                            target="reported"))
            try:
                if spark is None:
                    log("internals-scan: starting Spark")
                    spark = get_session()
                run_job(store, "topic-stats", engine="spark", spark=spark)  # warm
                with Timer() as t:
                    run_job(store, "topic-stats", engine="spark", spark=spark)
                rows.append(row(f"scan-spark {size >> 20} MiB", raw_b / t.wall / MB, "MB/s", "scan-local",
                                local_mbps, target="reported", rawReadMBps=round(raw_mbps),
                                storeGiB=round(size / GiB, 3)))
                rows += pushdown_rows(ctx, spark, store, f"{size >> 20} MiB")
            except SparkUnavailable as e:
                rows.append(row(f"scan-spark {size >> 20} MiB", None, "MB/s", target="reported", missing=str(e)))
        import shutil
        shutil.rmtree(root, ignore_errors=True)
    if spark is not None:
        stop_session()
    return rows
