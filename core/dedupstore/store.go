package dedupstore

// ID is a deduplication id (dedup.ID): 16 bytes, a UUID.
type ID = [16]byte

// Store holds the ids of handled messages. Its calls finish through a
// callback, which may run before the call returns (the in-memory store)
// or later on another goroutine (Cassandra); a callback runs exactly
// once and must not block.
type Store interface {
	// Exists reports whether id was recorded and has not expired.
	Exists(id ID, done func(found bool, err error))
	// Record stores id for the store's TTL.
	Record(id ID, done func(err error))
}

// Immediate is implemented by a store that answers without I/O (the store
// in memory): it is asked in the call itself, so the hot path of a
// consumer spends no callback (a closure on the heap) per message, and no
// cache is put in front of it.
type Immediate interface {
	// Found reports what Exists would.
	Found(id ID) bool
	// Put stores id, as Record would.
	Put(id ID)
	// Touch starts bringing what Found and Put of id will read into the
	// processor's caches, and returns without waiting for it: called as a
	// message is admitted, it overlaps the store's cache miss with the
	// rest of the admission.
	Touch(id ID)
}
