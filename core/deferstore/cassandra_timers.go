package deferstore

import (
	"context"
	"errors"
	"slices"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/timerstore"
)

// nextTimer is the user type deferred_next_timer: the head of a key's
// deferred timers, time and trace context together.
type nextTimer struct {
	Time int32             `cql:"time"`
	Span map[string]string `cql:"span"`
}

// timerState is what the cache knows of a key: nothing deferred (empty),
// or its head timer and retry count. head.Span is owned by the cache and
// copied out.
type timerState struct {
	empty   bool
	head    DeferredTimer
	retries uint32
}

// cassandraTimers is a TimerSegment over deferred_timers. Times are u32
// seconds stored in an int column by reinterpreting the bits; like the
// original, the clustering order (and so the head) is the signed order,
// which differs from time order only for times from 2038-01-19 on.
type cassandraTimers struct {
	store *cassandraStore
	q     *queueStatements
	id    gocql.UUID
	cache *cache[timerState]
}

// ttl keeps a row until its time plus retention, by the timer rows' formula.
func (s *cassandraTimers) ttl(at timerstore.Time) int { return s.store.ttl(int64(at)) }

func (s *cassandraTimers) Next(ctx context.Context, key string) (DeferredTimer, uint32, bool, error) {
	st, err := s.state(ctx, key)
	return cloneTimer(st.head), st.retries, !st.empty, err
}

// state is cassandraMessages.state for timers: the cache, else the static
// row, else (a legacy partition) the first row, which then becomes the hint.
func (s *cassandraTimers) state(ctx context.Context, key string) (timerState, error) {
	if st, ok := s.cache.get(key); ok {
		return st, nil
	}
	var seg gocql.UUID
	var k string
	var next *nextTimer
	var retries *int32
	err := s.store.s.Query(ctx, s.q.selectHead, s.id, key).Scan(&seg, &k, &next, &retries)
	if err != nil && !errors.Is(err, gocql.ErrNotFound) {
		return timerState{}, wrap(err, "read the deferred timer head of %q", key)
	}
	st := timerState{retries: uint32(deref(retries))}
	if next != nil {
		st.head = DeferredTimer{Time: timerstore.Time(uint32(next.Time)), Span: cloneSpan(next.Span)}
	} else {
		first, ok, err := s.scanOne(s.store.s.Query(ctx, s.q.selectFirst, s.id, key))
		switch {
		case err != nil:
			return timerState{}, wrap(err, "read the first deferred timer of %q", key)
		case !ok:
			st = timerState{empty: true}
		default:
			st.head = first
			if err := s.write(key, st, s.setStatics(ctx, key, st, first.Time).Exec()); err != nil {
				return timerState{}, wrap(err, "repair the deferred timer head of %q", key)
			}
		}
	}
	s.cache.put(key, st)
	return st, nil
}

// scanOne reads one (original_time, span) row; ok is false when there is none.
func (s *cassandraTimers) scanOne(q *gocql.Query) (DeferredTimer, bool, error) {
	var at int32
	var span map[string]string
	err := q.Scan(&at, &span)
	if errors.Is(err, gocql.ErrNotFound) {
		return DeferredTimer{}, false, nil
	}
	if err != nil {
		return DeferredTimer{}, false, err
	}
	return DeferredTimer{Time: timerstore.Time(uint32(at)), Span: cloneSpan(span)}, true, nil
}

// setStatics writes the head hint and the retry count, living until
// `until` (the latest time known to be queued) plus retention.
func (s *cassandraTimers) setStatics(ctx context.Context, key string, st timerState, until timerstore.Time) *gocql.Query {
	return s.store.s.Query(ctx, s.q.setStatics, s.ttl(max(until, st.head.Time)), hint(st.head), int32(st.retries), s.id, key)
}

func hint(t DeferredTimer) nextTimer {
	return nextTimer{Time: int32(t.Time), Span: spanValue(t.Span)}
}

// write is cassandraMessages.write: cache on success, forget on failure.
func (s *cassandraTimers) write(key string, st timerState, err error) error {
	if err != nil {
		s.cache.del(key)
		return err
	}
	st.head = cloneTimer(st.head)
	s.cache.put(key, st)
	return nil
}

func (s *cassandraTimers) DeferFirst(ctx context.Context, key string, t DeferredTimer) error {
	b := s.store.s.Batch(ctx)
	if st, ok := s.cache.get(key); !ok || !st.empty {
		b.Query(s.q.deleteBefore, s.id, key, int32(t.Time))
		b.Query(s.q.deleteAfter, s.id, key, int32(t.Time))
	}
	b.Query(s.q.insertFirst, s.id, key, int32(t.Time), spanValue(t.Span), int32(0), hint(t), s.ttl(t.Time))
	if err := s.write(key, timerState{head: t}, s.store.s.ExecuteBatch(b)); err != nil {
		return wrap(err, "defer the timer of %q at %d", key, t.Time)
	}
	return nil
}

func (s *cassandraTimers) Append(ctx context.Context, key string, t DeferredTimer) error {
	st, err := s.state(ctx, key)
	if err != nil {
		return err
	}
	if st.empty || int32(t.Time) <= int32(st.head.Time) { // clustering (signed) order
		st = timerState{head: t, retries: st.retries}
	}
	b := s.store.s.Batch(ctx)
	b.Query(s.q.insertEntry, s.id, key, int32(t.Time), spanValue(t.Span), s.ttl(t.Time))
	b.Query(s.q.setStatics, s.ttl(max(t.Time, st.head.Time)), hint(st.head), int32(st.retries), s.id, key)
	if err := s.write(key, st, s.store.s.ExecuteBatch(b)); err != nil {
		return wrap(err, "append the timer at %d to %q", t.Time, key)
	}
	return nil
}

func (s *cassandraTimers) SetRetries(ctx context.Context, key string, retries uint32) error {
	st, err := s.state(ctx, key)
	if err != nil || st.empty {
		return err
	}
	st.retries = retries
	if err := s.write(key, st, s.setStatics(ctx, key, st, st.head.Time).Exec()); err != nil {
		return wrap(err, "set the timer retry count of %q", key)
	}
	return nil
}

func (s *cassandraTimers) Complete(ctx context.Context, key string, at timerstore.Time) (DeferredTimer, bool, error) {
	next, more, err := s.remove(ctx, key, at, true)
	return cloneTimer(next), more, err
}

func (s *cassandraTimers) Remove(ctx context.Context, key string, at timerstore.Time) error {
	_, _, err := s.remove(ctx, key, at, false)
	return err
}

// remove deletes the entry at `at` and moves the head hint past it when it
// was the head, in one batch; the last entry takes the key with it. With
// complete set the retry count starts again from 0.
func (s *cassandraTimers) remove(ctx context.Context, key string, at timerstore.Time, complete bool) (DeferredTimer, bool, error) {
	st, err := s.state(ctx, key)
	if err != nil || st.empty {
		return DeferredTimer{}, false, err
	}
	if at == st.head.Time {
		next, ok, err := s.scanOne(s.store.s.Query(ctx, s.q.selectAfter, s.id, key, int32(at)))
		if err != nil {
			return DeferredTimer{}, false, wrap(err, "read the deferred timer of %q after %d", key, at)
		}
		if !ok {
			return DeferredTimer{}, false, s.Delete(ctx, key)
		}
		st.head = next
	}
	if complete {
		st.retries = 0
	}
	b := s.store.s.Batch(ctx)
	b.Query(s.q.deleteEntry, s.id, key, int32(at))
	b.Query(s.q.setStatics, s.ttl(st.head.Time), hint(st.head), int32(st.retries), s.id, key)
	if err := s.write(key, st, s.store.s.ExecuteBatch(b)); err != nil {
		return DeferredTimer{}, false, wrap(err, "remove the deferred timer of %q at %d", key, at)
	}
	return st.head, true, nil
}

func (s *cassandraTimers) Times(ctx context.Context, key string) ([]timerstore.Time, error) {
	iter := s.store.s.Query(ctx, s.q.selectAll, s.id, key).Iter()
	var out []timerstore.Time
	var at int32
	for iter.Scan(&at) {
		out = append(out, timerstore.Time(uint32(at)))
	}
	if err := iter.Close(); err != nil {
		return nil, wrap(err, "list the deferred timers of %q", key)
	}
	slices.Sort(out)
	return out, nil
}

func (s *cassandraTimers) Delete(ctx context.Context, key string) error {
	if err := s.write(key, timerState{empty: true}, s.store.s.Query(ctx, s.q.deleteKey, s.id, key).Exec()); err != nil {
		return wrap(err, "delete the deferred timers of %q", key)
	}
	return nil
}
