"""The shape the code keeps (issue 18): small files, the engine's layers, one definition per rule.

lint-imports (run by `make test`) holds the import contracts; these tests hold what it cannot:
file sizes, and names that must be defined once."""
from __future__ import annotations

import ast
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 600
MEDIAN = 150


def sources(*suffixes: str) -> list[Path]:
    out = []
    for pkg in ("engine", "gui"):
        out += [p for p in (ROOT / pkg).rglob("*") if p.suffix in suffixes and "__pycache__" not in p.parts]
    return sorted(out)


def lines(p: Path) -> int:
    return len(p.read_text(encoding="utf-8").splitlines())


def test_every_engine_and_gui_file_is_under_600_lines():
    big = {str(p.relative_to(ROOT)): lines(p) for p in sources(".py", ".pyx", ".pxi", ".pxd") if lines(p) >= LIMIT}
    assert not big, f"files of {LIMIT} lines or more: {big}"


def test_median_python_file_is_short():
    sizes = [lines(p) for p in sources(".py")]
    assert statistics.median(sizes) < MEDIAN, statistics.median(sizes)


def test_the_engine_has_its_layer_packages():
    for layer in ("format", "files", "store", "analysis", "scan", "cli"):
        assert (ROOT / "engine" / layer / "__init__.py").is_file(), layer
    # nothing but the base modules lives beside the layers
    loose = {p.name for p in (ROOT / "engine").glob("*.py")}
    assert loose <= {"__init__.py", "__main__.py", "config.py", "errors.py", "tasks.py"}, loose


def public_definitions() -> dict[str, list[str]]:
    where: dict[str, list[str]] = defaultdict(list)
    for p in sources(".py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                where[node.name].append(str(p.relative_to(ROOT)))
    return where


def test_rules_shared_by_cli_and_gui_are_defined_once():
    where = public_definitions()
    for name in ("validate_topic", "parse_time", "preview", "CancelToken", "Progress", "Cancelled"):
        assert len(where.get(name, [])) <= 1, (name, where[name])


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    r = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    kept = [ln for ln in r.stdout.splitlines() if ln.rstrip().endswith("KEPT")]
    assert len(kept) >= 5, r.stdout


# ---- the compiled layer (issue 31) -------------------------------------------------------------
ACCEL = ROOT / "engine" / "accel"
UNIT_LIMIT = 800
_IMPORT = __import__("re").compile(r"^\s*(?:from\s+([\w.]+)\s+c?import|c?import\s+([\w.]+))", __import__("re").M)
_INCLUDE = __import__("re").compile(r'^include\s+"([^"]+)"', __import__("re").M)


def compile_unit(pyx: Path) -> list[Path]:
    """A .pyx and every .pxi it includes (transitively): what one C file is made of."""
    out, todo = [], [pyx]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += [ACCEL / name for name in _INCLUDE.findall(p.read_text(encoding="utf-8"))]
    return out


def test_every_compile_unit_is_at_most_800_lines():
    """The size rule counts a .pyx together with its includes: splitting a module into .pxi files
    does not make its compile unit smaller."""
    big = {p.name: sum(lines(q) for q in compile_unit(p)) for p in ACCEL.glob("*.pyx")}
    assert {k: v for k, v in big.items() if v > UNIT_LIMIT} == {}, big


def test_the_compiled_layer_imports_nothing_above_format():
    """lint-imports cannot read Cython: every import and cimport of engine/accel's sources
    reaches only engine.accel, engine.format and engine.errors (the bottom of the engine)."""
    bad = []
    for p in sorted(ACCEL.glob("*.p*")):
        if p.suffix not in (".pyx", ".pxi", ".pxd"):
            continue
        for a, b in _IMPORT.findall(p.read_text(encoding="utf-8")):
            mod = a or b
            if mod.startswith("engine") and not mod.startswith(("engine.accel", "engine.format", "engine.errors")):
                bad.append((p.name, mod))
            if mod == "engine":
                bad.append((p.name, mod))
    assert bad == []


def test_no_class_or_module_is_bound_into_the_compiled_layer():
    """Kernels are functions over buffers and arguments: nothing hands them a class, a module
    or a module's globals to keep (the grep of issue 31)."""
    pattern = __import__("re").compile(r"bind_[a-z_]*\(|sys\.modules\[|globals\(\)\)")
    hits = [f"{p.relative_to(ROOT)}:{i}" for p in sources(".py", ".pyx", ".pxi", ".pxd")
            for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert hits == []


def test_no_core_class_takes_a_base_only_when_a_kernel_is_built():
    """Compiled state is owned (composition), not inherited: no class in engine/ or gui/ has a
    base written as an expression (`A if KERNEL is None else KERNEL.B`, a call, an attribute
    of a loaded module)."""
    bad = []
    for p in sources(".py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bad += [f"{p.relative_to(ROOT)}:{node.lineno} {node.name}" for b in node.bases
                        if isinstance(b, (ast.IfExp, ast.Call, ast.BoolOp))]
    assert bad == []
