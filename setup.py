"""Compiled fast paths (Cython) for the engine's hot loops. They are optional: when Cython or
a C compiler is missing, or one module fails to build, the build carries on and the engine
runs its pure-Python code for what is missing (engine/accel/__init__.py)."""
import glob
import os

from setuptools import Extension, setup


def extensions():
    if os.environ.get("RMQSTORE_PURE_PYTHON") == "1":
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("note: Cython not installed: building rmqstore without its compiled fast paths")
        return []
    out = []
    for path in sorted(glob.glob("engine/accel/*.pyx")):
        name = "engine.accel." + os.path.basename(path)[:-4]
        try:  # each module on its own: one that fails to compile does not take the others along
            out += cythonize([Extension(name, [path], optional=True, extra_compile_args=["-O3"])],
                             language_level=3, quiet=True)
        except Exception as e:  # noqa: BLE001 - Cython's CompileError and friends
            print(f"note: {path} not compiled ({e}); the pure-Python path is used instead")
    return out


setup(ext_modules=extensions())
