"""Compiled fast paths (Cython, built by `pip install` / `make`) for the loops CPython runs
too slowly: the put loop (_append), getMessage pages (_page), ConsumeQueue recovery scans
(_cq), check's commitlog walk (_check), index chain lengths (_index) and key queries (_query). Every one has a pure-Python
twin in the engine that stays the reference; the compiled one must give the same bytes and
answers (tests compare them). RMQSTORE_PURE_PYTHON=1 turns them all off."""
from __future__ import annotations

import importlib
import os
from operator import attrgetter

PURE = os.environ.get("RMQSTORE_PURE_PYTHON") == "1"


def load(name: str):
    """The compiled module engine.accel.<name>, or None (not built, or turned off)."""
    if PURE:
        return None
    try:
        return importlib.import_module(f"engine.accel.{name}")
    except ImportError:
        return None


def state_property(name: str, doc: str | None = None) -> property:
    """A property of an owner that reads and writes `self.state.<name>`: the state object the
    owner holds (a compiled _state class or its pure twin). The read is operator.attrgetter's,
    so reading it, from Python or from C, runs no Python frame."""
    def fset(self, v):
        setattr(self.state, name, v)
    return property(attrgetter("state." + name), fset, doc=doc)


MODULES = ("_append", "_check", "_cq", "_index", "_message", "_page", "_query", "_record", "_results", "_state", "_wire")   # the .pyx files next to this one


def status() -> dict[str, bool]:
    """Which compiled modules this process uses (make's install step reports it)."""
    return {n: load(n) is not None for n in MODULES}
