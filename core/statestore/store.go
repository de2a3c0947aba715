// Package statestore is where keyed state is kept: the committed values,
// maps and deques of every user key, the registry of collections, the
// routing records of published collections, and the markers that make a
// succeeded attempt's writes apply once. Two stores implement Store: memory
// (mock mode, process-wide) and Cassandra; one conformance suite checks
// both, and Cached puts a byte-bounded cache in front of either.
//
// A store holds only committed state. Staging an attempt's writes, and
// reading them back before they are committed, is the state package's job;
// it hands a store one Write per key when the attempt succeeds.
package statestore

import (
	"context"
	"fmt"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
)

// Direction is the order of a scan.
type Direction int8

const (
	Forward  Direction = iota // ascending map keys, front to back of a deque
	Backward                  // descending map keys, back to front of a deque
)

// Key names one user key's state: the namespace that owns it (the consumer
// group) and the Kafka key. Every collection of the key lives under it, so
// that one key's Write is one atomic unit in every store.
type Key struct {
	Namespace string
	Key       string
}

// Schema is a collection's durable identity: its kind and payload may not
// change once data was written under its name.
type Schema struct {
	Name    string
	Kind    config.CollectionKind
	Payload config.PayloadKind
}

// Route is a published collection's routing record: which namespace holds
// the collection a subsystem publishes, of which topic, and its schema, so
// a reader in another service can find and check it.
type Route struct {
	Subsystem  string
	Collection string
	Namespace  string
	// Topic is the topic whose state the collection holds: a reader needs
	// it to address the state, as keyed state's rows are keyed by topic
	// too.
	Topic   string
	Kind    config.CollectionKind
	Payload config.PayloadKind
}

// Entry is one map entry.
type Entry struct {
	Key   string
	Value []byte // nil in a keys-only scan
}

// Bounds are the slots a deque occupies: [Head, Tail). A deque that was
// never written has zero bounds; its length is Tail - Head. Pushing at the
// front takes slot Head-1, at the back slot Tail.
type Bounds struct{ Head, Tail int64 }

// Len is the number of items between the bounds.
func (b Bounds) Len() int64 { return b.Tail - b.Head }

// Slot is one deque item at its absolute position.
type Slot struct {
	Index int64
	Value []byte
}

// Range is a half-open range of deque slots [From, To).
type Range struct{ From, To int64 }

// Change is what one attempt did to one collection of a key, reduced to
// absolute effects (so that applying it twice is applying it once). Clear
// removes everything the collection held before the rest of the change
// applies; Clear followed by puts leaves exactly the puts.
type Change struct {
	Collection string
	Kind       config.CollectionKind
	// TTL bounds how long every row this change writes lives (0: no
	// expiry). Stores round it up to whole seconds.
	TTL   time.Duration
	Clear bool

	// Value: the new value when non-nil; nil with Clear set deletes it.
	Value []byte

	// Map: entries to write and keys to delete.
	Puts    []Entry
	Removes []string

	// Deque: the new bounds (nil: unchanged), slots to write and slot
	// ranges to delete (popped items, or those a capacity dropped).
	Bounds *Bounds
	Slots  []Slot
	Drops  []Range
}

// Marker records that the attempt of a message from Source (a topic and
// partition, "topic/partition") at Offset succeeded and its writes were
// applied: a redelivery of that message (the offset commit was lost in a
// crash) is then recognised and not applied again.
type Marker struct {
	Source string
	Offset int64
	// TTL bounds how long the marker row lives (0: it never expires).
	// Stores use exactly this, whatever the TTLs of the write's changes:
	// a source has one marker row per key, so a marker derived from one
	// write's changes would also end the protection of earlier writes of
	// that source, of collections that live longer. Stores round it up to
	// whole seconds.
	TTL time.Duration
}

// Write is one key's committed change: every collection the attempt
// touched, and the attempt's marker (nil: none). A store applies a Write
// atomically: a reader, a crash or a failed call never leaves part of it
// visible, with one exception. The Cassandra store applies a write too
// large for one batch in parts; a crash between them, or a failed call
// that returned a PartialWriteError, leaves it half applied until it is
// settled (see Pending).
type Write struct {
	Changes []Change
	Marker  *Marker
}

// Pending is a write that may be half-applied: the Cassandra store
// records a write too large for one batch before applying it in parts,
// and removes the record when all parts are in. A crash leaves the record
// for Store.Pending to list; a failed part that could not be settled at
// once hands it to the caller in a PartialWriteError. Either way, Settle
// completes it.
type Pending struct {
	Key     Key
	Source  string
	Write   Write
	Written time.Time // when it was recorded
	id      []byte    // the store's handle on the record
}

// PartialWriteError is Apply's error when a write too large for one batch
// failed after part of it may have become visible, and settling it at
// once, in the same call, failed too. The key's state may then show some
// of the write's effects and not others: a retry, or any read or write of
// the key, would run on half-applied state. Settle Pending (the write's
// record, also listed by Store.Pending) before the key is used again. Err
// is what failed (the part, and the settle); the error's fault class is
// Err's. The memory store never returns it.
type PartialWriteError struct {
	Pending Pending
	Err     error
}

func (e *PartialWriteError) Error() string {
	return fmt.Sprintf("statestore: a large write to %q of %q is half applied and must be settled before the key is used again: %v",
		e.Pending.Key.Key, e.Pending.Key.Namespace, e.Err)
}

func (e *PartialWriteError) Unwrap() error { return e.Err }

// Store is the durable side of keyed state. Every method is safe for
// concurrent use; the engine never runs two writes of one key at a time.
// Reads see every Write that returned successfully before them.
type Store interface {
	// Collections returns the namespace's durably registered schemas, by
	// name.
	Collections(ctx context.Context, namespace string) (map[string]Schema, error)
	// Register records s for the namespace unless a schema of that name is
	// already registered, and returns the one that is registered now (s,
	// or the older one, which may differ).
	Register(ctx context.Context, namespace string, s Schema) (Schema, error)

	// Route returns the routing record of a published collection.
	Route(ctx context.Context, subsystem, collection string) (Route, bool, error)
	// SetRoute writes (or replaces) a routing record.
	SetRoute(ctx context.Context, r Route) error
	// DeleteRoute removes a routing record if it still points at namespace
	// (another group may have taken the name since).
	DeleteRoute(ctx context.Context, subsystem, collection, namespace string) error

	// Value reads a value collection.
	Value(ctx context.Context, k Key, collection string) ([]byte, bool, error)
	// MapGet reads map entries; the result has one element per key, in
	// order, nil where the entry is absent.
	MapGet(ctx context.Context, k Key, collection string, keys []string) ([][]byte, error)
	// MapScan returns up to limit entries in dir order, starting after
	// `after` (exclusive) when hasAfter is set, else at the first key in
	// that direction. With keysOnly set, values are not read (nil).
	MapScan(ctx context.Context, k Key, collection string, dir Direction, after string, hasAfter bool,
		limit int, keysOnly bool) ([]Entry, error)
	// DequeBounds reads a deque's bounds (zero when it was never written
	// or is cleared).
	DequeBounds(ctx context.Context, k Key, collection string) (Bounds, error)
	// DequeSlots returns up to limit stored slots within r, in dir order
	// (Forward: ascending from r.From; Backward: descending from r.To-1).
	DequeSlots(ctx context.Context, k Key, collection string, r Range, dir Direction, limit int) ([]Slot, error)

	// Applied is the offset of the last marker written for k from source.
	Applied(ctx context.Context, k Key, source string) (offset int64, ok bool, err error)
	// Apply commits w for k atomically. A write holding an item larger
	// than MaxItemSize is refused with a permanent error before anything
	// of it is written.
	//
	// A write too large for one batch (Cassandra) is recorded and applied
	// in parts. When a part fails, Apply settles the record at once (the
	// same write, with the same timestamps) and succeeds if that does. If
	// settling fails too, it returns a *PartialWriteError: part of w may
	// be visible, and its Pending must be settled (Settle) before k is
	// read or written again, retries of w included. Any other error
	// leaves nothing of w visible, though w may have been applied whole
	// (a lost reply).
	Apply(ctx context.Context, k Key, w Write) error

	// Lease is the highest offset of source for which the namespace may
	// have applied a marked write (see SetLease); ok is false when none
	// was ever leased.
	Lease(ctx context.Context, namespace, source string) (high int64, ok bool, err error)
	// SetLease raises the lease. A consumer leases ahead of the offsets it
	// commits state for, so that the next owner of a partition knows which
	// offsets may need a marker check: only those up to the lease.
	SetLease(ctx context.Context, namespace, source string, high int64) error

	// Pending lists the writes of the namespace that may be half-applied,
	// oldest first (always none in memory).
	Pending(ctx context.Context, namespace string) ([]Pending, error)
	// Settle applies p fully (again: applying is idempotent, and a part
	// applied before is not applied over a newer write) and removes its
	// record. p comes from Pending or from a PartialWriteError. Settling
	// it again changes nothing.
	Settle(ctx context.Context, p Pending) error
}
