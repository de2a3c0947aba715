package statestore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/fault"
)

// DefaultBatchLimit is the estimated size above which a Write no longer
// goes in one batch. Cassandra refuses batches over
// batch_size_fail_threshold (50 KiB by default) and logs each one over
// batch_size_warn_threshold (5 KiB). Cassandra 5.0 exempts
// single-partition batches from both (measured: a 1 MiB one applies
// without a warning), so the hard limit there is max_mutation_size (half
// a commit-log segment); but a server that does not exempt them, or a
// tightened threshold, would fail every large write, and big mutations
// stall memtables and replicas anyway. 32 KiB is below the failure
// threshold everywhere while keeping the parts path (a few round trips
// more) rare; WithBatchLimit raises it where the server is known.
const DefaultBatchLimit = 32 << 10

// mapGetChunk bounds the IN list of one MapGet query: coordinators read
// every listed row in one go, so a long list is one expensive request.
const mapGetChunk = 100

// CassandraOption tunes NewCassandra.
type CassandraOption func(*cassandraStore)

// WithBatchLimit sets the estimated batch size above which a Write is
// recorded in state_pending and applied in parts (default
// DefaultBatchLimit).
func WithBatchLimit(bytes int) CassandraOption {
	return func(c *cassandraStore) { c.batchLimit = max(bytes, 1) }
}

// NewCassandra returns a Store over the state_* tables of the session's
// keyspace (migration 0004_keyed_state.cql).
func NewCassandra(s *cassandra.Session, opts ...CassandraOption) Store {
	c := &cassandraStore{s: s, q: newStatements(s.Keyspace()), batchLimit: DefaultBatchLimit, clock: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c
}

type cassandraStore struct {
	s          *cassandra.Session
	q          statements
	batchLimit int
	clock      func() time.Time

	// afterPart, when set (tests), runs after each part of a write applied
	// in parts; an error stops the write there, as a failed part would.
	afterPart func(part int) error
	// afterRecord, when set (tests), runs after the header of a large
	// write's record is written; an error is taken for the header's
	// failure (its reply lost: the header may or may not be in).
	afterRecord func(id gocql.UUID) error
}

// wrap adds context to a Cassandra error and gives it a fault class
// (transient unless the statement itself is wrong).
func wrap(err error, format string, args ...any) error {
	return cassandra.Classify(fmt.Errorf("statestore: "+format+": %w", append(args, err)...))
}

var _ lifetimes = (*cassandraStore)(nil)

func (c *cassandraStore) now() time.Time { return c.clock() }

func (c *cassandraStore) Collections(ctx context.Context, namespace string) (map[string]Schema, error) {
	iter := c.s.Query(ctx, c.q.selectCollections, namespace).Iter()
	out := map[string]Schema{}
	var name, kind, payload string
	for iter.Scan(&name, &kind, &payload) {
		out[name] = Schema{Name: name, Kind: config.CollectionKind(kind), Payload: config.PayloadKind(payload)}
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err, "read the collections of %q", namespace)
	}
	return out, nil
}

func (c *cassandraStore) Register(ctx context.Context, namespace string, s Schema) (Schema, error) {
	existing := map[string]any{}
	applied, err := c.s.Query(ctx, c.q.registerCollection, namespace, s.Name, string(s.Kind), string(s.Payload)).
		MapScanCAS(existing)
	if err != nil {
		return Schema{}, wrap(err, "register collection %q of %q", s.Name, namespace)
	}
	if applied {
		return s, nil
	}
	kind, _ := existing["kind"].(string)
	payload, _ := existing["payload"].(string)
	return Schema{Name: s.Name, Kind: config.CollectionKind(kind), Payload: config.PayloadKind(payload)}, nil
}

func (c *cassandraStore) Route(ctx context.Context, subsystem, collection string) (Route, bool, error) {
	var ns, topic, kind, payload string
	err := c.s.Query(ctx, c.q.selectRoute, subsystem, collection).Scan(&ns, &topic, &kind, &payload)
	if errors.Is(err, gocql.ErrNotFound) {
		return Route{}, false, nil
	}
	if err != nil {
		return Route{}, false, wrap(err, "read the route of %s/%s", subsystem, collection)
	}
	return Route{Subsystem: subsystem, Collection: collection, Namespace: ns, Topic: topic,
		Kind: config.CollectionKind(kind), Payload: config.PayloadKind(payload)}, true, nil
}

// setRouteAttempts bounds SetRoute's race against DeleteRoute: each lost
// round means another process deleted or created the record meanwhile,
// which happens only while publishers change hands.
const setRouteAttempts = 8

// SetRoute is a lightweight transaction like DeleteRoute: create the
// record if absent, else update it if present; one of the two applies
// unless a concurrent writer switched the record's existence in between.
func (c *cassandraStore) SetRoute(ctx context.Context, r Route) error {
	for range setRouteAttempts {
		applied, err := c.s.Query(ctx, c.q.insertRoute, r.Subsystem, r.Collection, r.Namespace, r.Topic, string(r.Kind), string(r.Payload)).
			MapScanCAS(map[string]any{})
		if err != nil {
			return wrap(err, "create the route of %s/%s", r.Subsystem, r.Collection)
		}
		if applied {
			return nil
		}
		applied, err = c.s.Query(ctx, c.q.updateRoute, r.Namespace, r.Topic, string(r.Kind), string(r.Payload), r.Subsystem, r.Collection).
			MapScanCAS(map[string]any{})
		if err != nil {
			return wrap(err, "update the route of %s/%s", r.Subsystem, r.Collection)
		}
		if applied {
			return nil
		}
	}
	return fault.Transient(fmt.Errorf("statestore: set the route of %s/%s: lost %d races against concurrent writers", r.Subsystem, r.Collection, setRouteAttempts))
}

func (c *cassandraStore) DeleteRoute(ctx context.Context, subsystem, collection, namespace string) error {
	if _, err := c.s.Query(ctx, c.q.deleteRoute, subsystem, collection, namespace).MapScanCAS(map[string]any{}); err != nil {
		return wrap(err, "delete the route of %s/%s", subsystem, collection)
	}
	return nil
}

func (c *cassandraStore) Lease(ctx context.Context, namespace, source string) (int64, bool, error) {
	var high int64
	err := c.s.Query(ctx, c.q.selectLease, namespace, source).Scan(&high)
	if errors.Is(err, gocql.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, wrap(err, "read the lease of %q on %s", namespace, source)
	}
	return high, true, nil
}

// SetLease writes the lease with the offset as its write timestamp:
// Cassandra keeps the cell with the highest timestamp, so the highest
// lease wins in any order and without a read or a lightweight transaction.
func (c *cassandraStore) SetLease(ctx context.Context, namespace, source string, high int64) error {
	if err := c.s.Query(ctx, c.q.setLease, namespace, source, high, high).Exec(); err != nil {
		return wrap(err, "raise the lease of %q on %s to %d", namespace, source, high)
	}
	return nil
}

// emptyItem is the item of value and bounds rows. It must be a non-nil
// empty slice: gocql sends nil as null, which no clustering column takes.
var emptyItem = []byte{}

// rowUntil reads one row and how long its answer holds (zero: until a
// write). A row with a TTL is trusted one second less than Cassandra
// reports, as TTL() counts whole seconds from a truncated now.
func (c *cassandraStore) rowUntil(ctx context.Context, k Key, coll string, item []byte) ([]byte, bool, time.Time, error) {
	var v []byte
	var ttl *int
	now := c.now()
	err := c.s.Query(ctx, c.q.selectRow, k.Namespace, k.Key, coll, item).Scan(&v, &ttl)
	if errors.Is(err, gocql.ErrNotFound) {
		return nil, false, time.Time{}, nil
	}
	if err != nil {
		return nil, false, time.Time{}, err
	}
	if v == nil {
		v = []byte{}
	}
	return v, true, until(now, ttl), nil
}

func until(now time.Time, ttl *int) time.Time {
	if ttl == nil {
		return time.Time{}
	}
	return now.Add(time.Duration(*ttl-1) * time.Second)
}

func (c *cassandraStore) Value(ctx context.Context, k Key, collection string) ([]byte, bool, error) {
	v, ok, _, err := c.valueUntil(ctx, k, collection)
	return v, ok, err
}

func (c *cassandraStore) valueUntil(ctx context.Context, k Key, collection string) ([]byte, bool, time.Time, error) {
	v, ok, exp, err := c.rowUntil(ctx, k, collection, emptyItem)
	if err != nil {
		return nil, false, time.Time{}, wrap(err, "read value %q of %q", collection, k.Key)
	}
	return v, ok, exp, nil
}

func (c *cassandraStore) MapGet(ctx context.Context, k Key, collection string, keys []string) ([][]byte, error) {
	out, _, err := c.mapGetUntil(ctx, k, collection, keys)
	return out, err
}

func (c *cassandraStore) mapGetUntil(ctx context.Context, k Key, collection string, keys []string) ([][]byte, []time.Time, error) {
	type found struct {
		v   []byte
		exp time.Time
	}
	rows := make(map[string]found, len(keys))
	// Duplicates are asked for once; IN would return them once anyway.
	var distinct [][]byte
	seen := make(map[string]bool, len(keys))
	for _, key := range keys {
		if !seen[key] {
			seen[key] = true
			distinct = append(distinct, []byte(key))
		}
	}
	now := c.now()
	for start := 0; start < len(distinct); start += mapGetChunk {
		batch := distinct[start:min(start+mapGetChunk, len(distinct))]
		iter := c.s.Query(ctx, c.q.selectRows, k.Namespace, k.Key, collection, batch).Iter()
		var item, v []byte
		var ttl *int
		for iter.Scan(&item, &v, &ttl) {
			if v == nil {
				v = []byte{}
			}
			rows[string(item)] = found{v: v, exp: until(now, ttl)}
			item, v, ttl = nil, nil, nil
		}
		if err := iter.Close(); err != nil {
			return nil, nil, wrap(err, "read map %q of %q", collection, k.Key)
		}
	}
	out := make([][]byte, len(keys))
	exps := make([]time.Time, len(keys))
	for i, key := range keys {
		if f, ok := rows[key]; ok {
			// Duplicated keys share no backing array: callers may keep
			// and change each answer.
			out[i], exps[i] = append([]byte{}, f.v...), f.exp
		}
	}
	return out, exps, nil
}

func (c *cassandraStore) MapScan(ctx context.Context, k Key, collection string, dir Direction, after string, hasAfter bool,
	limit int, keysOnly bool) ([]Entry, error) {
	if limit <= 0 {
		return nil, nil
	}
	args := []any{k.Namespace, k.Key, collection}
	if hasAfter {
		args = append(args, []byte(after))
	}
	args = append(args, limit)
	iter := c.s.Query(ctx, c.q.mapScan[dirIndex(dir)][b2i(hasAfter)][b2i(keysOnly)], args...).PageSize(limit).Iter()
	var out []Entry
	var item, v []byte
	dest := []any{&item}
	if !keysOnly {
		dest = append(dest, &v)
	}
	for iter.Scan(dest...) {
		e := Entry{Key: string(item)}
		if !keysOnly {
			e.Value = v
			if e.Value == nil {
				e.Value = []byte{}
			}
		}
		out = append(out, e)
		item, v = nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err, "scan map %q of %q", collection, k.Key)
	}
	return out, nil
}

func (c *cassandraStore) DequeBounds(ctx context.Context, k Key, collection string) (Bounds, error) {
	b, _, err := c.boundsUntil(ctx, k, collection)
	return b, err
}

func (c *cassandraStore) boundsUntil(ctx context.Context, k Key, collection string) (Bounds, time.Time, error) {
	v, ok, exp, err := c.rowUntil(ctx, k, collection, emptyItem)
	if err != nil {
		return Bounds{}, time.Time{}, wrap(err, "read deque bounds %q of %q", collection, k.Key)
	}
	if !ok {
		return Bounds{}, time.Time{}, nil
	}
	b, err := decodeBounds(v)
	if err != nil {
		return Bounds{}, time.Time{}, fault.Terminal(fmt.Errorf("statestore: deque %q of %q: %w", collection, k.Key, err))
	}
	return b, exp, nil
}

func (c *cassandraStore) DequeSlots(ctx context.Context, k Key, collection string, r Range, dir Direction, limit int) ([]Slot, error) {
	if limit <= 0 || r.From >= r.To {
		return nil, nil
	}
	iter := c.s.Query(ctx, c.q.dequeSlots[dirIndex(dir)], k.Namespace, k.Key, collection,
		[]byte(slotItem(r.From)), []byte(slotItem(r.To)), limit).PageSize(limit).Iter()
	var out []Slot
	var item, v []byte
	for iter.Scan(&item, &v) {
		i, err := slotIndex(item)
		if err != nil {
			_ = iter.Close()
			return nil, fault.Terminal(fmt.Errorf("statestore: deque %q of %q: %w", collection, k.Key, err))
		}
		if v == nil {
			v = []byte{}
		}
		out = append(out, Slot{Index: i, Value: v})
		item, v = nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err, "read deque %q of %q", collection, k.Key)
	}
	return out, nil
}

func (c *cassandraStore) Applied(ctx context.Context, k Key, source string) (int64, bool, error) {
	v, ok, _, err := c.rowUntil(ctx, k, markerColl, []byte(source))
	if err != nil || !ok {
		if err != nil {
			err = wrap(err, "read the marker of %q from %s", k.Key, source)
		}
		return 0, false, err
	}
	o, err := decodeOffset(v)
	if err != nil {
		return 0, false, fault.Terminal(fmt.Errorf("statestore: marker of %q from %s: %w", k.Key, source, err))
	}
	return o, true, nil
}

func dirIndex(d Direction) int {
	if d == Backward {
		return 1
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
