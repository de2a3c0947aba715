package cassandra

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

// freshKeyspace returns options for a keyspace that does not exist yet and
// drops it when the test ends.
func freshKeyspace(t *testing.T) Options {
	t.Helper()
	nodes := testservices.RequireCassandra(t)
	o := Options{Nodes: nodes, Keyspace: testservices.UniqueName("cass"), Logger: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() { dropKeyspace(t, o) })
	return o
}

// connectFresh connects to a new keyspace that is dropped after the test.
// The session closes first (cleanups run last registered first).
func connectFresh(t *testing.T) (Options, context.Context, *Session) {
	t.Helper()
	o := freshKeyspace(t)
	ctx := testContext(t)
	s, err := Connect(ctx, o)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(s.Close)
	return o, ctx, s
}

func dropKeyspace(t *testing.T, o Options) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A plain session: Connect would refuse a keyspace a test tampered with.
	cluster := gocql.NewCluster(o.Nodes...)
	cluster.Timeout = 30 * time.Second
	s, err := cluster.CreateSession()
	if err != nil {
		t.Errorf("connect to drop keyspace %s: %v", o.Keyspace, err)
		return
	}
	defer s.Close()
	if err := s.Query(`DROP KEYSPACE IF EXISTS ` + o.Keyspace).WithContext(ctx).Exec(); err != nil {
		t.Errorf("drop keyspace %s: %v", o.Keyspace, err)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// countingHandler counts log records whose message matches, so a test can
// tell how often a migration was really executed across sessions.
type countingHandler struct {
	msg   string
	count *atomic.Int64
}

func (h countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countingHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		h.count.Add(1)
	}
	return nil
}
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countingHandler) WithGroup(string) slog.Handler      { return h }
