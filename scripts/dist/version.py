"""The one version of the Go module, the wheel and the npm package: the VERSION file.

Go reads it itself (version.go embeds it) and so do the wheel's metadata
(pyproject.toml takes it as a dynamic version) and scripts/dist. The files
that must carry it literally are rewritten by `scripts/dist version NEW`
and compared by `scripts/dist version --check` (make lint).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import toolchain

ROOT = toolchain.ROOT
VERSION_FILE = ROOT / "VERSION"

# The literal copies: a file and the pattern whose group 1 is the version.
COPIES: list[tuple[str, str]] = [
    ("include/prosody.h", r'#define PROSODY_VERSION "([^"]*)"'),
    ("bindings/python/prosody/__init__.py", r'__version__ = "([^"]*)"'),
]

# MAJOR.MINOR.PATCH, or a pre-release of it that both npm (semver) and
# Python (PEP 440, as pep440 spells it) can order.
SEMVER = re.compile(r"(\d+\.\d+\.\d+)(?:-(alpha|beta|rc)\.(\d+))?")


def current() -> str:
    return VERSION_FILE.read_text().strip()


def pep440(v: str) -> str:
    """v as Python spells it: 1.2.0-rc.1 is 1.2.0rc1 (as setuptools writes the sdist)."""
    m = SEMVER.fullmatch(v)
    if m is None:
        raise SystemExit(f"version: {v!r} is not MAJOR.MINOR.PATCH[-alpha|-beta|-rc.N]")
    release, kind, n = m.groups()
    return release if kind is None else release + {'alpha': 'a', 'beta': 'b', 'rc': 'rc'}[kind] + n


def found() -> dict[str, str]:
    """Every place's version, by place."""
    out = {"VERSION": current()}
    for rel, pattern in COPIES:
        m = re.search(pattern, (ROOT / rel).read_text())
        out[rel] = m.group(1) if m else "(missing)"
    pkg = json.loads((ROOT / "package.json").read_text())
    out["package.json"] = pkg["version"]
    lock = json.loads((ROOT / "package-lock.json").read_text())
    out["package-lock.json"] = lock["version"]
    out['package-lock.json packages[""]'] = lock["packages"][""]["version"]
    return out


def check() -> None:
    places = found()
    want = places["VERSION"]
    wrong = {p: v for p, v in places.items() if v != want}
    if wrong:
        raise SystemExit(
            f"version {want} (VERSION) differs in: " + ", ".join(f"{p} ({v})" for p, v in wrong.items())
            + "; set it everywhere with `python3 scripts/dist version NEW`"
        )
    print(f"[version] {want} everywhere")


def set_version(new: str) -> None:
    pep440(new)  # refuses what is not MAJOR.MINOR.PATCH[-alpha|-beta|-rc.N]
    VERSION_FILE.write_text(new + "\n")
    for rel, pattern in COPIES:
        path = ROOT / rel
        text = path.read_text()
        m = re.search(pattern, text)
        if m is None:
            raise SystemExit(f"version: no version in {rel} matches {pattern}")
        path.write_text(text[: m.start(1)] + new + text[m.end(1):])
    for rel in ("package.json", "package-lock.json"):
        path = ROOT / rel
        doc = json.loads(path.read_text())
        doc["version"] = new
        if rel == "package-lock.json":
            doc["packages"][""]["version"] = new
        path.write_text(json.dumps(doc, indent=2) + "\n")
    check()
