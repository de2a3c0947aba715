"""Release artifacts, built on this Linux machine for every supported platform.

    python3 scripts/dist lib [TARGET...]       libprosody per target (build/dist/<target>/)
    python3 scripts/dist wheels [TARGET...]    Python wheels and the sdist (dist/python/)
    python3 scripts/dist check-wheels          auditwheel and abi3audit on the built wheels
    python3 scripts/dist smoke-wheels          the Quick Start from the x86-64 wheel (no Go, no compiler)
                                               and from the aarch64 wheel under qemu
    python3 scripts/dist npm [TARGET...]       npm platform packages and the main package (dist/npm/)
    python3 scripts/dist smoke-npm             npm install of the packed packages without Go or a compiler
                                               (under 20 s) and the Quick Start; the arm64 one under qemu
    python3 scripts/dist version [NEW|--check] the version (VERSION), set everywhere or compared
    python3 scripts/dist targets               the targets

Without TARGET, every target (targets.py).
"""

from __future__ import annotations

import sys

import checks
import golib
import npm
import targets
import toolchain
import version
import wheel

DIST = toolchain.ROOT / "dist"


def main(argv: list[str]) -> None:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return
    cmd, rest = argv[0], argv[1:]
    if cmd == "targets":
        for t in targets.TARGETS.values():
            print(f"{t.name:18} {t.zig:24} {t.wheel_platform}")
    elif cmd == "version":
        if not rest:
            print(version.current())
        elif rest == ["--check"]:
            version.check()
        else:
            version.set_version(rest[0])
    elif cmd == "lib":
        for t in targets.select(rest):
            print(golib.build(t))
    elif cmd == "wheels":
        out = DIST / "python"
        for t in targets.select(rest):
            golib.build(t)
            print(wheel.build(t, out))
        if not rest:
            print(wheel.sdist(out))
    elif cmd == "npm":
        out = DIST / "npm"
        for t in targets.select(rest):
            print(npm.pack_platform(t, out))
        print(npm.pack_main(out))
    elif cmd == "smoke-npm":
        checks.smoke_npm_native(DIST / "npm")
        checks.smoke_npm_arm64(DIST / "npm")
    elif cmd == "check-wheels":
        checks.wheels(DIST / "python")
    elif cmd == "smoke-wheels":
        checks.smoke_wheel_native(DIST / "python")
        checks.smoke_wheel_arm64(DIST / "python")
    else:
        raise SystemExit(f"unknown command {cmd!r}: see python3 scripts/dist --help")


if __name__ == "__main__":
    main(sys.argv[1:])
