package timerstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/fault"
)

// segmentVersion is the layout version this store writes: typed tables
// plus the static per-type key state (the original's V3).
const segmentVersion = 3

// NewCassandra returns a Store over the timer tables of the session's
// keyspace. Rows expire retention after the moment they stop being needed
// (the timer's time, or the end of its slab), so timers that are never
// completed do not accumulate forever.
func NewCassandra(s *cassandra.Session, retention time.Duration) Store {
	return &cassandraStore{s: s, retention: retention, q: newStatements(s.Keyspace()), now: time.Now}
}

type cassandraStore struct {
	s         *cassandra.Session
	retention time.Duration
	q         statements
	now       func() time.Time // the clock TTLs are computed from
}

func (c *cassandraStore) Segment(ctx context.Context, group, topic string, partition int32, slabSize uint32) (Segment, error) {
	id := gocql.UUID(SegmentID(group, topic, partition))
	name := segmentName(group, topic, partition)
	seg := newCassandraSegment(c, id, slabSize)

	var storedName *string
	var storedSize *int32
	var version *int8
	err := c.s.Query(ctx, c.q.selectSegment, id).Scan(&storedName, &storedSize, &version)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return nil, wrap(err, "read timer segment %s", name)
	}
	if version == nil {
		// New segment, or one that only has slab rows (its static row was
		// deleted): write the metadata. Concurrent openers write the same
		// values, so this needs no lightweight transaction.
		if err := c.s.Query(ctx, c.q.insertSegment, id, name, int32(slabSize), int8(segmentVersion)).Exec(); err != nil {
			return nil, wrap(err, "create timer segment %s", name)
		}
		return seg, nil
	}
	stored := uint32(derefInt32(storedSize))
	switch {
	case *version == 2:
		if err := seg.upgradeV2(ctx, stored); err != nil {
			return nil, fmt.Errorf("timerstore: upgrade segment %s to version 3: %w", name, err)
		}
	case *version != segmentVersion:
		return nil, fault.Terminal(fmt.Errorf("timerstore: timer segment %s has layout version %d; only versions 2 and 3 are supported", name, *version))
	}
	if stored != slabSize {
		if err := seg.rebucket(ctx, stored); err != nil {
			return nil, fmt.Errorf("timerstore: change slab size of segment %s from %d to %d: %w", name, stored, slabSize, err)
		}
	}
	return seg, nil
}

func derefInt32(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// wrap adds context to a Cassandra error and gives it a fault class.
func wrap(err error, format string, args ...any) error {
	return cassandra.Classify(fmt.Errorf("timerstore: "+format+": %w", append(args, err)...))
}
