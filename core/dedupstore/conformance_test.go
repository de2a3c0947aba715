package dedupstore

import (
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// backend prepares isolated storage and returns an opener: every Store it
// returns (with the given TTL) sees the same ids; for Cassandra each has a
// session of its own, which is how persistence is checked.
type backend func(t testing.TB) (open func(t testing.TB, ttl time.Duration) Store)

func newID() ID {
	var id ID
	_, _ = rand.Read(id[:])
	return id
}

func exists(t *testing.T, s Store, id ID) bool {
	t.Helper()
	type answer struct {
		found bool
		err   error
	}
	ch := make(chan answer, 1)
	s.Exists(id, func(found bool, err error) { ch <- answer{found, err} })
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("Exists: %v", a.err)
		}
		return a.found
	case <-time.After(time.Minute):
		t.Fatal("Exists did not answer within a minute")
		return false
	}
}

func recordID(t *testing.T, s Store, id ID) {
	t.Helper()
	ch := make(chan error, 1)
	s.Record(id, func(err error) { ch <- err })
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("Record: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Record did not answer within a minute")
	}
}

var conformanceCases = []struct {
	name string
	run  func(t *testing.T, open func(testing.TB, time.Duration) Store)
}{
	{"an id never recorded does not exist", func(t *testing.T, open func(testing.TB, time.Duration) Store) {
		if exists(t, open(t, time.Hour), newID()) {
			t.Fatal("a fresh id exists")
		}
	}},
	{"a recorded id exists, for every store over the same data", func(t *testing.T, open func(testing.TB, time.Duration) Store) {
		s := open(t, time.Hour)
		id := newID()
		recordID(t, s, id)
		if !exists(t, s, id) {
			t.Fatal("recorded id not found by its store")
		}
		if !exists(t, open(t, time.Hour), id) {
			t.Fatal("recorded id not found by another store over the same data")
		}
	}},
	{"recording twice keeps the id", func(t *testing.T, open func(testing.TB, time.Duration) Store) {
		s := open(t, time.Hour)
		id := newID()
		recordID(t, s, id)
		recordID(t, s, id)
		if !exists(t, s, id) {
			t.Fatal("id recorded twice not found")
		}
	}},
	{"a record expires after its TTL", func(t *testing.T, open func(testing.TB, time.Duration) Store) {
		s := open(t, time.Second)
		id := newID()
		recordID(t, s, id)
		testservices.WaitFor(t, 30*time.Second, "the id to expire", func() bool { return !exists(t, s, id) })
	}},
	{"concurrent calls each get their own answer", func(t *testing.T, open func(testing.TB, time.Duration) Store) {
		s := open(t, time.Hour)
		const n = 600 // several full batches, with batches under way
		ids := make([]ID, n)
		for i := range ids {
			ids[i] = newID()
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i += 2 {
			wg.Add(1)
			s.Record(ids[i], func(err error) {
				if err != nil {
					errs <- err
				}
				wg.Done()
			})
		}
		wg.Wait()
		found := make([]bool, n)
		for i := range ids {
			wg.Add(1)
			s.Exists(ids[i], func(ok bool, err error) {
				if err != nil {
					errs <- err
				}
				found[i] = ok
				wg.Done()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a call failed: %v", err)
		}
		for i, ok := range found {
			if ok != (i%2 == 0) {
				t.Fatalf("id %d: found %v, recorded %v", i, ok, i%2 == 0)
			}
		}
	}},
}

func runConformance(t *testing.T, b backend) {
	open := b(t)
	for _, tc := range conformanceCases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, open) })
	}
}

func TestMemoryConformance(t *testing.T) {
	runConformance(t, func(testing.TB) func(testing.TB, time.Duration) Store {
		m := NewMemory(time.Hour)
		return func(_ testing.TB, ttl time.Duration) Store { return m.WithTTL(ttl) }
	})
}
