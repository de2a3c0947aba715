"""The platforms Prosody ships prebuilt for, and how each is built and named."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str  # also the suffix of the npm platform package
    goos: str
    goarch: str
    zig: str  # Zig's target triple (glibc and macOS versions are the oldest we support)
    wheel_platform: str  # the wheel's platform tag
    npm_os: str
    npm_cpu: str
    npm_libc: str | None  # npm's "libc" field (Linux only)
    qemu: str | None  # the qemu-user binary that runs it on an x86-64 Linux host, if any

    @property
    def macos(self) -> bool:
        return self.goos == "darwin"

    @property
    def lib_name(self) -> str:
        return "libprosody.dylib" if self.macos else "libprosody.so"


# glibc 2.28 and macOS 12 are the oldest systems the wheels and npm binaries
# support: manylinux_2_28 is what current distributions and Node 20's own
# binaries need, and Go 1.25 and later run on macOS 12 and newer.
#
# No musl (Alpine) targets: Go's c-shared libraries reach their runtime's
# thread-local state through initial-exec TLS, which musl's loader refuses
# in any library loaded with dlopen ("initial-exec TLS resolves to dynamic
# definition"), and Python and Node load extensions with dlopen. A musl
# build links and even runs when linked into a program at start-up, but no
# wheel or addon could import it.
TARGETS: dict[str, Target] = {
    t.name: t
    for t in [
        Target("linux-x64-gnu", "linux", "amd64", "x86_64-linux-gnu.2.28", "manylinux_2_28_x86_64", "linux", "x64", "glibc", None),
        Target("linux-arm64-gnu", "linux", "arm64", "aarch64-linux-gnu.2.28", "manylinux_2_28_aarch64", "linux", "arm64", "glibc", "qemu-aarch64-static"),
        Target("darwin-arm64", "darwin", "arm64", "aarch64-macos.12.0", "macosx_12_0_arm64", "darwin", "arm64", None, None),
        Target("darwin-x64", "darwin", "amd64", "x86_64-macos.12.0", "macosx_12_0_x86_64", "darwin", "x64", None, None),
    ]
}


def select(names: list[str]) -> list[Target]:
    """The targets named (all of them for none); an unknown name is an error naming the known ones."""
    if not names:
        return list(TARGETS.values())
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        raise SystemExit(f"unknown target {', '.join(unknown)}: choose from {', '.join(TARGETS)}")
    return [TARGETS[n] for n in names]
