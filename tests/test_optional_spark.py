"""Spark and Arrow are optional: the store, the CLI and the browser import without them
(engine.scan loads pyspark lazily, only when a Spark job runs)."""
import subprocess
import sys


def test_core_modules_do_not_load_pyspark_or_pyarrow():
    code = ("import sys, engine.cli.app, engine.store.message_store, engine.scan.local, gui.main_window\n"
            "engine.cli.app.build_parser()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyarrow', 'py4j')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
