"""The byte layouts are declared once in engine/format and repeated in engine/format/layout.pxd
for the compiled kernels: every constant of the .pxd must equal the Python one."""
import re
from pathlib import Path

import pytest

from engine.format import cq_unit, index_layout, record

PXD = Path(__file__).resolve().parents[1] / "engine" / "format" / "layout.pxd"
MODULES = (record, cq_unit, index_layout)


def pxd_constants() -> dict[str, int]:
    out = {}
    for line in PXD.read_text().splitlines():
        m = re.match(r"\s+([A-Z][A-Z0-9_]*)\s*=\s*(-?(?:0x[0-9A-Fa-f]+|\d+))\s*$", line)
        if m:
            out[m.group(1)] = int(m.group(2), 0)
    return out


def test_pxd_declares_constants():
    assert len(pxd_constants()) >= 40


@pytest.mark.parametrize("name,value", sorted(pxd_constants().items()))
def test_pxd_constant_equals_python(name, value):
    owners = [m for m in MODULES if hasattr(m, name)]
    assert len(owners) == 1, f"{name} must be declared in exactly one engine/format module"
    assert getattr(owners[0], name) == value


def test_python_constants_are_all_in_the_pxd():
    """Every upper-case int of the layout modules is in the .pxd (the kernels see them all)."""
    pxd = pxd_constants()
    for m in MODULES:
        for name, v in vars(m).items():
            if name.isupper() and type(v) is int:
                assert pxd.get(name) == v, f"{m.__name__}.{name} missing from layout.pxd"


def test_record_size_formula():
    assert record.MIN_RECORD_SIZE == 92
    assert record.record_size(8, 8, 3, 1, 5, -1) == 74 + 16 + 3 + 1 + 5
    assert record.record_size(20, 8, -1, 2, 5, 10) == 74 + 28 + 2 + 5 + 10
    assert index_layout.index_file_size(5_000_000, 20_000_000) == 420_000_040
