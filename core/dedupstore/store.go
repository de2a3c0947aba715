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
	// Local reports whether calls finish without network I/O, before
	// they return.
	Local() bool
}
