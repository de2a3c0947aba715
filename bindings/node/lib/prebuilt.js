"use strict";
// Where the prebuilt binaries of this platform are: the optional dependency
// @prosody-events/prosody-<os>-<cpu>[-<libc>] that npm installed because its
// os, cpu and libc fields match this machine (scripts/dist/npm.py makes
// them). null when none is installed: the package was built from source.
const path = require("node:path");

/** The platform package's name for this process's platform. */
function packageName() {
  let name = `@prosody-events/prosody-${process.platform}-${process.arch}`;
  if (process.platform === "linux") {
    // glibc reports its version in the process report; musl does not.
    const header = process.report.getReport().header;
    name += header.glibcVersionRuntime ? "-gnu" : "-musl";
  }
  return name;
}

/** Whether PROSODY_BUILD_FROM_SOURCE asks for a build from source. */
function fromSource() {
  const v = (process.env.PROSODY_BUILD_FROM_SOURCE || "").toLowerCase();
  return v === "1" || v === "true" || v === "yes";
}

/** The directory holding prosody.node and libprosody, or null. */
function directory() {
  if (fromSource()) return null;
  try {
    return path.dirname(require.resolve(`${packageName()}/package.json`));
  } catch {
    return null;
  }
}

module.exports = { packageName, directory, fromSource };
