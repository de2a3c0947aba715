package deferstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// DefaultCacheSize is the per-segment cache capacity the original uses
// (defer_store_cache_size).
const DefaultCacheSize = 8192

// NewCassandra returns a Store over the deferral tables of the session's
// keyspace. Deferred offsets live retention after their last write;
// deferred timers live retention after their time, like timer rows.
// cacheSize is the capacity of each opened segment's write-through cache;
// 0 disables it.
func NewCassandra(s *cassandra.Session, retention time.Duration, cacheSize int) Store {
	return &cassandraStore{s: s, retention: retention, cacheSize: cacheSize, q: newStatements(s.Keyspace()), now: time.Now}
}

type cassandraStore struct {
	s          *cassandra.Session
	retention  time.Duration
	cacheSize  int
	q          statements
	now        func() time.Time // the clock TTLs are computed from
	registered sync.Map         // gocql.UUID → struct{}: segments written to deferred_segments
}

// register writes the segment's registry row once per process. The row is
// only for operators (finding a segment's partition from its id), so it is
// written without a TTL and never read.
func (c *cassandraStore) register(ctx context.Context, group, topic string, partition int32) (gocql.UUID, error) {
	id := gocql.UUID(SegmentID(group, topic, partition))
	if _, ok := c.registered.Load(id); ok {
		return id, nil
	}
	if err := c.s.Query(ctx, c.q.insertSegment, id, topic, partition, group).Exec(); err != nil {
		return id, wrap(err, "register defer segment %s", segmentName(group, topic, partition))
	}
	c.registered.Store(id, struct{}{})
	return id, nil
}

// Messages opens a segment with an empty cache: a partition assigned again
// may have been changed by another process meanwhile, so nothing cached
// during an earlier assignment may be trusted.
func (c *cassandraStore) Messages(ctx context.Context, group, topic string, partition int32) (MessageSegment, error) {
	id, err := c.register(ctx, group, topic, partition)
	if err != nil {
		return nil, err
	}
	return &cassandraMessages{store: c, q: &c.q.offsets, id: id, cache: newCache[msgState](c.cacheSize)}, nil
}

// Timers opens a segment with an empty cache, as Messages.
func (c *cassandraStore) Timers(ctx context.Context, group, topic string, partition int32) (TimerSegment, error) {
	id, err := c.register(ctx, group, topic, partition)
	if err != nil {
		return nil, err
	}
	return &cassandraTimers{store: c, q: &c.q.timers, id: id, cache: newCache[timerState](c.cacheSize)}, nil
}

// ttl is the TTL of a row that must live until target (epoch seconds) plus
// retention, by the timer rows' formula. Offsets pass 0: retention only.
func (c *cassandraStore) ttl(target int64) int {
	return timerstore.RowTTL(target, c.now(), c.retention)
}

// wrap adds context to a Cassandra error and gives it a fault class (mostly
// transient).
func wrap(err error, format string, args ...any) error {
	return cassandra.Classify(fmt.Errorf("deferstore: "+format+": %w", append(args, err)...))
}

// spanValue writes an empty map rather than null, as the timer store does,
// so readers that expect a map (not an optional one) can always decode the
// column. Reads turn it back into nil (cloneSpan).
func spanValue(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}
