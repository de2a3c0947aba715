// Package deferral holds what pipeline mode's deferred retry needs besides
// its layers (which are in package middleware): the backoff of deferred
// retries, the failure-rate gate that decides whether a first failure may
// be deferred, and each partition's deferral state (which keys are
// deferred, their stores, their retry timers and the loader that reads a
// deferred message back from Kafka).
//
// A key is deferred when its head message (or timer) failed transiently:
// the failure is parked durably, the offset committed, and a retry timer
// of a deferred type fires it again later. Everything that arrives for a
// deferred key queues behind it in the store, so the key's order is kept
// while every other key moves on (core-behavior.md §4.4–§4.7).
package deferral
