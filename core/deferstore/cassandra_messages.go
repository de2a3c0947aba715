package deferstore

import (
	"context"
	"errors"

	"github.com/gocql/gocql"
)

// msgState is what the cache knows of a key: nothing deferred (empty), or
// its head offset and retry count.
type msgState struct {
	empty   bool
	head    int64
	retries uint32
}

// cassandraMessages is a MessageSegment over deferred_offsets. Every write
// to one key touches one partition, so batches are atomic and isolated; the
// static next_offset always names the smallest live offset.
type cassandraMessages struct {
	store *cassandraStore
	q     *queueStatements
	id    gocql.UUID
	cache *cache[msgState]
}

// ttl is the fixed retention: deferred offsets are not tied to a time.
func (s *cassandraMessages) ttl() int { return s.store.ttl(0) }

func (s *cassandraMessages) Next(ctx context.Context, key string) (int64, uint32, bool, error) {
	st, err := s.state(ctx, key)
	return st.head, st.retries, !st.empty, err
}

// state returns the key's state from the cache or, on a miss, from the
// static row. A partition without next_offset (written before the hint
// existed, or whose hint expired first) is repaired from its first row.
func (s *cassandraMessages) state(ctx context.Context, key string) (msgState, error) {
	if st, ok := s.cache.get(key); ok {
		return st, nil
	}
	var seg gocql.UUID
	var k string
	var next *int64
	var retries *int32
	err := s.store.s.Query(ctx, s.q.selectHead, s.id, key).Scan(&seg, &k, &next, &retries)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return msgState{}, wrap(err, "read the deferred head of %q", key)
	}
	st := msgState{retries: uint32(deref(retries))}
	if next != nil {
		st.head = *next
	} else {
		var first int64
		err := s.store.s.Query(ctx, s.q.selectFirst, s.id, key).Scan(&first)
		switch {
		case errors.Is(err, gocql.ErrNotFound):
			st = msgState{empty: true}
		case err != nil:
			return msgState{}, wrap(err, "read the first deferred offset of %q", key)
		default:
			st.head = first
			if err := s.write(key, st, s.store.s.Query(ctx, s.q.setStatics, s.ttl(), first, int32(st.retries), s.id, key).Exec()); err != nil {
				return msgState{}, wrap(err, "repair the deferred head of %q", key)
			}
		}
	}
	s.cache.put(key, st)
	return st, nil
}

// write records the outcome of a write that leaves the key in state st:
// cached on success, forgotten on failure (the write may or may not have
// been applied).
func (s *cassandraMessages) write(key string, st msgState, err error) error {
	if err != nil {
		s.cache.del(key)
		return err
	}
	s.cache.put(key, st)
	return nil
}

func (s *cassandraMessages) DeferFirst(ctx context.Context, key string, offset int64) error {
	b := s.store.s.Batch(ctx)
	// Unless the key is known to be empty, clear whatever else it holds.
	// Range deletes spare the new row, which a partition delete in the same
	// batch (same timestamp) would shadow.
	if st, ok := s.cache.get(key); !ok || !st.empty {
		b.Query(s.q.deleteBefore, s.id, key, offset)
		b.Query(s.q.deleteAfter, s.id, key, offset)
	}
	b.Query(s.q.insertFirst, s.id, key, offset, int32(0), offset, s.ttl())
	err := s.write(key, msgState{head: offset}, s.store.s.ExecuteBatch(b))
	if err != nil {
		return wrap(err, "defer %q at offset %d", key, offset)
	}
	return nil
}

func (s *cassandraMessages) Append(ctx context.Context, key string, offset int64) error {
	st, err := s.state(ctx, key)
	if err != nil {
		return err
	}
	if st.empty {
		st = msgState{head: offset}
	}
	st.head = min(st.head, offset)
	// The statics are rewritten with the row so they live as long as it.
	b := s.store.s.Batch(ctx)
	b.Query(s.q.insertEntry, s.id, key, offset, s.ttl())
	b.Query(s.q.setStatics, s.ttl(), st.head, int32(st.retries), s.id, key)
	if err := s.write(key, st, s.store.s.ExecuteBatch(b)); err != nil {
		return wrap(err, "append offset %d to %q", offset, key)
	}
	return nil
}

func (s *cassandraMessages) SetRetries(ctx context.Context, key string, retries uint32) error {
	st, err := s.state(ctx, key)
	if err != nil || st.empty {
		return err
	}
	st.retries = retries
	err = s.write(key, st, s.store.s.Query(ctx, s.q.setStatics, s.ttl(), st.head, int32(retries), s.id, key).Exec())
	if err != nil {
		return wrap(err, "set the retry count of %q", key)
	}
	return nil
}

func (s *cassandraMessages) Complete(ctx context.Context, key string, offset int64) (int64, bool, error) {
	st, err := s.state(ctx, key)
	if err != nil {
		return 0, false, err
	}
	if st.empty {
		return 0, false, nil
	}
	next := st.head
	if offset == st.head {
		// Reading from just after the head skips the tombstones of offsets
		// completed before.
		err := s.store.s.Query(ctx, s.q.selectAfter, s.id, key, offset).Scan(&next)
		if errors.Is(err, gocql.ErrNotFound) {
			return 0, false, s.Delete(ctx, key)
		}
		if err != nil {
			return 0, false, wrap(err, "read the deferred offset of %q after %d", key, offset)
		}
	}
	b := s.store.s.Batch(ctx)
	b.Query(s.q.deleteEntry, s.id, key, offset)
	b.Query(s.q.setStatics, s.ttl(), next, int32(0), s.id, key)
	if err := s.write(key, msgState{head: next}, s.store.s.ExecuteBatch(b)); err != nil {
		return 0, false, wrap(err, "complete offset %d of %q", offset, key)
	}
	return next, true, nil
}

func (s *cassandraMessages) Delete(ctx context.Context, key string) error {
	err := s.write(key, msgState{empty: true}, s.store.s.Query(ctx, s.q.deleteKey, s.id, key).Exec())
	if err != nil {
		return wrap(err, "delete the deferred offsets of %q", key)
	}
	return nil
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
