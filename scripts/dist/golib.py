"""libprosody for a target: the Go core as a C shared library, cross-compiled with Zig."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import toolchain
from targets import Target

ROOT = toolchain.ROOT
ZIG_CC = ROOT / "scripts" / "cross" / "zig-cc"


def cross_env(t: Target) -> dict[str, str]:
    """The environment that makes cgo and the C compiler build for t."""
    return {
        "GOOS": t.goos,
        "GOARCH": t.goarch,
        "CGO_ENABLED": "1",
        "CC": str(ZIG_CC),
        "CXX": str(ZIG_CC),
        "ZIG": str(toolchain.zig()),
        "ZIG_TARGET": t.zig,
        # Each target in a cache of its own: Zig's cached objects are per
        # target anyway, and Go's build cache keys on the environment.
        "ZIG_GLOBAL_CACHE_DIR": str(toolchain.BUILD / "zig-cache"),
        "ZIG_LOCAL_CACHE_DIR": str(toolchain.BUILD / "zig-cache"),
    }


def out_dir(t: Target) -> Path:
    return toolchain.BUILD / "dist" / t.name


def build(t: Target) -> Path:
    """Builds libprosody for t into build/dist/<target>/ and returns its path.

    On Linux only the prosody_* functions are exported (capi/exports.map).
    On macOS the Go side's prosodyGo_* functions stay visible too: Zig's
    Mach-O linker takes no list of exports (it ignores
    -exported_symbols_list), and the header declares only the prosody_*
    ones. There the library's install name is @rpath/libprosody.dylib, so
    that the extension or addon next to it finds it through its own rpath
    (@loader_path).
    """
    out = out_dir(t)
    out.mkdir(parents=True, exist_ok=True)
    lib = out / t.lib_name
    if t.macos:
        ext = f"-Wl,-install_name,@rpath/{t.lib_name}"
    else:
        ext = f"-Wl,--version-script={ROOT / 'capi' / 'exports.map'} -Wl,-soname,{t.lib_name}"
    toolchain.run(
        ["go", "build", "-buildmode=c-shared", "-trimpath", "-ldflags", f"-s -w -extldflags '{ext}'", "-o", str(lib), "./capi"],
        env=cross_env(t),
    )
    (out / "libprosody.h").unlink(missing_ok=True)  # cgo's; include/prosody.h is the contract
    return lib


def copy_to(lib: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(lib, dest / lib.name)
    os.chmod(dest / lib.name, 0o755)
