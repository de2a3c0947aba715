// Package state is keyed state: durable values, maps and deques that every
// Kafka key of a consumer group has, read and written by the handlers of
// that key's messages and timers.
//
// A handler opens a collection for the event's key (ValueOf, MapOf,
// DequeOf). Its writes are staged in the attempt and seen by the attempt's
// own reads; when the attempt succeeds they are committed to the store in
// one atomic write per key, together with a marker of the message, so
// that a redelivery of a message whose attempt had succeeded (its offset
// commit lost in a crash) is recognised and not applied twice. A failed
// attempt's writes are discarded. Commit and Rollback on a handle settle
// one collection early; a read_uncommitted collection is written after the
// attempt succeeds, outside the atomic write and without a marker.
//
// Published collections can be read by other services through a Reader,
// which sees committed state only.
package state
