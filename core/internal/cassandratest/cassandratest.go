// Package cassandratest gives the stores' tests a keyspace of their own on
// the test Cassandra, and sessions on it that close when the test ends.
package cassandratest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// Keyspace connects once (which creates and migrates a keyspace named
// after prefix, unique to this test) and returns the options of that
// keyspace; it is dropped when the test ends. It fails the test when no
// Cassandra is listening (testservices.RequireCassandra).
func Keyspace(t testing.TB, prefix string) cassandra.Options {
	t.Helper()
	opts := cassandra.Options{
		Nodes:    testservices.RequireCassandra(t),
		Keyspace: testservices.UniqueName(prefix),
		Logger:   slog.New(slog.DiscardHandler),
	}
	first := Connect(t, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := first.Query(ctx, `DROP KEYSPACE IF EXISTS `+opts.Keyspace).Exec(); err != nil {
			t.Errorf("drop keyspace: %v", err)
		}
	})
	return opts
}

// Connect opens a session with opts, closed when the test ends.
func Connect(t testing.TB, opts cassandra.Options) *cassandra.Session {
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
