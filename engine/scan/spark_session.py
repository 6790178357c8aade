"""Get or create the SparkSession scans run on, with the rmqstore data sources registered.

The master comes from the argument, else $RMQSTORE_SPARK_MASTER, else `local[*]`; nothing
else is assumed about the cluster. For local masters the Python workers are this very
interpreter (PYSPARK_PYTHON = sys.executable: they must import `engine`) and Spark binds to
loopback; logs are quiet and there is no console progress bar (progress is ours to show).

A running session elsewhere is reused through Spark Connect: `remote` (or
$RMQSTORE_SPARK_REMOTE), e.g. sc://host:15002; no JVM starts here then (needs pyspark's
connect extra: grpcio, grpcio-status, googleapis-common-protos, pandas).

A local JVM's stdout and stderr (Spark's log4j, and the Python workers' tracebacks, which the
JVM relays: BrokenPipe when a job is cancelled or the process exits) go to `log_path()`, and
so do the py4j/pyspark Python loggers: none of it reaches the terminal or the CLI's stderr."""
from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
from pathlib import Path

DEFAULT_MASTER = "local[*]"
_LOCK = threading.Lock()
_LOG4J = Path(__file__).with_name("log4j2.properties")
LOG_ROTATE_BYTES = 8 << 20   # the log is renamed to spark.log.1 beyond this at the next JVM start


class SparkUnavailable(RuntimeError):
    """Spark cannot start here (no Java runtime, no pyspark)."""


def resolve_master(master: str | None = None) -> str:
    return master or os.environ.get("RMQSTORE_SPARK_MASTER") or DEFAULT_MASTER


def resolve_remote(remote: str | None = None) -> str | None:
    return remote or os.environ.get("RMQSTORE_SPARK_REMOTE") or None


def is_connect(spark) -> bool:
    """A Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def master_of(spark) -> str:
    if is_connect(spark):
        return getattr(spark, "_rmqstore_remote", None) or "sc://"
    return spark.sparkContext.master


def parallelism_of(spark) -> int:
    """The cluster's default parallelism (all executor cores; local[N]: N). Under Spark
    Connect, spark.default.parallelism when the server sets it, else 2 x this machine's CPUs."""
    if not is_connect(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    try:
        return max(1, int(spark.conf.get("spark.default.parallelism")))
    except Exception:   # not set on the server
        return 2 * (os.cpu_count() or 2)


def connect_session(remote: str):
    """A Spark Connect session on `remote` (sc://host:port), with the data sources registered."""
    try:
        from pyspark.sql import SparkSession
        from pyspark.sql.connect.utils import check_dependencies
        check_dependencies()
    except ImportError as e:
        raise SparkUnavailable(f"Spark Connect needs pyspark's connect extra ({e}); "
                               "pip install 'rmqstore[connect]' (grpcio, grpcio-status, "
                               "googleapis-common-protos, pandas)") from None
    _reachable(remote)   # the Connect client retries an unreachable server for minutes
    try:
        spark = SparkSession.builder.remote(remote).getOrCreate()
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    except Exception as e:
        raise SparkUnavailable(f"cannot reach Spark Connect at {remote}: {str(e).strip().splitlines()[0]}") from None
    spark._rmqstore_remote = remote
    register_sources(spark)
    return spark


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and (Path(home) / "bin" / "java").exists()))


def _reachable(remote: str, timeout: float = 5.0) -> None:
    """SparkUnavailable unless sc://host[:port][/;params] accepts a TCP connection (port 15002)."""
    import socket
    from urllib.parse import urlparse
    u = urlparse(remote.split(";")[0])
    if u.scheme != "sc" or not u.hostname:
        raise SparkUnavailable(f"--remote {remote}: expected sc://host:port")
    try:
        socket.create_connection((u.hostname, u.port or 15002), timeout=timeout).close()
    except OSError as e:
        raise SparkUnavailable(f"cannot reach Spark Connect at {remote}: {e.strerror or e}") from None


def get_session(master: str | None = None, memory: str | None = None, conf: dict[str, str] | None = None,
                app_name: str = "rmqstore-scan", remote: str | None = None):
    """The active session when it runs on the requested master, else a new one (an active
    session on another master is stopped first: one JVM per process). With `remote` (or
    $RMQSTORE_SPARK_REMOTE and no `master`): a Spark Connect session instead."""
    remote = resolve_remote(remote) if remote or not master else None
    if remote:
        return connect_session(remote)
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(f"pyspark is not installed ({e}); install rmqstore[spark]") from None
    master = resolve_master(master)
    with _LOCK:
        active = _current(SparkContext, SparkSession)
        if active is not None:
            if active.sparkContext.master == master and (memory is None or _memory_of(active) == memory):
                register_sources(active)
                return active
            active.stop()
        if not java_available():
            raise SparkUnavailable("no Java runtime found (java on PATH or JAVA_HOME): install a JRE 17, "
                                   "e.g. Debian's openjdk-17-jre-headless")
        local = master.startswith("local")
        if local:
            os.environ["PYSPARK_PYTHON"] = sys.executable
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        else:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        b = (SparkSession.builder.master(master).appName(app_name)
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.session.timeZone", "UTC"))
        if _LOG4J.exists():
            b = b.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_LOG4J}")
        if local:
            b = b.config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions",
                                                            str(max(4, 2 * _local_cores(master))))
        if memory:
            b = b.config("spark.driver.memory", memory).config("spark.executor.memory", memory)
        for k, v in (conf or {}).items():
            b = b.config(k, v)
        opts = getattr(b, "_options", None)   # pyspark's builder keeps them there (4.x)
        try:
            if isinstance(opts, dict):
                _launch_gateway(dict(opts))
            spark = b.getOrCreate()
        except Exception as e:  # JVM failed to start: say why in one line
            raise SparkUnavailable(f"cannot start Spark on {master}: {str(e).strip().splitlines()[0]} "
                                   f"(Spark's log: {log_path()})") from None
        spark.sparkContext.setLogLevel("ERROR")
        register_sources(spark)
        return spark


def _local_cores(master: str) -> int:
    """local[N] -> N, local / local[*] -> this machine's CPUs."""
    inside = master[master.find("[") + 1:master.find("]")] if "[" in master else "1"
    n = inside.split(",")[0]
    return int(n) if n.isdigit() else (os.cpu_count() or 2)


def _current(SparkContext, SparkSession):
    """The process's running session, whatever thread asks (getActiveSession is per thread)."""
    if SparkContext._active_spark_context is None:
        return None
    return SparkSession.builder.getOrCreate()


def _memory_of(spark) -> str | None:
    return spark.sparkContext.getConf().get("spark.driver.memory", None)


def register_sources(spark) -> None:
    from engine.scan.spark_source import register
    register(spark, 3 * parallelism_of(spark))   # a few tasks per core of the cluster, not of this machine


def stop_session() -> None:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    with _LOCK:
        s = _current(SparkContext, SparkSession)
        if s is not None:
            s.stop()


def running_session():
    """The process's classic session if one runs (never starts one), else None."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    return _current(SparkContext, SparkSession)


def shutdown() -> None:
    """Stop the session and end its JVM (~450 MB): `stop_session` leaves the gateway JVM
    running until the process exits. The next get_session starts a new one."""
    if "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext
    stop_session()
    with _LOCK:
        gw = SparkContext._gateway
        if gw is None:
            return
        proc = getattr(gw, "proc", None)
        try:
            gw.shutdown()
        finally:
            SparkContext._gateway = SparkContext._jvm = None
            if proc is not None:   # the gateway JVM exits when its stdin closes
                if proc.stdin:
                    proc.stdin.close()
                try:
                    proc.wait(60)
                except Exception:
                    proc.kill()
                    proc.wait()
                    proc.wait()


def log_path() -> Path:
    """Where Spark's JVM, its Python workers and the py4j/pyspark loggers write:
    $RMQSTORE_SPARK_LOG, else the user's cache folder ($XDG_CACHE_HOME or ~/.cache)/rmqstore/spark.log."""
    given = os.environ.get("RMQSTORE_SPARK_LOG")
    if given:
        return Path(given)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "rmqstore" / "spark.log"


def _open_log():
    """The log, opened for appending (renamed to .1 first when past LOG_ROTATE_BYTES); None
    when it cannot be written (then the JVM's output stays on this process's stderr)."""
    path = log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_ROTATE_BYTES:
            path.replace(path.with_name(path.name + ".1"))
        return open(path, "ab", buffering=0)
    except OSError:
        return None


_logged_to: list = []   # the py4j/pyspark logging handler, once


def _route_python_logs(path: Path) -> None:
    """py4j and pyspark log through `logging` (py4j's "Exception while sending command" when the
    JVM goes away); with no handler of the application's, Python's last resort prints them on
    stderr. They go to the Spark log instead."""
    if _logged_to:
        return
    try:
        handler = logging.FileHandler(path, encoding="utf-8")
    except OSError:
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("py4j", "pyspark"):
        lg = logging.getLogger(name)
        if not lg.handlers:
            lg.addHandler(handler)
            lg.propagate = False
    _logged_to.append(handler)


def _launch_gateway(options: dict[str, str]) -> None:
    """Start the JVM as pyspark would (spark-submit with the builder's --conf), but with its
    stdout and stderr in the Spark log; getOrCreate then finds the gateway up. Nothing to do
    when a JVM already runs (or runs elsewhere: PYSPARK_GATEWAY_PORT)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    log = _open_log()
    if log is None:
        return
    _route_python_logs(log_path())
    conf = SparkConf(loadDefaults=False)
    for k, v in options.items():
        conf.set(k, str(v))
    try:
        with SparkContext._lock:
            if SparkContext._gateway is None:
                SparkContext._gateway = launch_gateway(conf, {"stdout": log, "stderr": log})
                SparkContext._jvm = SparkContext._gateway.jvm
    finally:
        log.close()   # the JVM holds its own copy of the descriptor
