package timerstore

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/gocql/gocql"
)

// cassandraSegment is a Segment over the timer tables. Slab ids, slab sizes
// and times are u32 values stored in int columns by reinterpreting the bits.
type cassandraSegment struct {
	store    *cassandraStore
	id       gocql.UUID
	slabSize uint32
	keys     *keyCache

	// listed holds, per slab, when the slab-list row this segment wrote
	// expires (epoch seconds; MaxInt64 for never). For a slab not yet past
	// its end the expiry depends only on the slab, so writing the row again
	// for every timer in it would change nothing.
	listedMu sync.Mutex
	listed   map[uint32]int64

	// owed holds, per key and type, the old timers of a ClearAndSchedule
	// that failed part-way (see ClearAndSchedule).
	owedMu sync.Mutex
	owed   map[ownedKey][]Time
}

func newCassandraSegment(store *cassandraStore, id gocql.UUID, slabSize uint32) *cassandraSegment {
	return &cassandraSegment{store: store, id: id, slabSize: slabSize, keys: newKeyCache(keyCacheSize),
		listed: map[uint32]int64{}, owed: map[ownedKey][]Time{}}
}

func (s *cassandraSegment) retentionSecs() int64 { return int64(s.store.retention / time.Second) }

// keyState returns the key's partition of the key index, from the cache
// when it is there, and the version a write must store its result under.
func (s *cassandraSegment) keyState(ctx context.Context, key string) (keyPartition, uint64, error) {
	kp, ok, version := s.keys.begin(key, s.store.now().Unix())
	if ok {
		return kp, version, nil
	}
	kp, err := s.readKey(ctx, key)
	return kp, version, err
}

// settle records the outcome of a write to the key index: the state it
// left, or, after a failure, that the state is unknown.
func (s *cassandraSegment) settle(key string, version uint64, kp keyPartition, err error) {
	now := s.store.now().Unix()
	if err != nil {
		s.keys.drop(key, now)
		return
	}
	s.keys.put(key, version, kp, s.retentionSecs(), now)
}

func (s *cassandraSegment) SlabSize() uint32 { return s.slabSize }

func (s *cassandraSegment) ttl(target int64) int {
	return RowTTL(target, s.store.now(), s.store.retention)
}

func (s *cassandraSegment) Slabs(ctx context.Context) ([]uint32, error) {
	iter := s.store.s.Query(ctx, s.store.q.selectSlabs, s.id).Iter()
	var out []uint32
	var slab *int32
	for iter.Scan(&slab) {
		if slab != nil { // the static-only row of a segment without slabs
			out = append(out, uint32(*slab))
		}
		slab = nil
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err, "list slabs")
	}
	// Cassandra orders the int column signed; ids from 2^31 on come first.
	slices.Sort(out)
	return out, nil
}

func (s *cassandraSegment) SlabTriggers(ctx context.Context, slab uint32) ([]Trigger, error) {
	return s.slabTriggers(ctx, s.slabSize, slab)
}

func (s *cassandraSegment) slabTriggers(ctx context.Context, size, slab uint32) ([]Trigger, error) {
	iter := s.store.s.Query(ctx, s.store.q.selectSlabTriggers, s.id, int32(size), int32(slab)).Iter()
	var out []Trigger
	for {
		var typ int8
		var key string
		var at int32
		var span map[string]string
		if !iter.Scan(&typ, &key, &at, &span) {
			break
		}
		out = append(out, Trigger{Key: key, Time: Time(uint32(at)), Type: Type(typ), Span: cloneSpan(span)})
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err, "read slab %d", slab)
	}
	sortTriggers(out)
	return out, nil
}

func (s *cassandraSegment) KeyTimes(ctx context.Context, key string, typ Type) ([]Time, error) {
	kp, version, err := s.keyState(ctx, key)
	if err != nil {
		return nil, err
	}
	s.keys.put(key, version, kp, s.retentionSecs(), s.store.now().Unix())
	_, es := kp.entries(typ)
	if len(es) == 0 {
		return nil, nil
	}
	return times(es), nil
}

// Add and Remove write in one unlogged batch each (ClearAndSchedule in a
// few): one round trip, where the writes one after another cost one each,
// and the round trips were most of a timer's cost. They used to go in an
// order chosen for a crash between them: slab index before key index, so
// that an added timer could fire without being listed but never be listed
// without firing, and a removed one could stay listed but never fire
// without being listed. A crash of this process cannot split a batch, which
// reaches the coordinator whole. Cassandra may still apply part of an
// unlogged batch when it fails itself, and then the call returns an error:
// the timer's state is unknown until the call is made again and succeeds,
// which rewrites (or deletes) every row. A handler's failed call is retried
// with the handler, and a fired timer's delete is retried until it
// succeeds; a caller that gives up after such an error may be left with a
// timer that is listed but does not fire, or fires without being listed.
// A logged batch would apply all or nothing, but its batch log cost half
// again as much per timer in the mixed benchmark, on the Cassandra the
// handlers wait for.

// slabWrites adds to b the slab-list row of t's slab (unless this segment
// wrote it already and it lives long enough) and t's slab-index row, both
// living until the end of the slab plus retention. Once b is applied the
// caller calls the function it returns.
func (s *cassandraSegment) slabWrites(b *gocql.Batch, size uint32, t Trigger) (applied func()) {
	slab := SlabOf(t.Time, size)
	now := s.store.now()
	ttl := RowTTL(slabEnd(slab, size), now, s.store.retention)
	expires := int64(math.MaxInt64)
	if ttl > 0 {
		expires = now.Unix() + int64(ttl)
	}
	current := size == s.slabSize
	s.listedMu.Lock()
	listed := current && s.listed[slab] >= expires
	s.listedMu.Unlock()
	if !listed {
		b.Query(s.store.q.insertSlab, s.id, int32(slab), ttl)
	}
	b.Query(s.store.q.insertSlabTrigger, s.id, int32(size), int32(slab),
		int8(t.Type), t.Key, int32(t.Time), spanValue(t.Span), ttl)
	return func() {
		if current && !listed {
			s.listedMu.Lock()
			s.listed[slab] = max(s.listed[slab], expires)
			s.listedMu.Unlock()
		}
	}
}

// addToSlab writes t into the slab index of the given size.
func (s *cassandraSegment) addToSlab(ctx context.Context, size uint32, t Trigger) error {
	b := s.store.s.Batch(ctx)
	applied := s.slabWrites(b, size, t)
	if err := s.store.s.ExecuteBatch(b); err != nil {
		return wrap(err, "add %q at %d to slab %d", t.Key, t.Time, SlabOf(t.Time, size))
	}
	applied()
	return nil
}

func (s *cassandraSegment) unslabWrite(b *gocql.Batch, key string, at Time, typ Type) {
	b.Query(s.store.q.deleteSlabTrigger, s.id, int32(s.slabSize), int32(SlabOf(at, s.slabSize)), int8(typ), key, int32(at))
}

// Add writes t to the slab list, the slab index and the key index.
func (s *cassandraSegment) Add(ctx context.Context, t Trigger) error {
	kp, version, err := s.keyState(ctx, t.Key)
	if err != nil {
		return err
	}
	b := s.store.s.Batch(ctx)
	applied := s.slabWrites(b, s.slabSize, t)
	q := s.store.q
	typ := int8(t.Type)
	form, es := kp.entries(t.Type)
	span := cloneSpan(t.Span)
	var next keyPartition
	switch {
	case form == formAbsent || (form == formInline && es[0].time == t.Time):
		// Single timer (or the same one again, refreshing span and TTL).
		st := inlineState(t.Time, span)
		b.Query(q.setKeyState, s.ttl(int64(t.Time)), typ, st, s.id, t.Key)
		next = kp.with(t.Type, &st, kp.rows[t.Type])
	case form == formInline:
		// Promotion: both timers become clustering rows and the entry a
		// marker (atomic even unlogged: one partition).
		old := es[0]
		latest := max(old.time, t.Time)
		ttl := s.ttl(int64(latest))
		st := overflowState(latest)
		b.Query(q.insertKeyRow, s.id, t.Key, typ, int32(old.time), spanValue(old.span), ttl)
		b.Query(q.insertKeyRow, s.id, t.Key, typ, int32(t.Time), spanValue(t.Span), ttl)
		b.Query(q.setKeyState, ttl, typ, st, s.id, t.Key)
		next = kp.with(t.Type, &st, withRow(withRow(kp.rows[t.Type], old), keyEntry{time: t.Time, span: span}))
	default:
		// Overflow: add a row, and rewrite the marker so it lives as long as
		// the latest timer; a marker expiring first would hide the rows.
		latest := t.Time
		for _, e := range es {
			latest = max(latest, e.time)
		}
		st := overflowState(latest)
		b.Query(q.insertKeyRow, s.id, t.Key, typ, int32(t.Time), spanValue(t.Span), s.ttl(int64(t.Time)))
		b.Query(q.setKeyState, s.ttl(int64(latest)), typ, st, s.id, t.Key)
		next = kp.with(t.Type, &st, withRow(es, keyEntry{time: t.Time, span: span}))
	}
	err = s.store.s.ExecuteBatch(b)
	s.settle(t.Key, version, next, err)
	if err != nil {
		return wrap(err, "add %q at %d", t.Key, t.Time)
	}
	applied()
	return nil
}

// Remove deletes the timer from the slab index and the key index.
func (s *cassandraSegment) Remove(ctx context.Context, key string, at Time, typ Type) error {
	kp, version, err := s.keyState(ctx, key)
	if err != nil {
		return err
	}
	b := s.store.s.Batch(ctx)
	s.unslabWrite(b, key, at, typ)
	q := s.store.q
	form, es := kp.entries(typ)
	next := kp
	if idx := slices.IndexFunc(es, func(e keyEntry) bool { return e.time == at }); idx >= 0 {
		remaining := slices.Delete(slices.Clone(es), idx, idx+1)
		switch {
		case form == formInline:
			b.Query(q.deleteKeyState, int8(typ), s.id, key)
			next = kp.with(typ, nil, kp.rows[typ])
		case len(remaining) == 0:
			b.Query(q.deleteKeyState, int8(typ), s.id, key)
			b.Query(q.deleteKeyType, s.id, key, int8(typ))
			next = kp.with(typ, nil, nil)
		case len(remaining) == 1:
			// Demotion back to inline: the survivor moves into the state map
			// and every clustering row of the type goes.
			r := remaining[0]
			st := inlineState(r.time, r.span)
			b.Query(q.setKeyState, s.ttl(int64(r.time)), int8(typ), st, s.id, key)
			b.Query(q.deleteKeyType, s.id, key, int8(typ))
			next = kp.with(typ, &st, nil)
		default:
			b.Query(q.deleteKeyRow, s.id, key, int8(typ), int32(at))
			var st *keyTimerState
			if old, ok := kp.state[int8(typ)]; ok {
				st = &old
			}
			next = kp.with(typ, st, remaining)
		}
	}
	err = s.store.s.ExecuteBatch(b)
	s.settle(key, version, next, err)
	if err != nil {
		return wrap(err, "remove %q at %d", key, at)
	}
	s.owedMu.Lock()
	if times, ok := s.owed[ownedKey{key, typ}]; ok {
		if times = slices.DeleteFunc(times, func(t Time) bool { return t == at }); len(times) == 0 {
			delete(s.owed, ownedKey{key, typ})
		} else {
			s.owed[ownedKey{key, typ}] = times
		}
	}
	s.owedMu.Unlock()
	return nil
}

// ClearAndSchedule writes t and the key's new state in one batch, then
// deletes the old timers' slab-index rows in batches of unslabChunk, so a
// crash in between leaves a duplicate rather than no timer, and no batch
// grows past Cassandra's batch size limit however many timers the key had.
// A failure part-way leaves old timers that may still be in the slab index
// but no longer in the key index, where the next call would not find them:
// the segment keeps them owed for the key and type, and the next
// successful ClearAndSchedule deletes and returns them too (so the Manager
// drops them from memory).
func (s *cassandraSegment) ClearAndSchedule(ctx context.Context, t Trigger) ([]Time, error) {
	kp, version, err := s.keyState(ctx, t.Key)
	if err != nil {
		return nil, err
	}
	form, es := kp.entries(t.Type)
	var removed []Time
	for _, e := range es {
		if e.time != t.Time {
			removed = append(removed, e.time)
		}
	}
	owed := ownedKey{t.Key, t.Type}
	s.owedMu.Lock()
	for _, at := range s.owed[owed] {
		if at != t.Time && !slices.Contains(removed, at) {
			removed = append(removed, at)
		}
	}
	s.owedMu.Unlock()
	slices.SortFunc(removed, cmpTime)

	b := s.store.s.Batch(ctx)
	applied := s.slabWrites(b, s.slabSize, t)
	q := s.store.q
	typ := int8(t.Type)
	st := inlineState(t.Time, cloneSpan(t.Span))
	b.Query(q.setKeyState, s.ttl(int64(t.Time)), typ, st, s.id, t.Key)
	// Clustering rows of an inline type are strays Cassandra keeps; the
	// cache keeps them too, so it reads what a fresh read would.
	rows := kp.rows[t.Type]
	if form == formOverflow {
		b.Query(q.deleteKeyType, s.id, t.Key, typ)
		rows = nil
	}
	err = s.store.s.ExecuteBatch(b)
	s.settle(t.Key, version, kp.with(t.Type, &st, rows), err)
	if err == nil {
		applied()
		for i := 0; i < len(removed) && err == nil; i += unslabChunk {
			b := s.store.s.Batch(ctx)
			for _, at := range removed[i:min(i+unslabChunk, len(removed))] {
				s.unslabWrite(b, t.Key, at, t.Type)
			}
			err = s.store.s.ExecuteBatch(b)
		}
	}
	s.owedMu.Lock()
	defer s.owedMu.Unlock()
	if err != nil {
		s.owed[owed] = removed
		return nil, wrap(err, "replace the timers of %q", t.Key)
	}
	delete(s.owed, owed)
	return removed, nil
}

// unslabChunk is how many slab-index deletes go in one batch: far below
// Cassandra's default batch_size_fail_threshold (50 KiB) for any key.
const unslabChunk = 64

// ownedKey names the timers of one key and type.
type ownedKey struct {
	key string
	typ Type
}

func (s *cassandraSegment) DeleteSlab(ctx context.Context, slab uint32) error {
	s.listedMu.Lock()
	delete(s.listed, slab)
	s.listedMu.Unlock()
	if err := s.store.s.Query(ctx, s.store.q.deleteSlab, s.id, int32(slab)).Exec(); err != nil {
		return wrap(err, "delete slab %d", slab)
	}
	return nil
}

func (s *cassandraSegment) TypeKeys(ctx context.Context, typ Type, through Time) ([]string, error) {
	slabs, err := s.Slabs(ctx)
	if err != nil {
		return nil, err
	}
	seen := map[string]struct{}{}
	var out []string
	last := SlabOf(through, s.slabSize)
	for _, slab := range slabs {
		if slab > last {
			break // ascending
		}
		iter := s.store.s.Query(ctx, s.store.q.selectSlabTypeKeys, s.id, int32(s.slabSize), int32(slab), int8(typ)).Iter()
		var key string
		for iter.Scan(&key) {
			if _, ok := seen[key]; !ok {
				seen[key] = struct{}{}
				out = append(out, key)
			}
		}
		if err := iter.Close(); err != nil {
			return nil, wrap(err, "list keys with timers of type %d in slab %d", typ, slab)
		}
	}
	return out, nil
}

// withRow returns rows with e in place of the row of the same time, or
// added: a clustering row written again replaces the old one.
func withRow(rows []keyEntry, e keyEntry) []keyEntry {
	out := slices.DeleteFunc(slices.Clone(rows), func(r keyEntry) bool { return r.time == e.time })
	return append(out, e)
}
