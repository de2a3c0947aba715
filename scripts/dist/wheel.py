"""Python wheels: one per platform, for every CPython from 3.10 on (the stable ABI).

A wheel holds the pure-Python package, libprosody, and two extensions built
for the stable ABI of Python 3.10 (abi3): the cffi module over
include/prosody.h and prosody._batch. They are compiled with Zig against this
machine's Python headers with Py_LIMITED_API set, which declares only the
functions and types every CPython from 3.10 on exports.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import golib
import toolchain
import version as versions
from targets import Target

ROOT = toolchain.ROOT
PKG = ROOT / "bindings" / "python" / "prosody"
ABI_TAG = "cp310-abi3"


def version() -> str:
    """The version as the wheel spells it (PEP 440)."""
    return versions.pep440(versions.current())


def metadata() -> str:
    """The wheel's METADATA, from pyproject.toml and the package README."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = [
        "Metadata-Version: 2.4",
        f"Name: {project['name']}",
        f"Version: {version()}",
        f"Summary: {project['description']}",
        f"License-Expression: {project['license']}",
        f"Requires-Python: {project['requires-python']}",
    ]
    lines += [f"Classifier: {c}" for c in project.get("classifiers", [])]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    lines.append("Description-Content-Type: text/markdown")
    readme = (ROOT / project["readme"]).read_text()
    return "\n".join(lines) + "\n\n" + readme


def cffi_source(dest: Path) -> Path:
    """The C source of prosody._prosody_cffi, as cffi writes it from build_ffi.py."""
    src = dest / "_prosody_cffi.c"
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('build_ffi', {str(ROOT / 'bindings/python/build_ffi.py')!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        f"m.ffibuilder.emit_c_code({str(src)!r})\n"
    )
    toolchain.run([str(toolchain.python()), "-c", code])
    return src


def compile_extension(t: Target, sources: list[Path], out: Path, libdir: Path | None) -> None:
    """Compiles a Python extension for t against the stable ABI, linked to libprosody in libdir."""
    include = sysconfig.get_paths()["include"]
    cmd = [str(golib.ZIG_CC), "-shared", "-fPIC", "-O2", "-DNDEBUG", f"-I{include}", f"-I{ROOT / 'include'}"]
    cmd += [str(s) for s in sources]
    if libdir is not None:
        cmd += [f"-L{libdir}", "-lprosody"]
        cmd += ["-Wl,-rpath,@loader_path"] if t.macos else ["-Wl,-rpath,$ORIGIN"]
    if t.macos:
        # The interpreter provides the Python API at load time; the module's
        # own name, not this machine's build path, is its install name.
        cmd += ["-Wl,-undefined,dynamic_lookup", f"-Wl,-install_name,{out.name}"]
    cmd += ["-o", str(out)]
    toolchain.run(cmd, env=golib.cross_env(t))


def build(t: Target, dist: Path) -> Path:
    """Builds the wheel for t into dist and returns its path."""
    work = golib.out_dir(t) / "python"
    pkg = work / "prosody"
    pkg.mkdir(parents=True, exist_ok=True)
    lib = golib.out_dir(t) / t.lib_name
    if not lib.exists():
        golib.build(t)
    golib.copy_to(lib, pkg)
    compile_extension(t, [cffi_source(work)], pkg / "_prosody_cffi.abi3.so", pkg)
    compile_extension(t, [PKG / "_batch.c"], pkg / "_batch.abi3.so", None)

    files: dict[str, bytes] = {}
    for f in sorted(PKG.iterdir()):
        if f.suffix in (".py", ".pyi") or f.name == "py.typed":
            files[f"prosody/{f.name}"] = f.read_bytes()
    for name in (t.lib_name, "_prosody_cffi.abi3.so", "_batch.abi3.so"):
        files[f"prosody/{name}"] = (pkg / name).read_bytes()

    name = f"prosody_events-{version()}"
    info = f"{name}.dist-info"
    tag = f"{ABI_TAG}-{t.wheel_platform}"
    files[f"{info}/METADATA"] = metadata().encode()
    files[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: prosody scripts/dist\nRoot-Is-Purelib: false\n" f"Tag: {tag}\n"
    ).encode()
    files[f"{info}/LICENSE"] = (ROOT / "LICENSE").read_bytes() if (ROOT / "LICENSE").exists() else b""
    if not files[f"{info}/LICENSE"]:
        del files[f"{info}/LICENSE"]
    record = [f"{path},sha256={digest(data)},{len(data)}" for path, data in files.items()]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()

    dist.mkdir(parents=True, exist_ok=True)
    whl = dist / f"{name}-{tag}.whl"
    with zipfile.ZipFile(whl, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            zi = zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0))
            executable = path.endswith((".so", ".dylib"))
            zi.external_attr = (0o755 if executable else 0o644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return whl


def digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def sdist(dist: Path) -> Path:
    """The source distribution, for platforms without a wheel (it needs Go and a C compiler)."""
    before = set(dist.glob("*.tar.gz")) if dist.exists() else set()
    toolchain.run([str(toolchain.python()), "-m", "build", "--sdist", "--no-isolation", "--outdir", str(dist)])
    new = sorted(set(dist.glob("*.tar.gz")) - before) or sorted(dist.glob(f"prosody_events-{version()}.tar.gz"))
    return new[-1]
