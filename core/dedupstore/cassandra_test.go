package dedupstore

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

func connect(t *testing.T, opts cassandra.Options) *cassandra.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := cassandra.Connect(ctx, opts)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func cassandraBackend(t *testing.T) func(*testing.T, time.Duration) Store {
	opts := cassandra.Options{
		Nodes:    testservices.RequireCassandra(t),
		Keyspace: testservices.UniqueName("dedup"),
		Logger:   slog.New(slog.DiscardHandler),
	}
	first := connect(t, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := first.Query(ctx, `DROP KEYSPACE IF EXISTS `+opts.Keyspace).Exec(); err != nil {
			t.Errorf("drop keyspace: %v", err)
		}
	})
	return func(t *testing.T, ttl time.Duration) Store { return NewCassandra(connect(t, opts), ttl) }
}

func TestCassandraConformance(t *testing.T) { runConformance(t, cassandraBackend) }

// A store whose session is gone answers with a classified error: the
// layer above counts a failed read as a miss and logs a failed write.
func TestCassandraFailuresAreReported(t *testing.T) {
	opts := cassandra.Options{
		Nodes:    testservices.RequireCassandra(t),
		Keyspace: testservices.UniqueName("dedup"),
		Logger:   slog.New(slog.DiscardHandler),
	}
	s := connect(t, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = connect(t, opts).Query(ctx, `DROP KEYSPACE IF EXISTS `+opts.Keyspace).Exec()
	})
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
