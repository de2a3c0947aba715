"use strict";
// Loads the addon built by scripts/build.js. libprosody.so sits next to it
// and is found through the addon's $ORIGIN rpath.
const path = require("node:path");

const dir = path.join(__dirname, "..", "build");
let native;
try {
  native = require(path.join(dir, "Release", "prosody.node"));
} catch (releaseError) {
  try {
    native = require(path.join(dir, "Debug", "prosody.node"));
  } catch {
    releaseError.message +=
      "\n@prosody-events/prosody: the native addon is missing or cannot load; rebuild it with `npm rebuild @prosody-events/prosody` (needs Go, python3, make and a C++ compiler)";
    throw releaseError;
  }
}
module.exports = native;
