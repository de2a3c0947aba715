package dedupstore

import (
	"errors"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/cassandratest"
)

func cassandraBackend(t testing.TB) func(testing.TB, time.Duration) Store {
	opts := cassandratest.Keyspace(t, "dedup")
	return func(t testing.TB, ttl time.Duration) Store { return NewCassandra(cassandratest.Connect(t, opts), ttl) }
}

func TestCassandraConformance(t *testing.T) { runConformance(t, cassandraBackend) }

// A store whose session is gone answers with a classified error: the
// layer above counts a failed read as a miss and logs a failed write.
func TestCassandraFailuresAreReported(t *testing.T) {
	s := cassandratest.Connect(t, cassandratest.Keyspace(t, "dedup"))
	store := NewCassandra(s, time.Hour)
	s.Close()
	found := make(chan error, 1)
	store.Exists(newID(), func(ok bool, err error) {
		if ok {
			err = errors.New("found an id on a closed session")
		}
		found <- err
	})
	if err := <-found; err == nil {
		t.Fatal("Exists on a closed session: no error")
	}
	wrote := make(chan error, 1)
	store.Record(newID(), func(err error) { wrote <- err })
	if err := <-wrote; err == nil || fault.IsTerminal(err) {
		t.Fatalf("Record on a closed session: %v, want a failure that is not terminal", err)
	}
}
