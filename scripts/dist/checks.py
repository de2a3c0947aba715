"""Checks and smoke tests of the built artifacts.

The Linux wheels must be what their tags say (auditwheel) and keep to the
stable ABI (abi3audit). The smoke tests install an artifact as a user would
and run the Quick Start in mock mode: the x86-64 wheel into a new virtual
environment whose PATH has no Go and no C compiler, and the aarch64 wheel
under qemu's user-mode emulation, with an arm64 Python from Debian's
packages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import venv
from pathlib import Path

import toolchain
from targets import TARGETS, Target

ROOT = toolchain.ROOT
QUICKSTART_PY = ROOT / "examples" / "python" / "quickstart.py"


def wheel_of(dist: Path, t: Target) -> Path:
    found = sorted(dist.glob(f"prosody_events-*-{t.wheel_platform}.whl"))
    if not found:
        raise SystemExit(f"no wheel for {t.name} in {dist}: build it with `python3 scripts/dist wheels {t.name}`")
    return found[-1]


def wheels(dist: Path) -> None:
    """auditwheel show and abi3audit on every built wheel."""
    checked = 0
    for t in TARGETS.values():
        found = sorted(dist.glob(f"prosody_events-*-{t.wheel_platform}.whl"))
        if not found:
            continue
        whl = found[-1]
        if t.goos == "linux":
            audit_linux(whl, t)
        out = subprocess.run([str(toolchain.tool("abi3audit")), "--strict", "--report", str(whl)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(f"abi3audit: {whl.name} leaves the stable ABI:\n{out.stdout}{out.stderr}")
        for spec in json.loads(out.stdout)["specs"].values():
            for so in spec["wheel"]:
                if not so["result"]["is_abi3_baseline_compatible"]:
                    raise SystemExit(f"abi3audit: {so['name']} in {whl.name} needs a newer Python than 3.10")
        print(f"[check] {whl.name}: stable ABI of 3.10")
        checked += 1
    if checked == 0:
        raise SystemExit(f"no wheels in {dist}")


def audit_linux(whl: Path, t: Target) -> None:
    """The platform tag auditwheel finds must be one the wheel's tag covers (same libc, no newer)."""
    out = subprocess.run([str(toolchain.tool("auditwheel")), "show", str(whl)], capture_output=True, text=True)
    text = " ".join((out.stdout + out.stderr).split())
    m = re.search(r'consistent with the following platform tag: "(\w+)"', text)
    if out.returncode != 0 or m is None:
        raise SystemExit(f"auditwheel show {whl.name} failed:\n{out.stdout}{out.stderr}")
    found, want = m.group(1), t.wheel_platform
    fam, fmaj, fmin, farch = split_tag(found)
    wfam, wmaj, wmin, warch = split_tag(want)
    if fam != wfam or farch != warch or (fmaj, fmin) > (wmaj, wmin):
        raise SystemExit(f"auditwheel: {whl.name} is consistent with {found}, not with its tag {want}")
    print(f"[check] {whl.name}: auditwheel finds it consistent with {found} (tagged {want})")


def split_tag(tag: str) -> tuple[str, int, int, str]:
    m = re.fullmatch(r"(manylinux|musllinux)_(\d+)_(\d+)_(\w+)", tag)
    if m is None:
        raise SystemExit(f"not a manylinux or musllinux tag: {tag}")
    return m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)


def bare_path() -> str:
    """A PATH with Python and the basic tools but no Go and no C compiler."""
    keep = Path(tempfile.mkdtemp(prefix="prosody-bare-path-"))
    for tool in ("sh", "bash", "env", "ls", "cat", "uname"):
        found = shutil.which(tool)
        if found:
            (keep / tool).symlink_to(found)
    for tool in ("go", "gcc", "cc", "clang", "g++", "c++", "zig"):
        assert shutil.which(tool, path=str(keep)) is None
    return str(keep)


def smoke_wheel_native(dist: Path) -> None:
    """The x86-64 manylinux wheel, installed into a new venv without Go or a compiler, runs the Quick Start."""
    whl = wheel_of(dist, TARGETS["linux-x64-gnu"])
    with tempfile.TemporaryDirectory(prefix="prosody-wheel-smoke-") as tmp:
        env_dir = Path(tmp) / "venv"
        venv.create(env_dir, with_pip=True)
        py = env_dir / "bin" / "python"
        path = f"{env_dir / 'bin'}:{bare_path()}"
        env = {"PATH": path, "HOME": tmp, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        toolchain.run([str(py), "-m", "pip", "install", "-q", "--only-binary=:all:", str(whl)], env=env)
        run_quickstart([str(py)], env)


def arm64_python() -> Path:
    """An arm64 Python 3.11 from Debian's packages, unpacked (never run natively) under build/."""
    root = toolchain.BUILD / "arm64-root"
    python = root / "usr" / "bin" / "python3.11"
    if not python.exists():
        if shutil.which("mmdebstrap") is None:
            raise SystemExit("mmdebstrap is missing: run scripts/install-deps")
        shutil.rmtree(root, ignore_errors=True)
        toolchain.run(["mmdebstrap", "--quiet", "--variant=extract", "--architectures=arm64",
                       "--include=python3.11-minimal,libpython3.11-stdlib", "bookworm", str(root)])
    return python


def smoke_wheel_arm64(dist: Path) -> None:
    """The aarch64 manylinux wheel, installed with pip for that platform, runs the Quick Start under qemu."""
    t = TARGETS["linux-arm64-gnu"]
    whl = wheel_of(dist, t)
    qemu = shutil.which(t.qemu or "")
    if qemu is None:
        raise SystemExit(f"{t.qemu} is missing: run scripts/install-deps")
    python = arm64_python()
    with tempfile.TemporaryDirectory(prefix="prosody-arm64-smoke-") as tmp:
        site = Path(tmp) / "site"
        # pip installs for another platform into a directory; its
        # dependencies (cffi's own extension) come as aarch64 wheels too.
        platforms = ["manylinux_2_28_aarch64", "manylinux_2_17_aarch64", "manylinux2014_aarch64"]
        toolchain.run([str(toolchain.python()), "-m", "pip", "install", "-q", "--only-binary=:all:",
                       "--implementation", "cp", "--python-version", "3.11",
                       *[f"--platform={p}" for p in platforms], "--target", str(site), str(whl)])
        root = python.parents[2]
        run_quickstart([qemu, "-L", str(root), str(python)], {"PYTHONPATH": str(site)})


def run_quickstart(python: list[str], env: dict[str, str]) -> None:
    out = subprocess.run([*python, str(QUICKSTART_PY)], env={**os.environ, **env}, capture_output=True,
                         text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the Quick Start failed ({' '.join(python)}):\n{out.stdout}{out.stderr}")
    print(f"[check] Quick Start ran: {out.stdout.strip().splitlines()[-1]}")
