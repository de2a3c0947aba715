"use strict";
// Keyed-state definitions: frozen plain objects naming a collection. They
// go into Configuration.stateCollections. The state handles that
// context.state() returns, and published readers, come with a later release.

function define(kind, payload) {
  return (name, options = {}) => {
    if (typeof name !== "string" || name === "") throw new TypeError(`${kind}: name must be a non-empty string`);
    const def = { name, kind, payload };
    // Every option is copied whatever the kind, so that a misplaced one
    // reaches the configuration check that names it.
    for (const k of ["ttlSeconds", "readUncommitted", "published", "readCache", "keysetLimit", "capacity"]) {
      if (options[k] !== undefined) def[k] = options[k];
    }
    return Object.freeze(def);
  };
}

module.exports = {
  value: define("value", "json"),
  map: define("map", "json"),
  deque: define("deque", "json"),
  messageValue: define("value", "message"),
  messageMap: define("map", "message"),
  messageDeque: define("deque", "message"),
};
