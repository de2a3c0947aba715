// Package dedup skips messages that were handled before (core-behavior.md
// §4.3): each message gets a deterministic id from the idempotence
// version, the consumer group, its topic, partition and key, and its
// event id (or, without one, its offset). A process-local cache of ids
// sits in front of a persistent store (package dedupstore) that survives
// restarts and rebalances.
//
// It is best-effort by design, as the user documentation says: a store
// read that fails counts as a miss, and a store write that fails is
// logged and the message's result stands.
package dedup
