"""packaging/launch_cli.py, run unfrozen with the bundle's situation (no pyspark, no pyarrow,
maybe no scan module) simulated: what `rmqstore scan` tells the user in the standalone bundle."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
import launch_cli  # noqa: E402


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory):
    from engine.store.demo import generate_demo_store
    root = tmp_path_factory.mktemp("pkg") / "demo"
    generate_demo_store(root, messages=300)
    return root


@pytest.fixture
def no_spark(monkeypatch):
    """Like the bundle: pyspark, pyarrow, py4j and pandas cannot be found."""
    real = launch_cli.have
    monkeypatch.setattr(launch_cli, "have", lambda m: False if m.split(".")[0] in launch_cli.SPARK_PACKAGES
                        else real(m))


def test_command_is_the_first_positional():
    assert launch_cli.command(["scan", "/s", "topic-stats"]) == "scan"
    assert launch_cli.command(["--config", "broker.conf", "info", "/s"]) == "info"
    assert launch_cli.command(["--config=broker.conf", "scan", "/s"]) == "scan"
    assert launch_cli.command(["--version"]) is None


def test_version_goes_straight_through(capsys):
    with pytest.raises(SystemExit) as e:
        launch_cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("rmqstore ")


def test_other_commands_go_straight_through(demo_store, capsys):
    assert launch_cli.main(["info", str(demo_store)]) == 0
    assert "commitlog" in capsys.readouterr().out


def test_scan_on_spark_without_pyspark_suggests_local_and_the_extra(demo_store, no_spark, capsys):
    assert launch_cli.main(["scan", str(demo_store), "topic-stats", "--by-queue"]) == 2
    err = capsys.readouterr().err
    assert f"rmqstore scan {demo_store} topic-stats --by-queue --local" in err
    assert "pip install 'rmqstore[spark]'" in err and "Java runtime 17" in err


def test_local_scan_runs_without_spark(demo_store, no_spark, capsys):
    assert launch_cli.main(["scan", str(demo_store), "topic-stats", "--local"]) == 0
    assert "topic-stats ran on local" in capsys.readouterr().out


def test_parquet_export_without_pyarrow_suggests_other_formats(demo_store, no_spark, tmp_path, capsys):
    out = tmp_path / "x.parquet"
    assert launch_cli.main(["scan", str(demo_store), "export", "--local", "--out", str(out)]) == 2
    assert "--format jsonl or --format csv" in capsys.readouterr().err
    assert not out.exists()


def test_without_the_scan_module(demo_store, monkeypatch, capsys):
    monkeypatch.setattr(launch_cli, "scan_available", lambda: False)
    assert launch_cli.main(["scan", str(demo_store), "topic-stats"]) == 2
    assert "scans are not available in this standalone bundle" in capsys.readouterr().err


def test_help_without_the_scan_module_says_where_scans_went(monkeypatch, capsys):
    from engine.cli import app as cli
    monkeypatch.setattr(launch_cli, "scan_available", lambda: False)
    monkeypatch.setattr(cli, "build_parser", cli.build_parser)      # restored after the test
    with pytest.raises(SystemExit):
        launch_cli.main(["--help"])
    assert "not part of this standalone bundle" in capsys.readouterr().out


def test_a_spark_import_error_becomes_advice(monkeypatch, capsys):
    from engine.cli import app as cli

    def boom(argv):
        raise ModuleNotFoundError("No module named 'pyarrow'", name="pyarrow")
    monkeypatch.setattr(cli, "main", boom)
    assert launch_cli.main(["info", "/nowhere"]) == 2
    assert "this needs pyarrow" in capsys.readouterr().err


def test_browser_launcher_version():
    out = subprocess.run([sys.executable, str(ROOT / "packaging" / "launch_browser.py"), "--version"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("rmqstore-browser ")
