package deferstore

import (
	"context"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/internal/cassandratest"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

const testRetention = 24 * time.Hour

// cassandraEnv creates a fresh keyspace, dropped when the test ends, and
// returns an opener that connects a new session (closed at test end) each
// time.
func cassandraEnv(cacheSize int) backend {
	return func(t *testing.T) func(t *testing.T) Store {
		t.Helper()
		opts := cassandratest.Keyspace(t, "defer")
		return func(t *testing.T) Store {
			return NewCassandra(cassandratest.Connect(t, opts), testRetention, cacheSize)
		}
	}
}

// The suite runs with the default cache and without one: answers must not
// depend on it.
func TestCassandraConformance(t *testing.T) {
	for _, size := range []int{DefaultCacheSize, 0} {
		env := cassandraEnv(size)
		t.Run("messages", func(t *testing.T) { runConformance(t, env, messageCases) })
		t.Run("timers", func(t *testing.T) { runConformance(t, env, timerCases) })
	}
}

// fixture is a Cassandra store plus its session, for tests that look at
// the rows directly.
type fixture struct {
	s     *cassandra.Session
	store *cassandraStore
	ctx   context.Context
}

func newFixture(t *testing.T, retention time.Duration) fixture {
	st := cassandraEnv(DefaultCacheSize)(t)(t).(*cassandraStore)
	st.retention = retention
	return fixture{s: st.s, store: st, ctx: testCtx(t)}
}

func (f fixture) exec(t *testing.T, stmt string, values ...any) {
	t.Helper()
	if err := f.s.Query(f.ctx, stmt, values...).Exec(); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

func TestCassandraRegistersSegments(t *testing.T) {
	f := newFixture(t, testRetention)
	if _, err := f.store.Messages(f.ctx, "grp", "orders", 7); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Timers(f.ctx, "grp", "orders", 7); err != nil {
		t.Fatal(err)
	}
	var topic, group string
	var partition int32
	err := f.s.Query(f.ctx, `SELECT topic, partition, consumer_group FROM `+f.s.Keyspace()+`.deferred_segments WHERE id = ?`,
		gocql.UUID(SegmentID("grp", "orders", 7))).Scan(&topic, &partition, &group)
	if err != nil || topic != "orders" || partition != 7 || group != "grp" {
		t.Fatalf("registry row = %q, %d, %q, %v", topic, partition, group, err)
	}
}

func TestCassandraRepairsLegacyNextOffset(t *testing.T) {
	f := newFixture(t, testRetention)
	id := gocql.UUID(SegmentID("g", "t", 0))
	tbl := f.s.Keyspace() + ".deferred_offsets"
	// Written as the original did before next_offset existed.
	f.exec(t, `INSERT INTO `+tbl+` (segment_id, key, offset, retry_count) VALUES (?, 'k', 12, 3)`, id)
	f.exec(t, `INSERT INTO `+tbl+` (segment_id, key, offset) VALUES (?, 'k', 15)`, id)
	seg, err := f.store.Messages(f.ctx, "g", "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	o, r, ok, err := seg.Next(f.ctx, "k")
	if err != nil || !ok || o != 12 || r != 3 {
		t.Fatalf("Next = %d, %d, %v, %v; want 12, 3", o, r, ok, err)
	}
	var next *int64
	if err := f.s.Query(f.ctx, `SELECT next_offset FROM `+tbl+` WHERE segment_id = ? AND key = 'k' LIMIT 1`, id).Scan(&next); err != nil || next == nil || *next != 12 {
		t.Fatalf("next_offset after repair = %v, %v; want 12", next, err)
	}
	if n, more, err := seg.Complete(f.ctx, "k", 12); err != nil || !more || n != 15 {
		t.Fatalf("Complete = %d, %v, %v; want 15", n, more, err)
	}
}

func TestCassandraRepairsLegacyNextTimer(t *testing.T) {
	f := newFixture(t, testRetention)
	id := gocql.UUID(SegmentID("g", "t", 0))
	tbl := f.s.Keyspace() + ".deferred_timers"
	f.exec(t, `INSERT INTO `+tbl+` (segment_id, key, original_time, span, retry_count) VALUES (?, 'k', 40, {'traceparent': 'x'}, 2)`, id)
	f.exec(t, `INSERT INTO `+tbl+` (segment_id, key, original_time, span) VALUES (?, 'k', 90, {})`, id)
	seg, err := f.store.Timers(f.ctx, "g", "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	got, r, ok, err := seg.Next(f.ctx, "k")
	if err != nil || !ok || got.Time != 40 || got.Span["traceparent"] != "x" || r != 2 {
		t.Fatalf("Next = %+v, %d, %v, %v; want 40 with its span, 2", got, r, ok, err)
	}
	var nt *nextTimer
	if err := f.s.Query(f.ctx, `SELECT next_timer FROM `+tbl+` WHERE segment_id = ? AND key = 'k' LIMIT 1`, id).Scan(&nt); err != nil || nt == nil || nt.Time != 40 {
		t.Fatalf("next_timer after repair = %+v, %v; want time 40", nt, err)
	}
	if n, more, err := seg.Complete(f.ctx, "k", 40); err != nil || !more || n.Time != 90 || n.Span != nil {
		t.Fatalf("Complete = %+v, %v, %v; want 90 without span", n, more, err)
	}
}

// ttlNear fails unless got is within a few seconds below want (the test
// takes time between the write and the read).
func ttlNear(t *testing.T, what string, got, want int) {
	t.Helper()
	if got > want || got < want-30 {
		t.Errorf("TTL of %s = %d, want about %d", what, got, want)
	}
}

func TestCassandraRowsCarryTTLs(t *testing.T) {
	f := newFixture(t, time.Hour)
	ks := f.s.Keyspace()
	id := gocql.UUID(SegmentID("g", "t", 0))

	msgs, err := f.store.Messages(f.ctx, "g", "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := msgs.DeferFirst(f.ctx, "k", 5); err != nil {
		t.Fatal(err)
	}
	if err := msgs.Append(f.ctx, "k", 6); err != nil {
		t.Fatal(err)
	}
	iter := f.s.Query(f.ctx, `SELECT offset, TTL(retry_count), TTL(next_offset) FROM `+ks+`.deferred_offsets WHERE segment_id = ? AND key = 'k'`, id).Iter()
	var offset int64
	var rTTL, nTTL *int
	rows := 0
	for iter.Scan(&offset, &rTTL, &nTTL) {
		rows++
		if rTTL == nil || nTTL == nil {
			t.Fatalf("offset %d: static TTLs %v, %v", offset, rTTL, nTTL)
		}
		ttlNear(t, "retry_count", *rTTL, 3600)
		ttlNear(t, "next_offset", *nTTL, 3600)
	}
	if err := iter.Close(); err != nil || rows != 2 {
		t.Fatalf("read offsets: %d rows, %v", rows, err)
	}
	// The offset rows have no regular column to ask TTL() of; they are
	// written by the same statements (same USING TTL) as the statics.

	timers, err := f.store.Timers(f.ctx, "g", "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	at := timerstore.TimeOf(now.Add(10 * time.Minute))
	past := timerstore.TimeOf(now.Add(-10 * time.Minute))
	if err := timers.DeferFirst(f.ctx, "k", DeferredTimer{Time: past}); err != nil {
		t.Fatal(err)
	}
	if err := timers.Append(f.ctx, "k", DeferredTimer{Time: at}); err != nil {
		t.Fatal(err)
	}
	future := int(int64(at)-now.Unix()) + 3600
	want := map[int32]int{int32(past): 3600, int32(at): future}
	iter = f.s.Query(f.ctx, `SELECT original_time, TTL(span), TTL(retry_count), TTL(next_timer) FROM `+ks+`.deferred_timers WHERE segment_id = ? AND key = 'k'`, id).Iter()
	var ot int32
	var sTTL *int
	rows = 0
	for iter.Scan(&ot, &sTTL, &rTTL, &nTTL) {
		rows++
		if sTTL == nil || rTTL == nil || nTTL == nil {
			t.Fatalf("time %d: TTLs %v, %v, %v", ot, sTTL, rTTL, nTTL)
		}
		ttlNear(t, "span", *sTTL, want[ot])
		// The statics were last written by Append, for the later time.
		ttlNear(t, "retry_count", *rTTL, future)
		ttlNear(t, "next_timer", *nTTL, future)
	}
	if err := iter.Close(); err != nil || rows != 2 {
		t.Fatalf("read timers: %d rows, %v", rows, err)
	}
}

// A write that fails leaves the cache without the key, so the next read
// goes to the store instead of trusting a state the write may have changed.
func TestCassandraFailedWriteForgetsCachedState(t *testing.T) {
	f := newFixture(t, testRetention)
	seg, err := f.store.Messages(f.ctx, "g", "t", 0)
	if err != nil {
		t.Fatal(err)
	}
	m := seg.(*cassandraMessages)
	if _, _, ok, err := m.Next(f.ctx, "k"); err != nil || ok {
		t.Fatalf("Next = %v, %v", ok, err)
	}
	if st, ok := m.cache.get("k"); !ok || !st.empty {
		t.Fatalf("cache after Next = %+v, %v; want known empty", st, ok)
	}
	canceled, cancel := context.WithCancel(f.ctx)
	cancel()
	if err := m.DeferFirst(canceled, "k", 1); err == nil {
		t.Fatal("DeferFirst with a canceled context succeeded")
	}
	if _, ok := m.cache.get("k"); ok {
		t.Fatal("a failed write left the key cached")
	}
}
