package dedupstore

import (
	"sync"
	"time"
)

// Memory is the in-memory store of mock mode. It is keyed like the
// Cassandra table (ids include the group, topic and partition), so one
// set of ids serves every client of the process and a partition moving
// between them keeps its ids, as it would in Cassandra.
type Memory struct {
	ids *memoryIDs
	ttl time.Duration
}

type memoryIDs struct {
	now func() time.Time

	mu      sync.Mutex
	expires map[ID]time.Time
	// sweepAt is when the next record sweeps out expired ids, which keeps
	// the map from holding what no lookup would return.
	sweepAt time.Time
}

// NewMemory returns an empty store whose ids expire ttl after they were
// recorded.
func NewMemory(ttl time.Duration) Memory {
	return Memory{ids: &memoryIDs{now: time.Now, expires: make(map[ID]time.Time)}, ttl: ttl}
}

// WithTTL is the store over the same ids whose records expire after ttl
// (each client of a process has its own idempotence_ttl).
func (m Memory) WithTTL(ttl time.Duration) Memory { return Memory{ids: m.ids, ttl: ttl} }

// Exists implements Store.
func (m Memory) Exists(id ID, done func(bool, error)) {
	s := m.ids
	s.mu.Lock()
	exp, ok := s.expires[id]
	found := ok && s.now().Before(exp)
	s.mu.Unlock()
	done(found, nil)
}

// Record implements Store.
func (m Memory) Record(id ID, done func(error)) {
	s := m.ids
	now := s.now()
	s.mu.Lock()
	s.expires[id] = now.Add(m.ttl)
	if now.After(s.sweepAt) {
		s.sweepLocked(now)
	}
	s.mu.Unlock()
	done(nil)
}

func (s *memoryIDs) sweepLocked(now time.Time) {
	for id, exp := range s.expires {
		if !now.Before(exp) {
			delete(s.expires, id)
		}
	}
	s.sweepAt = now.Add(time.Minute)
}

// Local implements Store.
func (Memory) Local() bool { return true }
