// Package deferstore persists the queues of deferred retry (pipeline mode).
//
// When a handler fails transiently, the defer layers park the failing
// message (or application timer) and everything that arrives behind it for
// the same key, and retry the head from a timer. Each partition has one
// defer segment holding, per key, a FIFO of deferred entries and one retry
// count shared by the key. A MessageSegment queues Kafka offsets, a
// TimerSegment queues application timers by their original time.
//
// NewCassandra keeps the original implementation's layout (tables
// deferred_segments, deferred_offsets and deferred_timers, with the
// next_offset / next_timer static hints), so Go and original instances can
// share a keyspace. NewMemory keeps the same data in process memory for
// mock mode and tests. The conformance tests run one suite against both.
//
// Stores do not serialize operations on one key: the callers (the defer
// layers, behind the per-key queue) already run a key's operations one at a
// time. Operations on different keys may run concurrently.
package deferstore
