"use strict";
// Loads the addon: the one scripts/build.js built from source, when the
// install script built one (no prebuilt package fitted, its binaries did not
// load, or PROSODY_BUILD_FROM_SOURCE asked for it), else the prebuilt one of
// this platform (lib/prebuilt.js). In both, libprosody sits next to
// prosody.node and is found through the addon's rpath ($ORIGIN,
// @loader_path on macOS).
const fs = require("node:fs");
const path = require("node:path");
const prebuilt = require("./prebuilt.js");

function load() {
  const built = path.join(__dirname, "..", "build");
  for (const kind of ["Release", "Debug"]) {
    const addon = path.join(built, kind, "prosody.node");
    if (fs.existsSync(addon)) return require(addon);
  }
  const dir = prebuilt.directory();
  if (dir) return require(path.join(dir, "prosody.node"));
  throw new Error(
    `@prosody-events/prosody: no prebuilt binaries for this platform (${prebuilt.packageName()}) and no addon built from source; ` +
      "build it with `npm rebuild @prosody-events/prosody` (needs Go, python3, make and a C++ compiler)",
  );
}

module.exports = load();
