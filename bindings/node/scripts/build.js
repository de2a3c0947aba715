#!/usr/bin/env node
// Builds the native parts of the Node package:
//   1. libprosody (.so, .dylib on macOS) from the Go sources (capi/), as
//      the Makefile's `lib` target does, into bindings/node/native/;
//   2. the node-addon-api addon against the Node headers on this machine;
//   3. copies libprosody next to prosody.node (the addon's rpath is
//      $ORIGIN, @loader_path on macOS, so the pair can move together).
// It runs as the package's `install` script, in the repository and in an
// unpacked `npm pack` tarball alike (both have the same layout).
"use strict";

const { execFileSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const nodeDir = path.resolve(__dirname, ".."); // bindings/node
const root = path.resolve(nodeDir, "..", ".."); // the package (repository) root
const nativeDir = path.join(nodeDir, "native");

function run(cmd, args, cwd) {
  console.error(`[prosody] ${cmd} ${args.join(" ")}`);
  execFileSync(cmd, args, { cwd, stdio: "inherit", env: process.env });
}

// libprosody's file name, and the linker flags that export only the
// prosody_* functions and let the addon find it beside itself.
const macOS = process.platform === "darwin";
const libName = macOS ? "libprosody.dylib" : "libprosody.so";
function libraryLinkFlags() {
  if (macOS) return `-Wl,-install_name,@rpath/${libName}`;
  const map = path.join(root, "capi", "exports.map");
  return `-Wl,--version-script=${map} -Wl,-soname,${libName}`;
}

// musl (Alpine): glibc reports its version in the process report, musl
// does not. libprosody's Go runtime uses initial-exec thread-local storage,
// which musl refuses in a library loaded with dlopen, as Node loads addons.
if (process.platform === "linux" && !process.report.getReport().header.glibcVersionRuntime) {
  console.error(
    "[prosody] @prosody-events/prosody does not run on musl-based Linux (Alpine): libprosody's Go runtime uses " +
      "initial-exec thread-local storage, which musl refuses in a library loaded with dlopen; use a glibc-based image",
  );
  process.exit(1);
}

function buildLibrary() {
  fs.mkdirSync(nativeDir, { recursive: true });
  const go = process.env.GO || "go";
  run(
    go,
    ["build", "-buildmode=c-shared", "-ldflags", `-extldflags '${libraryLinkFlags()}'`, "-o", path.join(nativeDir, libName), "./capi"],
    root,
  );
  // cgo's generated header; include/prosody.h is the contract.
  fs.rmSync(path.join(nativeDir, "libprosody.h"), { force: true });
}

// The directory holding include/node/node_api.h for the running Node, so
// node-gyp never downloads headers. Distribution packages put them under
// /usr; the official tarballs next to bin/.
function localNodeDir() {
  const candidates = [path.resolve(process.execPath, "..", ".."), "/usr", "/usr/local"];
  if (process.env.npm_config_nodedir) candidates.unshift(process.env.npm_config_nodedir);
  return candidates.find((dir) => fs.existsSync(path.join(dir, "include", "node", "node_api.h")));
}

// node-gyp: the project's own copy when installed (development), else the one
// npm runs lifecycle scripts with (npm_config_node_gyp), else PATH.
function nodeGyp() {
  try {
    return [process.execPath, require.resolve("node-gyp/bin/node-gyp.js", { paths: [root] })];
  } catch {
    if (process.env.npm_config_node_gyp) return [process.execPath, process.env.npm_config_node_gyp];
    return ["node-gyp"];
  }
}

function buildAddon() {
  const [cmd, ...pre] = nodeGyp();
  const args = [...pre, "rebuild"];
  const dir = localNodeDir();
  if (dir) args.push(`--nodedir=${dir}`);
  if (process.env.PROSODY_NODE_DEBUG) args.push("--debug");
  run(cmd, args, nodeDir);
  const out = path.join(nodeDir, "build", process.env.PROSODY_NODE_DEBUG ? "Debug" : "Release");
  fs.copyFileSync(path.join(nativeDir, libName), path.join(out, libName));
}

buildLibrary();
buildAddon();
