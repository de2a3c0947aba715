"""The build tools `make wheels` and `make npm-prebuilds` need, installed into build/toolchain.

Everything comes from the package registries at pinned versions: Zig (as the
`ziglang` Python package) cross-compiles cgo and the extensions for every
target from this Linux machine; cffi writes the Python extension's C source;
auditwheel and abi3audit check the wheels.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "build"
VENV = BUILD / "toolchain"

PINS = [
    "ziglang==0.17.0",
    "cffi==2.1.1",
    "setuptools==84.2.1",
    "auditwheel==6.8.2",
    "abi3audit==0.0.26",
    "build==1.6.1",
]


def python() -> Path:
    """The toolchain's Python, installed on first use."""
    py = VENV / "bin" / "python"
    stamp = VENV / "pins.txt"
    want = "\n".join(PINS) + "\n"
    if not py.exists():
        venv.create(VENV, with_pip=True)
    if not stamp.exists() or stamp.read_text() != want:
        run([str(py), "-m", "pip", "install", "-q", *PINS])
        stamp.write_text(want)
    return py


def zig() -> Path:
    """The Zig binary of the toolchain's ziglang package."""
    out = subprocess.run(
        [str(python()), "-c", "import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), 'zig'))"],
        check=True, capture_output=True, text=True,
    )
    return Path(out.stdout.strip())


def tool(name: str) -> Path:
    """A console script of the toolchain (auditwheel, abi3audit)."""
    python()
    return VENV / "bin" / name


def run(cmd: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> None:
    print("[dist]", " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, cwd=cwd or ROOT, env={**os.environ, **(env or {})}, check=True)
