#!/usr/bin/env node
// The package's install script: nothing to do when npm installed the
// prebuilt binaries of this platform (lib/prebuilt.js); otherwise build
// libprosody and the addon from the Go and C++ sources in the package
// (scripts/build.js; needs Go, python3, make and a C++ compiler).
// PROSODY_BUILD_FROM_SOURCE=1 builds from source even where a prebuilt
// package is installed.
"use strict";

const prebuilt = require("../lib/prebuilt.js");

const dir = prebuilt.directory();
if (dir) {
  try {
    require(require("node:path").join(dir, "prosody.node"));
    console.error(`[prosody] using the prebuilt binaries of ${prebuilt.packageName()}`);
    process.exit(0);
  } catch (e) {
    console.error(`[prosody] the prebuilt binaries of ${prebuilt.packageName()} do not load here (${e.message}); building from source`);
  }
}
require("./build.js");
