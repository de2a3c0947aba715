// Package cassandra owns the one Cassandra session a Prosody client uses.
//
// Connect dials the cluster with the settings every store relies on
// (LOCAL_QUORUM, token- and DC-aware routing, LZ4 frames, monotonic
// client-side write timestamps), creates the keyspace when it is missing and
// brings the schema up to date. Each store package (timers, and later defer
// queues and deduplication markers) borrows the same *Session instead of
// opening its own: a gocql session holds a connection pool per host plus a
// control connection, so one per store would multiply connections and
// migration runs for no gain. Close it once, after every store using it is
// done.
//
// Migrations are CQL files embedded in the binary (migrations/*.cql), applied
// in filename order and recorded in schema_migrations with the SHA-256 of the
// file. They run under a lightweight-transaction lock so that clients
// starting together apply each file exactly once. Every statement uses
// IF NOT EXISTS, so the files are harmless on a keyspace whose tables were
// created by another implementation sharing the same layout.
package cassandra
