"use strict";
// @prosody-events/prosody: the public API. The native addon (src/addon.cc)
// only moves data across the C ABI; everything users see is defined in lib/.

const { ProsodyClient, AdminClient, ConsumerState } = require("./lib/client");
const { Mode } = require("./lib/config");
const { Context, Message } = require("./lib/events");
const errors = require("./lib/errors");
const logger = require("./lib/logger");
const state = require("./lib/state");
const telemetry = require("./lib/telemetry");

logger.initialize();
logger.setLoggerIfUnset(logger.consoleLogger);

module.exports = {
  ProsodyClient,
  AdminClient,
  ConsumerState,
  Mode,
  Context,
  Message,
  EventHandlerError: errors.EventHandlerError,
  TransientError: errors.TransientError,
  PermanentError: errors.PermanentError,
  TransientStateError: errors.TransientStateError,
  PermanentStateError: errors.PermanentStateError,
  isStateError: errors.isStateError,
  permanent: errors.permanent,
  transient: errors.transient,
  initialize: logger.initialize,
  setLogger: logger.setLogger,
  setLoggerIfUnset: logger.setLoggerIfUnset,
  loggerIsSet: logger.loggerIsSet,
  getCurrentLogger: logger.getCurrentLogger,
  flushTelemetry: telemetry.flushTelemetry,
  shutdownTelemetry: telemetry.shutdownTelemetry,
  value: state.value,
  map: state.map,
  deque: state.deque,
  messageValue: state.messageValue,
  messageMap: state.messageMap,
  messageDeque: state.messageDeque,
  ValueState: state.ValueState,
  MapState: state.MapState,
  DequeState: state.DequeState,
  PublishedValue: state.PublishedValue,
  PublishedMap: state.PublishedMap,
  PublishedDeque: state.PublishedDeque,
};
