"""Build glue for the Python package ``prosody-events`` (metadata: pyproject.toml).

Building from source (the sdist, where no wheel fits; wheels are built by
scripts/dist) compiles the Go core into libprosody (.so, .dylib on macOS) with
``go build -buildmode=c-shared`` (the same flags as the Makefile's ``lib``
target), then compiles the cffi extension against include/prosody.h and links
it to that library. Both land in the ``prosody`` package directory, where the
extension finds the library through its rpath (``$ORIGIN``, ``@loader_path``). A second
extension, ``prosody._batch``, builds the Python objects of polled events.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
MACOS = sys.platform == "darwin"
# A free-threaded CPython (3.13t) has no stable ABI: the extensions are built for it alone.
FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
MUSL = sys.platform == "linux" and "musl" in (sysconfig.get_config_var("HOST_GNU_TYPE") or "")
LIB_NAME = "libprosody.dylib" if MACOS else "libprosody.so"
# Must match LIB_DIR in bindings/python/build_ffi.py.
LIB_DIR = ROOT / "build" / "python-lib"


def build_go_library() -> Path:
    go = os.environ.get("GO", "go")
    if shutil.which(go) is None:
        raise RuntimeError(
            "building prosody-events from source needs Go (https://go.dev/dl/) on PATH"
        )
    LIB_DIR.mkdir(parents=True, exist_ok=True)
    out = LIB_DIR / LIB_NAME
    if MUSL:
        raise RuntimeError(
            "prosody-events does not run on musl-based Linux (Alpine): libprosody's Go runtime uses "
            "initial-exec thread-local storage, which musl refuses in a library Python loads with dlopen; "
            "use a glibc-based image (manylinux wheels are published for x86-64 and aarch64)"
        )
    if MACOS:
        ldflags = f"-extldflags '-Wl,-install_name,@rpath/{LIB_NAME}'"
    else:
        exports = ROOT / "capi" / "exports.map"
        ldflags = f"-extldflags '-Wl,--version-script={exports} -Wl,-soname,{LIB_NAME}'"
    subprocess.run(
        [go, "build", "-buildmode=c-shared", "-trimpath", "-ldflags", ldflags, "-o", str(out), "./capi"],
        cwd=ROOT,
        check=True,
    )
    # cgo's generated header is not the contract; include/prosody.h is.
    (LIB_DIR / "libprosody.h").unlink(missing_ok=True)
    return out


class BuildGoThenExt(build_ext):
    """Builds libprosody.so before the cffi extension that links it."""

    def run(self) -> None:
        lib = build_go_library()
        if self.inplace:
            target = ROOT / "bindings" / "python" / "prosody"
        else:
            target = Path(self.build_lib) / "prosody"
        target.mkdir(parents=True, exist_ok=True)
        # Extensions of an earlier build under another ABI tag would ship
        # beside the new ones, and Python prefers a version-specific one.
        for stale in target.glob("_*.so"):
            stale.unlink()
        shutil.copy2(lib, target / LIB_NAME)
        super().run()


# Keep setuptools' intermediate files out of the Makefile's build/lib and
# out of the source tree.
BUILD_BASE = ROOT / "build" / "python-build"
BUILD_BASE.mkdir(parents=True, exist_ok=True)

setup(
    options={
        "build": {"build_base": str(BUILD_BASE.relative_to(ROOT))},
        "egg_info": {"egg_base": str(BUILD_BASE.relative_to(ROOT))},
        # Both extensions keep to the stable ABI of 3.10 (the cffi module as
        # cffi generates it, _batch.c by its Py_LIMITED_API), so one wheel
        # serves every CPython from 3.10 on.
        **({} if FREE_THREADED else {"bdist_wheel": {"py_limited_api": "cp310"}}),
    },
    cffi_modules=["bindings/python/build_ffi.py:ffibuilder"],
    # Builds the Python objects of polled events; reads prosody_event, links nothing.
    ext_modules=[
        Extension(
            "prosody._batch",
            sources=["bindings/python/prosody/_batch.c"],
            include_dirs=["include"],
            py_limited_api=not FREE_THREADED,
            define_macros=[("PROSODY_FULL_API", "1")] if FREE_THREADED else [],
        )
    ],
    cmdclass={"build_ext": BuildGoThenExt},
)
