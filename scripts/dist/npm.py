"""npm: one package of prebuilt binaries per platform, optional dependencies of the main one.

`npm install @prosody-events/prosody` then takes the one package whose os,
cpu and libc fields match the machine (npm skips the others) and needs no
Go and no compiler. Each holds the addon (prosody.node, Node-API version 8,
so one build serves every Node from 20 on) and libprosody beside it; the
main package's install script finds it and builds from source only where
none fits.

Per-platform packages rather than every binary inside the main package:
each platform's pair is about 12 MB, so one package with all six would make
every user download 70 MB for the one they use.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import golib
import toolchain
from targets import TARGETS, Target

ROOT = toolchain.ROOT
SCOPE = "@prosody-events"
MAIN = f"{SCOPE}/prosody"


def platform_package(t: Target) -> str:
    return f"{MAIN}-{t.name}"


def version() -> str:
    return (ROOT / "VERSION").read_text().strip()


def node_include() -> Path:
    """The directory with node_api.h and uv.h (every platform's uv headers are there)."""
    node = Path(shutil.which("node") or "/usr/bin/node").resolve()
    for d in (node.parents[1] / "include" / "node", Path("/usr/include/node"), Path("/usr/local/include/node")):
        if (d / "node_api.h").exists() and (d / "uv.h").exists():
            return d
    raise SystemExit("the Node headers (node_api.h, uv.h) are missing: install Node.js with its headers")


def addon_api_include() -> Path:
    out = subprocess.run(["node", "-p", "require('node-addon-api').include_dir"], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("node-addon-api is missing: run `npm ci` in the repository first")
    return ROOT / out.stdout.strip().strip('"')


def build_addon(t: Target) -> Path:
    """prosody.node for t, linked to libprosody beside it."""
    out = golib.out_dir(t) / "node"
    out.mkdir(parents=True, exist_ok=True)
    lib = golib.out_dir(t) / t.lib_name
    if not lib.exists():
        golib.build(t)
    golib.copy_to(lib, out)
    cmd = [str(golib.ZIG_CC), "-x", "c++", "-std=c++17", "-shared", "-fPIC", "-O2", "-DNDEBUG",
           "-DNAPI_VERSION=8", "-DNAPI_CPP_EXCEPTIONS", "-fexceptions",
           f"-I{addon_api_include()}", f"-I{node_include()}", f"-I{ROOT / 'include'}",
           str(ROOT / "bindings" / "node" / "src" / "addon.cc"), f"-L{out}", "-lprosody", "-lc++"]
    if t.macos:
        # Node provides the Node-API and libuv functions at load time.
        cmd += ["-Wl,-undefined,dynamic_lookup", "-Wl,-rpath,@loader_path", "-Wl,-install_name,prosody.node"]
    else:
        # The C++ runtime is linked in statically; only the module's entry
        # points are exported, so its symbols never meet the ones Node
        # itself carries.
        exports = out / "exports.map"
        exports.write_text("{ global: napi_register_module_v1; node_api_module_get_api_version_v1; local: *; };\n")
        cmd += [f"-Wl,--version-script={exports}", "-Wl,-rpath,$ORIGIN"]
    cmd += ["-s", "-o", str(out / "prosody.node")]
    toolchain.run(cmd, env=golib.cross_env(t))
    return out


def pack_platform(t: Target, dist: Path) -> Path:
    """The platform package's tarball in dist."""
    out = build_addon(t)
    pkg = golib.out_dir(t) / "npm"
    shutil.rmtree(pkg, ignore_errors=True)
    pkg.mkdir(parents=True)
    for name in ("prosody.node", t.lib_name):
        shutil.copy2(out / name, pkg / name)
    main = json.loads((ROOT / "package.json").read_text())
    manifest = {
        "name": platform_package(t),
        "version": version(),
        "description": f"Prebuilt binaries of {MAIN} for {t.name}",
        "license": main["license"],
        "repository": main.get("repository"),
        "os": [t.npm_os],
        "cpu": [t.npm_cpu],
        "files": ["prosody.node", t.lib_name],
        "preferUnplugged": True,
    }
    if t.npm_libc:
        manifest["libc"] = [t.npm_libc]
    manifest = {k: v for k, v in manifest.items() if v is not None}
    (pkg / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    (pkg / "README.md").write_text(
        f"# {platform_package(t)}\n\nThe prebuilt addon and libprosody of {MAIN} "
        f"for {t.name}. Install {MAIN}, which depends on it where it fits.\n"
    )
    return npm_pack(pkg, dist)


def pack_main(dist: Path) -> Path:
    """The main package's tarball in dist: the repository's package, with
    every platform package as an optional dependency at the same version.

    The repository's own package.json does not list them: they exist only
    once a release has published them, and `npm ci` in the repository would
    refuse a lock file without them. The release's manifest is written into
    a copy of the files `npm pack` would take.
    """
    listing = subprocess.run(["npm", "pack", "--dry-run", "--json", "--ignore-scripts"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
    stage = toolchain.BUILD / "dist" / "npm-main"
    shutil.rmtree(stage, ignore_errors=True)
    for f in json.loads(listing.stdout)[0]["files"]:
        dest = stage / f["path"]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f["path"], dest)
    manifest = json.loads((ROOT / "package.json").read_text())
    manifest["version"] = version()
    manifest["optionalDependencies"] = {platform_package(t): version() for t in TARGETS.values()}
    (stage / "package.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return npm_pack(stage, dist)


def npm_pack(pkg: Path, dist: Path) -> Path:
    dist.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["npm", "pack", "--silent", "--pack-destination", str(dist)], cwd=pkg,
                         capture_output=True, text=True, check=True)
    tarball = dist / out.stdout.strip().splitlines()[-1]
    print(f"[dist] packed {tarball.name} ({tarball.stat().st_size / 1e6:.1f} MB)")
    return tarball
