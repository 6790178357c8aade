"""Fuzzing the decoders (hypothesis, and atheris when installed): check_record, the bulk
recovery walk against check_record, IndexFile walks, ConsumeQueue units inside a real store,
the fastjson config parser, property strings, message ids. Each target runs in a child process
with an address-space cap and a per-example time limit (fuzz_driver.py): a hang, an untyped
exception, a broken invariant or a memory blow-up fails the test with the falsifying input."""
from __future__ import annotations

import importlib.util
import json
import subprocess

import pytest

from relsupport import FIGURES, HERE, PY, child_env, is_soak, scale, seed_for

# target: (examples under make test, examples under make soak)
TARGETS = {"record": (400, 40_000), "scan": (300, 30_000), "index": (150, 15_000), "cq": (50, 4_000),
           "config": (200, 20_000), "props": (200, 20_000), "ids": (100, 5_000)}


def _run(args, timeout):
    p = subprocess.run([PY, str(HERE / "fuzz_driver.py"), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env=child_env())
    return p


@pytest.mark.parametrize("target", list(TARGETS))
def test_fuzz_target(request, target):
    examples = scale(request, *TARGETS[target])
    seed = seed_for(request, f"fuzz-{target}")
    per_example = 5.0 if is_soak(request) else 2.0
    p = _run([target, "--examples", examples, "--seed", seed, "--timeout", per_example, "--mem-mb", 1024],
             timeout=120 + examples * 0.5)
    ok = p.returncode == 0
    FIGURES.add(request, f"fuzz/{target}", runs=examples, faultsInjected=examples, messagesChecked=0,
                failures=0 if ok else 1, **({} if ok else {"seeds": [seed]}))
    assert ok, f"fuzz target {target} failed (seed {seed}):\n{p.stdout[-2000:]}\n{p.stderr[-6000:]}"
    line = json.loads(p.stdout.strip().splitlines()[-1])
    assert line["examples"] >= min(examples, 10)


def test_fuzz_atheris_record(request):
    if importlib.util.find_spec("atheris") is None:
        pytest.skip("atheris not installed (pip install atheris): coverage-guided fuzzing skipped")
    runs = scale(request, 20_000, 2_000_000)
    chunk = 200_000  # libFuzzer's own bookkeeping grows ~1 KiB per run: fresh processes keep it bounded
    seed = seed_for(request, "atheris")
    done = 0
    while done < runs:
        n = min(chunk, runs - done)
        p = _run(["atheris-record", "--runs", n, "--seed", (seed + done) % 2 ** 31], timeout=120 + n / 1000)
        FIGURES.add(request, "fuzz/atheris-record", runs=n, faultsInjected=n, failures=int(p.returncode != 0),
                    **({} if p.returncode == 0 else {"seeds": [seed]}))
        assert p.returncode == 0, p.stderr[-6000:]
        done += n


def test_memory_cap_is_real():
    """The cap the fuzz targets run under does stop a runaway allocation (MemoryError, exit 1)."""
    code = ("import resource,sys; resource.setrlimit(resource.RLIMIT_AS, (1 << 30, resource.RLIM_INFINITY))\n"
            "try:\n    b = bytearray(2 << 30)\nexcept MemoryError:\n    sys.exit(3)\n")
    assert subprocess.run([PY, "-c", code]).returncode == 3
