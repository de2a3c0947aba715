"use strict";
// Loads the addon: the prebuilt one of this platform when npm installed it
// (lib/prebuilt.js), else the one scripts/build.js built from source. In
// both, libprosody sits next to prosody.node and is found through the
// addon's rpath ($ORIGIN, @loader_path on macOS).
const path = require("node:path");
const prebuilt = require("./prebuilt.js");

function load() {
  const dir = prebuilt.directory();
  if (dir) return require(path.join(dir, "prosody.node"));
  const built = path.join(__dirname, "..", "build");
  try {
    return require(path.join(built, "Release", "prosody.node"));
  } catch (releaseError) {
    try {
      return require(path.join(built, "Debug", "prosody.node"));
    } catch {
      releaseError.message +=
        `\n@prosody-events/prosody: no prebuilt binaries for this platform (${prebuilt.packageName()}) and no addon built from source; ` +
        "rebuild it with `npm rebuild @prosody-events/prosody` (needs Go, python3, make and a C++ compiler)";
      throw releaseError;
    }
  }
}

module.exports = load();
