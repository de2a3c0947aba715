// Package timerstore persists durable per-key timers.
//
// A timer is identified by (key, time, type) and belongs to a segment, one
// per (consumer group, topic, partition). Every segment keeps three indexes,
// which Add, Remove and ClearAndSchedule keep in step:
//
//   - the slab list: which slabs (fixed windows of slab-size seconds) may
//     hold timers, so a loader can find work without scanning;
//   - the slab index: every trigger of one slab, read whole when it loads;
//   - the key index: the times of one key and type, for cancellation and
//     for listing a key's timers.
//
// Two implementations share the Store interface: NewCassandra keeps the
// layout of the original implementation (tables timer_segments,
// timer_typed_slabs and timer_typed_keys, version 3), so Go and original
// instances can share a keyspace; NewMemory keeps the same keys in process
// memory for mock mode and tests. The conformance tests run one suite
// against both.
//
// Stores do not serialize operations on one key: callers (the timer
// manager) already run a key's operations one at a time.
package timerstore
