package timerstore

import (
	"context"
)

// rebucket moves every trigger from slabs of the stored size into slabs of
// the configured one. Order matters for crash safety: new rows are written
// first, then the segment records the new size, and only then are old rows
// deleted. A crash before the size update repeats the whole move on the
// next open; after it, stale slab-list rows only point at empty slabs,
// which the loader drops.
func (s *cassandraSegment) rebucket(ctx context.Context, oldSize uint32) error {
	slabs, err := s.Slabs(ctx)
	if err != nil {
		return err
	}
	newSlabs := map[uint32]bool{}
	for _, slab := range slabs {
		triggers, err := s.slabTriggers(ctx, oldSize, slab)
		if err != nil {
			return err
		}
		for _, t := range triggers {
			if err := s.addToSlab(ctx, s.slabSize, t); err != nil {
				return err
			}
			newSlabs[SlabOf(t.Time, s.slabSize)] = true
		}
	}
	if err := s.store.s.Query(ctx, s.store.q.updateSlabSize, int32(s.slabSize), s.id).Exec(); err != nil {
		return wrap(err, "record slab size %d", s.slabSize)
	}
	for _, slab := range slabs {
		if err := s.store.s.Query(ctx, s.store.q.deleteSlabPartition, s.id, int32(oldSize), int32(slab)).Exec(); err != nil {
			return wrap(err, "delete slab %d of size %d", slab, oldSize)
		}
		if !newSlabs[slab] {
			if err := s.DeleteSlab(ctx, slab); err != nil {
				return err
			}
		}
	}
	return nil
}

// upgradeV2 gives every key of a version 2 segment its static state entry:
// a key with one timer of a type gets it inline (and loses the row), a key
// with more gets the overflow marker. Keys are found through the slab index,
// which lists every stored timer. This store reads such keys correctly even
// without the upgrade; it is done so that original instances, which trust
// the state map once the version says 3, see the same timers.
func (s *cassandraSegment) upgradeV2(ctx context.Context, size uint32) error {
	slabs, err := s.Slabs(ctx)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, slab := range slabs {
		triggers, err := s.slabTriggers(ctx, size, slab)
		if err != nil {
			return err
		}
		for _, t := range triggers {
			if seen[t.Key] {
				continue
			}
			seen[t.Key] = true
			if err := s.upgradeKey(ctx, t.Key); err != nil {
				return err
			}
		}
	}
	if err := s.store.s.Query(ctx, s.store.q.updateVersion, int8(segmentVersion), s.id).Exec(); err != nil {
		return wrap(err, "record segment version %d", segmentVersion)
	}
	return nil
}

func (s *cassandraSegment) upgradeKey(ctx context.Context, key string) error {
	kp, err := s.readKey(ctx, key)
	if err != nil {
		return err
	}
	q := s.store.q
	for typ, rows := range kp.rows {
		if _, ok := kp.state[int8(typ)]; ok || len(rows) == 0 {
			continue
		}
		_, es := kp.entries(typ)
		if len(es) == 1 {
			b := s.store.s.Batch(ctx)
			b.Query(q.setKeyState, s.ttl(int64(es[0].time)), int8(typ), inlineState(es[0].time, es[0].span), s.id, key)
			b.Query(q.deleteKeyType, s.id, key, int8(typ))
			err = s.store.s.ExecuteBatch(b)
		} else {
			latest := es[len(es)-1].time
			err = s.store.s.Query(ctx, q.setKeyState, s.ttl(int64(latest)), int8(typ), overflowState(latest), s.id, key).Exec()
		}
		if err != nil {
			return wrap(err, "upgrade key %q", key)
		}
	}
	return nil
}
