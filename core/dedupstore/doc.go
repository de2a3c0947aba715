// Package dedupstore is the persistent tier of deduplication: the ids of
// messages handled, each kept for the idempotence TTL. Two stores
// implement it, keyed identically: Cassandra's deduplication table, and
// an in-memory one for mock mode that lives as long as the process.
//
// The Cassandra store folds the lookups and records that arrive while
// others are under way into one query each (an IN read, an unlogged
// batch), so that a busy consumer pays a round trip per batch rather
// than per message.
package dedupstore
