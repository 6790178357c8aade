"""The Java side's process: StoreBench.java compiled against RocketMQ's jars and run, one JSON
object a line (bench/java_side.py sets its figures beside ours)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "java" / "StoreBench.java"
BUILD = HERE.parent / "build" / "javabench"


class JavaSideError(RuntimeError):
    """The Java side could not be built or run (the message says why)."""


def java_major(java: str = "java") -> int:
    out = subprocess.run([java, "-version"], capture_output=True, text=True).stderr
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not m:
        raise JavaSideError(f"cannot read the Java version from: {out.strip()[:200]}")
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 else major   # "1.8.0_x" is Java 8


def compile_driver(lib: Path, out: Path = BUILD) -> Path:
    """javac StoreBench.java against lib/* into `out`; returns `out`."""
    lib = Path(lib)
    if not lib.is_dir() or not list(lib.glob("rocketmq*.jar")):
        raise JavaSideError(f"JAVA_LIB={lib}: no rocketmq*.jar there (use the lib/ folder of a RocketMQ "
                            "4.9.7 binary distribution, see bench/README.md)")
    if shutil.which("javac") is None or shutil.which("java") is None:
        raise JavaSideError("the Java side needs a JDK (javac and java on PATH)")
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["javac", "-nowarn", "-encoding", "UTF-8", "-cp", f"{lib}{os.sep}*", "-d", str(out),
                        str(SOURCE)], capture_output=True, text=True)
    if r.returncode != 0:
        raise JavaSideError(f"javac StoreBench.java against {lib} failed:\n{r.stderr.strip()[-2000:]}")
    return out


def java_command(lib: Path, classes: Path = BUILD) -> list[str]:
    cmd = ["java", "-Xms1g", "-Xmx2g"]
    if java_major() >= 9:  # RocketMQ 4.9 maps files through sun.nio.ch and unmaps by reflection
        cmd += ["--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED"]
    return cmd + ["-cp", f"{classes}{os.pathsep}{Path(lib)}{os.sep}*", "StoreBench"]


def parse_lines(text: str) -> list[dict]:
    """The driver's JSON objects, one a line; anything else on stdout (a logger) is skipped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if isinstance(d, dict) and "workload" in d:
                out.append(d)
    return out


def run_java(cmd: list[str], *args, timeout: float = 1200) -> dict[str, dict]:
    """Run one driver workload; its JSON lines by workload name."""
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    lines = parse_lines(r.stdout)
    if r.returncode != 0 or not lines:
        raise JavaSideError(f"StoreBench {' '.join(map(str, args))} exited {r.returncode}:\n"
                            f"{(r.stderr or r.stdout).strip()[-2000:]}")
    return {d["workload"]: d for d in lines}


DISK_FULL_RATIO = 0.90        # RocketMQ 4.9.7's diskSpaceWarningLevelRatio: above it the store refuses puts
JAVA_HEADROOM = 8 << 30       # what the section's stores add at most while a Java store is open


def disk_room(path: Path) -> None:
    """RocketMQ marks its store not writable (puts answer SERVICE_NOT_AVAILABLE) once the disk
    under it is more than 90% used, counted as UtilAll.getDiskPartitionSpaceUsedPercent does:
    used / (used + usable). Refused here, with that reason, rather than half way through."""
    st = os.statvfs(path)
    used, usable = (st.f_blocks - st.f_bfree) * st.f_frsize, st.f_bavail * st.f_frsize
    ratio = (used + JAVA_HEADROOM) / max(1, used + usable)
    if ratio > DISK_FULL_RATIO:
        raise JavaSideError(f"the disk under {path} would be {ratio:.0%} used with the section's stores (RocketMQ "
                            f"refuses puts above {DISK_FULL_RATIO:.0%}, diskSpaceWarningLevelRatio): free "
                            f"{(ratio - DISK_FULL_RATIO) * (used + usable) / (1 << 30):.1f} GiB more")
