"""Compiled fast paths (Cython) for the engine's hot loops. They are optional: when Cython or
a C compiler is missing the build carries on and the engine runs its pure-Python code."""
import glob
import os

from setuptools import Extension, setup

ext_modules = []
if os.environ.get("RMQSTORE_PURE_PYTHON") != "1":
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("note: Cython not installed: building rmqstore without its compiled fast paths")
    else:
        names = sorted(os.path.basename(p)[:-4] for p in glob.glob("engine/accel/*.pyx"))
        ext_modules = cythonize(
            [Extension(f"engine.accel.{n}", [f"engine/accel/{n}.pyx"], optional=True,
                       extra_compile_args=["-O3"]) for n in names],
            language_level=3, quiet=True,
            compiler_directives={"boundscheck": False, "wraparound": False, "cdivision": True})

setup(ext_modules=ext_modules)
