package dedupstore

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/cassandra"
)

const (
	// readBatch and writeBatch are the most ids one read or write
	// carries: large enough that a busy consumer pays a round trip per
	// many messages; a batch of inserts stays under Cassandra's batch size
	// warning (5 KiB, about 80 of these rows).
	readBatch, writeBatch = 128, 64
	// maxRunning is how many reads, and how many writes, may be under way
	// at once. With the sizes above, 8 measured about 1.3 times the
	// throughput of 4 on a single node; the node, not the client, is then
	// the limit.
	maxRunning = 8
	// opTimeout bounds one batch; a lookup that times out is a miss, a
	// record that times out is logged by the caller.
	opTimeout = 10 * time.Second
)

// Cassandra is the store over the session keyspace's deduplication table.
type Cassandra struct {
	s      *cassandra.Session
	ttl    int // seconds
	selIn  string
	insert string

	reads  coalescer[lookup]
	writes coalescer[record]
}

type lookup struct {
	id   ID
	done func(bool, error)
}

type record struct {
	id   ID
	done func(error)
}

// NewCassandra returns the store whose records expire after ttl
// (idempotence_ttl; whole seconds, at least one).
func NewCassandra(s *cassandra.Session, ttl time.Duration) *Cassandra {
	table := s.Keyspace() + ".deduplication"
	c := &Cassandra{
		s:      s,
		ttl:    max(int(ttl/time.Second), 1),
		selIn:  `SELECT id FROM ` + table + ` WHERE id IN ?`,
		insert: `INSERT INTO ` + table + ` (id) VALUES (?) USING TTL ?`,
	}
	c.reads = coalescer[lookup]{maxRunning: maxRunning, maxBatch: readBatch, run: c.lookupBatch}
	c.writes = coalescer[record]{maxRunning: maxRunning, maxBatch: writeBatch, run: c.recordBatch}
	return c
}

// Exists implements Store.
func (c *Cassandra) Exists(id ID, done func(bool, error)) { c.reads.add(lookup{id, done}) }

// Record implements Store.
func (c *Cassandra) Record(id ID, done func(error)) { c.writes.add(record{id, done}) }

// lookupBatch reads which of the batch's ids exist, in one IN query (a
// single node answers it from its own replicas; a cluster's coordinator
// fans it out, still one round trip for the client).
func (c *Cassandra) lookupBatch(batch []lookup) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	ids := make([]gocql.UUID, len(batch))
	for i, l := range batch {
		ids[i] = gocql.UUID(l.id)
	}
	found := make(map[gocql.UUID]struct{}, 4)
	iter := c.s.Query(ctx, c.selIn, ids).Iter()
	var id gocql.UUID
	for iter.Scan(&id) {
		found[id] = struct{}{}
	}
	err := iter.Close()
	if err != nil {
		err = fmt.Errorf("reading %d deduplication ids: %w", len(batch), cassandra.Classify(err))
	}
	for _, l := range batch {
		_, ok := found[gocql.UUID(l.id)]
		l.done(ok && err == nil, err)
	}
}

// recordBatch writes the batch's ids in one unlogged batch. Its rows are
// in different partitions, so it is not atomic: a failure may leave some
// written, which only makes a later duplicate of those skipped, as it
// should be.
func (c *Cassandra) recordBatch(batch []record) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	var err error
	if len(batch) == 1 {
		err = c.s.Query(ctx, c.insert, gocql.UUID(batch[0].id), c.ttl).Exec()
	} else {
		b := c.s.Batch(ctx)
		for _, r := range batch {
			b.Query(c.insert, gocql.UUID(r.id), c.ttl)
		}
		err = c.s.ExecuteBatch(b)
	}
	if err != nil {
		err = fmt.Errorf("writing %d deduplication ids: %w", len(batch), cassandra.Classify(err))
	}
	for _, r := range batch {
		r.done(err)
	}
}
