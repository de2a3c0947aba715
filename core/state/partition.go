package state

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// LeaseAhead is how far past an offset a partition's lease is raised when
// a marked write reaches it: the lease is written once per this many
// offsets, and the next owner checks the markers of at most this many
// messages past the last committed one.
const LeaseAhead = 4096

// Partition is the keyed state of one assigned partition: which of its
// messages may have been applied by an earlier owner (up to the lease it
// found), the lease it holds, the transactions of the attempts under way,
// and the writes of its keys that were cut short.
type Partition struct {
	svc    *Service
	topic  string
	id     int32
	source string // "topic/partition", the markers' source

	// found is the lease an earlier owner left (-1: none): a message at
	// or below it may have been applied and is checked against its key's
	// marker before its handler runs.
	found int64

	leaseMu sync.Mutex
	leased  atomic.Int64 // the lease this owner wrote, -1 before the first

	// txns are the transactions of the attempts under way, by their
	// context; live counts them so that an attempt that used no state
	// costs one atomic load to settle.
	txns sync.Map // *invocation.Context → *Txn
	live atomic.Int64

	// partial are the writes of this partition's keys that failed after
	// some of their parts were applied, by key: a key's next attempt
	// settles its write before it runs.
	partialMu sync.Mutex
	partial   map[string]statestore.Pending
	partials  atomic.Int32
}

// Partition opens the keyed state of a partition: it settles the writes of
// the partition's keys that a crash cut short (a record is applied again
// with its own timestamps, so settling one a live writer is still applying
// does no harm), and reads the lease an earlier owner left.
func (s *Service) Partition(ctx context.Context, topic string, partition int32) (*Partition, error) {
	// What this process cached of the group's keys may predate another
	// owner's writes to this partition's keys.
	if f, ok := s.store.(statestore.Forgetter); ok {
		f.Forget(s.namespace)
	}
	p := &Partition{svc: s, topic: topic, id: partition, source: topic + "/" + strconv.Itoa(int(partition)), found: -1}
	p.leased.Store(-1)
	// A write with no marker (a timer's, a handle's Commit, a collection
	// read uncommitted) names no partition, only its topic in the key:
	// those of the topic are settled too. The partition whose key it is
	// may be live elsewhere, which settling does no harm; left to the
	// recovery sweep, its key would run on half-applied state here until
	// then.
	prefix := topic + "\x00"
	if err := s.settlePending(ctx, func(pd statestore.Pending) bool {
		return pd.Source == p.source || pd.Source == "" && strings.HasPrefix(pd.Key.Key, prefix)
	}); err != nil {
		return nil, err
	}
	high, ok, err := s.store.Lease(ctx, s.namespace, p.source)
	if err != nil {
		return nil, fmt.Errorf("reading the keyed-state lease of %s: %w", p.source, err)
	}
	if ok {
		p.found = high
		p.leased.Store(high)
	}
	return p, nil
}

// Local reports whether the partition's store works in memory.
func (p *Partition) Local() bool { return p.svc.local }

// rowKey is where the state of the partition's key lives: keyed state is
// kept per topic (one key's events on two topics may run at once, in two
// partitions), and no topic name contains a NUL.
func (p *Partition) rowKey(key string) statestore.Key {
	return statestore.Key{Namespace: p.svc.namespace, Key: p.topic + "\x00" + key}
}

// NeedsCheck reports whether the message at offset with key must have its
// marker checked before it runs: an earlier owner may have applied it, the
// attempt is a retry (failure demand: an earlier attempt's commit may have
// landed before something else failed), or a write of the key was cut
// short.
func (p *Partition) NeedsCheck(key string, offset int64, retry bool) bool {
	if retry || offset <= p.found {
		return true
	}
	return p.HasPartial(key)
}

// HasPartial reports whether a write of key was cut short and is not
// settled yet.
func (p *Partition) HasPartial(key string) bool { return p.partials.Load() != 0 && p.hasPartial(key) }

func (p *Partition) hasPartial(key string) bool {
	p.partialMu.Lock()
	defer p.partialMu.Unlock()
	_, ok := p.partial[key]
	return ok
}

// Applied settles a cut-short write of key, then reports whether the state
// writes of the message at offset with key were already applied (its
// key's marker is at or past it).
func (p *Partition) Applied(ctx context.Context, key string, offset int64) (bool, error) {
	if err := p.SettlePartial(ctx, key); err != nil {
		return false, err
	}
	at, ok, err := p.svc.store.Applied(ctx, p.rowKey(key), p.source)
	if err != nil {
		return false, storeError("reading the applied marker", err)
	}
	return ok && at >= offset, nil
}

// SettlePartial settles a write of key that was cut short, if any: a
// timer's attempt must not run on half-applied state either.
func (p *Partition) SettlePartial(ctx context.Context, key string) error {
	if p.partials.Load() == 0 {
		return nil
	}
	p.partialMu.Lock()
	pd, ok := p.partial[key]
	p.partialMu.Unlock()
	if !ok {
		return nil
	}
	if err := p.svc.store.Settle(ctx, pd); err != nil {
		return storeError("settling a write that was cut short", err)
	}
	p.partialMu.Lock()
	if cur, still := p.partial[key]; still && cur.Written.Equal(pd.Written) {
		delete(p.partial, key)
		p.partials.Add(-1)
	}
	p.partialMu.Unlock()
	return nil
}

// notePartial records a write of key that failed after some of its parts
// were applied.
func (p *Partition) notePartial(key string, err error) {
	var pw *statestore.PartialWriteError
	if !errors.As(err, &pw) {
		return
	}
	p.partialMu.Lock()
	defer p.partialMu.Unlock()
	if p.partial == nil {
		p.partial = make(map[string]statestore.Pending)
	}
	if _, ok := p.partial[key]; !ok {
		p.partials.Add(1)
	}
	p.partial[key] = pw.Pending
}

// lease makes sure the partition's lease covers offset before a marked
// write for it is applied.
func (p *Partition) lease(ctx context.Context, offset int64) error {
	if offset <= p.leased.Load() {
		return nil
	}
	p.leaseMu.Lock()
	defer p.leaseMu.Unlock()
	if offset <= p.leased.Load() {
		return nil
	}
	high := offset + LeaseAhead
	if err := p.svc.store.SetLease(ctx, p.svc.namespace, p.source, high); err != nil {
		return storeError("raising the partition's lease", err)
	}
	p.leased.Store(high)
	return nil
}

// txn returns the transaction of the attempt ctx, made on first use; nil
// once the attempt has ended (its transaction was taken).
func (p *Partition) txn(ctx *invocation.Context) *Txn {
	if t, ok := p.txns.Load(ctx); ok {
		return t.(*Txn)
	}
	t, loaded := p.txns.LoadOrStore(ctx, &Txn{p: p, ctx: ctx, colls: make(map[string]*staged, 2)})
	if loaded {
		return t.(*Txn)
	}
	p.live.Add(1)
	// The layer invalidates an attempt before it takes its transaction:
	// one made after that would never be committed.
	if !ctx.Valid() {
		if p.txns.CompareAndDelete(ctx, t) {
			p.live.Add(-1)
		}
		return nil
	}
	return t.(*Txn)
}

// Take removes and returns the transaction of the attempt ctx, nil when
// the attempt used no keyed state. Invalidate ctx first; the attempt's
// handles expire.
func (p *Partition) Take(ctx *invocation.Context) *Txn {
	if p.live.Load() == 0 {
		return nil
	}
	t, ok := p.txns.LoadAndDelete(ctx)
	if !ok {
		return nil
	}
	p.live.Add(-1)
	tx := t.(*Txn)
	tx.mu.Lock()
	tx.ended = true
	tx.mu.Unlock()
	return tx
}
