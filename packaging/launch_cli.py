"""Entry script of the bundled `rmqstore` CLI (PyInstaller); the wheel's console script is
`rmqstore = engine.cli.app:main`, which this calls.

The bundle carries no Spark (no pyspark, no pyarrow, no Java): a scan that needs them says
what to do instead (`--local`, another format, or `pip install 'rmqstore[spark]'`) rather than
failing on an import error. Everything else goes straight to engine.cli.app.main."""
import importlib.util
import multiprocessing
import shlex
import sys

SPARK_PACKAGES = {"pyspark", "pyarrow", "py4j", "pandas"}
PIP_SPARK = """\
To run scans on Spark (local[*] or a cluster, --master URL), install rmqstore from Python
with the Spark extra (Python 3.11+; Spark also needs a Java runtime 17):

    python3 -m venv ~/.venvs/rmqstore
    ~/.venvs/rmqstore/bin/pip install 'rmqstore[spark]'
    ~/.venvs/rmqstore/bin/rmqstore scan STORE JOB ...

See the README, "Scans on a Spark cluster"."""

NO_SCAN = """\
rmqstore: scans are not available in this standalone bundle.
""" + PIP_SPARK

NO_SPARK = """\
rmqstore: this standalone bundle cannot run scans on Spark (it has no pyspark and no Java).
Add --local to run this scan here, in this process, with numpy:

    {local_cmd}

""" + PIP_SPARK

NO_PARQUET = """\
rmqstore: Parquet export needs pyarrow, which is not part of this standalone bundle.
Export with --format jsonl or --format csv, or install 'rmqstore[spark]' from Python."""

MISSING = """\
rmqstore: this needs {name}, which is not part of the standalone bundle (Spark and Arrow are
optional).
""" + PIP_SPARK


def have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def scan_available() -> bool:
    try:
        import engine.cli.scan  # noqa: F401
        return True
    except Exception:
        return False


def command(argv):
    """The sub-command name: the first argument that is not an option (or the global
    option --config's value)."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--config":
            skip = True
        elif not a.startswith("-"):
            return a
    return None


def scan_problem(args, argv) -> str | None:
    """Why this parsed `scan` command cannot run without Spark packages, or None."""
    if not getattr(args, "local", False) and not have("pyspark"):
        return NO_SPARK.format(local_cmd=shlex.join(["rmqstore", *argv, "--local"]))
    if getattr(args, "job", None) == "export" and getattr(args, "format", None) == "parquet" and not have("pyarrow"):
        return NO_PARQUET
    return None


def main(argv=None) -> int:
    multiprocessing.freeze_support()
    argv = sys.argv[1:] if argv is None else list(argv)
    from engine.cli import app as cli
    if not scan_available():
        if command(argv) == "scan":
            print(NO_SCAN, file=sys.stderr)
            return 2
        build_parser = cli.build_parser

        def with_epilog():                 # `rmqstore --help` says where scans went
            parser = build_parser()
            parser.epilog = ("scan: bulk scans (Apache Spark) are not part of this standalone bundle; "
                             "`rmqstore scan` says how to get them.")
            return parser
        cli.build_parser = with_epilog
    elif command(argv) == "scan":
        args = cli.build_parser().parse_args(argv)      # exits on bad arguments, as main would
        problem = scan_problem(args, argv)
        if problem:
            print(problem, file=sys.stderr)
            return 2
    try:
        return cli.main(argv)
    except ImportError as e:
        name = (getattr(e, "name", None) or "").split(".")[0]
        if name in SPARK_PACKAGES:
            print(MISSING.format(name=name), file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
