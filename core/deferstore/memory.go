package deferstore

import (
	"context"
	"slices"
	"sync"

	"github.com/prosody-events/prosody-go/core/timerstore"
)

// NewMemory returns a Store that keeps deferred entries in process memory
// for as long as the process lives. Segments are keyed by the segment id,
// as in Cassandra, so a partition that moves between clients of one process
// (mock mode) keeps its entries.
func NewMemory() Store {
	return &memoryStore{messages: map[[16]byte]*memQueues[int64]{}, timers: map[[16]byte]*memQueues[DeferredTimer]{}}
}

// InMemory tells the engine that the store's operations do not wait on
// the network.
func (s *memoryStore) InMemory() bool { return true }

type memoryStore struct {
	mu       sync.Mutex // guards both maps and every queue inside them
	messages map[[16]byte]*memQueues[int64]
	timers   map[[16]byte]*memQueues[DeferredTimer]
}

// memQueue is one key: entries ascending (offset or time) and the retry count.
type memQueue[E any] struct {
	entries []E
	retries uint32
}

// memQueues is one segment of one kind. order gives an entry's sort key.
type memQueues[E any] struct {
	mu    *sync.Mutex
	keys  map[string]*memQueue[E]
	order func(E) int64
}

func (s *memoryStore) Messages(_ context.Context, group, topic string, partition int32) (MessageSegment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := SegmentID(group, topic, partition)
	q, ok := s.messages[id]
	if !ok {
		q = &memQueues[int64]{mu: &s.mu, keys: map[string]*memQueue[int64]{}, order: func(o int64) int64 { return o }}
		s.messages[id] = q
	}
	return memMessages{q}, nil
}

func (s *memoryStore) Timers(_ context.Context, group, topic string, partition int32) (TimerSegment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := SegmentID(group, topic, partition)
	q, ok := s.timers[id]
	if !ok {
		q = &memQueues[DeferredTimer]{mu: &s.mu, keys: map[string]*memQueue[DeferredTimer]{},
			order: func(t DeferredTimer) int64 { return int64(t.Time) }}
		s.timers[id] = q
	}
	return memTimers{q}, nil
}

func (m *memQueues[E]) next(key string) (E, uint32, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.keys[key]
	if q == nil {
		var zero E
		return zero, 0, false
	}
	return q.entries[0], q.retries, true
}

func (m *memQueues[E]) deferFirst(key string, e E) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[key] = &memQueue[E]{entries: []E{e}}
}

// add inserts e at its place; an entry with the same sort key is replaced,
// as a Cassandra insert of the same clustering row would.
func (m *memQueues[E]) add(key string, e E) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.keys[key]
	if q == nil {
		m.keys[key] = &memQueue[E]{entries: []E{e}}
		return
	}
	i, found := m.find(q, m.order(e))
	if found {
		q.entries[i] = e
		return
	}
	q.entries = slices.Insert(q.entries, i, e)
}

func (m *memQueues[E]) find(q *memQueue[E], at int64) (int, bool) {
	return slices.BinarySearchFunc(q.entries, at, func(e E, at int64) int {
		switch o := m.order(e); {
		case o < at:
			return -1
		case o > at:
			return 1
		}
		return 0
	})
}

func (m *memQueues[E]) setRetries(key string, n uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.keys[key]; q != nil {
		q.retries = n
	}
}

// remove deletes the entry at `at`. With complete set, remaining entries
// get a fresh retry count. It returns the head left, if any.
func (m *memQueues[E]) remove(key string, at int64, complete bool) (E, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var zero E
	q := m.keys[key]
	if q == nil {
		return zero, false
	}
	if i, found := m.find(q, at); found {
		q.entries = slices.Delete(q.entries, i, i+1)
	}
	if len(q.entries) == 0 {
		delete(m.keys, key)
		return zero, false
	}
	if complete {
		q.retries = 0
	}
	return q.entries[0], true
}

func (m *memQueues[E]) delete(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, key)
}

type memMessages struct{ q *memQueues[int64] }

func (s memMessages) Next(_ context.Context, key string) (int64, uint32, bool, error) {
	o, r, ok := s.q.next(key)
	return o, r, ok, nil
}

func (s memMessages) DeferFirst(_ context.Context, key string, offset int64) error {
	s.q.deferFirst(key, offset)
	return nil
}

func (s memMessages) Append(_ context.Context, key string, offset int64) error {
	s.q.add(key, offset)
	return nil
}

func (s memMessages) SetRetries(_ context.Context, key string, retries uint32) error {
	s.q.setRetries(key, retries)
	return nil
}

func (s memMessages) Complete(_ context.Context, key string, offset int64) (int64, bool, error) {
	next, more := s.q.remove(key, offset, true)
	return next, more, nil
}

func (s memMessages) Delete(_ context.Context, key string) error {
	s.q.delete(key)
	return nil
}

type memTimers struct{ q *memQueues[DeferredTimer] }

func (s memTimers) Next(_ context.Context, key string) (DeferredTimer, uint32, bool, error) {
	t, r, ok := s.q.next(key)
	return cloneTimer(t), r, ok, nil
}

func (s memTimers) DeferFirst(_ context.Context, key string, t DeferredTimer) error {
	s.q.deferFirst(key, cloneTimer(t))
	return nil
}

func (s memTimers) Append(_ context.Context, key string, t DeferredTimer) error {
	s.q.add(key, cloneTimer(t))
	return nil
}

func (s memTimers) SetRetries(_ context.Context, key string, retries uint32) error {
	s.q.setRetries(key, retries)
	return nil
}

func (s memTimers) Complete(_ context.Context, key string, at timerstore.Time) (DeferredTimer, bool, error) {
	next, more := s.q.remove(key, int64(at), true)
	return cloneTimer(next), more, nil
}

func (s memTimers) Remove(_ context.Context, key string, at timerstore.Time) error {
	s.q.remove(key, int64(at), false)
	return nil
}

func (s memTimers) Times(_ context.Context, key string) ([]timerstore.Time, error) {
	s.q.mu.Lock()
	defer s.q.mu.Unlock()
	q := s.q.keys[key]
	if q == nil {
		return nil, nil
	}
	out := make([]timerstore.Time, len(q.entries))
	for i, e := range q.entries {
		out[i] = e.Time
	}
	return out, nil
}

func (s memTimers) Delete(_ context.Context, key string) error {
	s.q.delete(key)
	return nil
}
