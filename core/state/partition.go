package state

import (
	"context"
	"fmt"
	"strconv"
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
// found), the lease it holds, and the transactions of the attempts under
// way.
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

	unsure unsure
}

// Partition opens the keyed state of a partition, reading the lease an
// earlier owner left.
func (s *Service) Partition(ctx context.Context, topic string, partition int32) (*Partition, error) {
	// What this process cached of the group's keys may predate another
	// owner's writes to this partition's keys.
	if f, ok := s.store.(statestore.Forgetter); ok {
		f.Forget(s.namespace)
	}
	p := &Partition{svc: s, topic: topic, id: partition, source: topic + "/" + strconv.Itoa(int(partition)), found: -1}
	p.leased.Store(-1)
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

// Applied reports whether the state writes of the message at offset with
// key were already applied (its key's marker is at or past it).
func (p *Partition) Applied(ctx context.Context, key string, offset int64) (bool, error) {
	at, ok, err := p.svc.store.Applied(ctx, statestore.Key{Namespace: p.svc.namespace, Key: key}, p.source)
	if err != nil {
		return false, storeError("reading the applied marker", err)
	}
	return ok && at >= offset, nil
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

// txn returns the transaction of the attempt ctx, made on first use.
func (p *Partition) txn(ctx *invocation.Context) *Txn {
	if t, ok := p.txns.Load(ctx); ok {
		return t.(*Txn)
	}
	t, loaded := p.txns.LoadOrStore(ctx, &Txn{p: p, ctx: ctx, colls: make(map[string]*staged, 2)})
	if !loaded {
		p.live.Add(1)
	}
	return t.(*Txn)
}

// Take removes and returns the transaction of the attempt ctx, nil when
// the attempt used no keyed state. The attempt's handles expire.
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

// unsure are the messages whose commit failed with an unknown outcome, by
// key: their next attempt checks the marker first.
type unsure struct {
	mu sync.Mutex
	m  map[string]int64
	n  atomic.Int32
}

// NeedsCheck reports whether the message at offset with key must have its
// marker checked before it runs: an earlier owner may have applied it, or
// an earlier attempt's commit may have landed.
func (p *Partition) NeedsCheck(key string, offset int64) bool {
	if offset <= p.found {
		return true
	}
	if p.unsure.n.Load() == 0 {
		return false
	}
	p.unsure.mu.Lock()
	defer p.unsure.mu.Unlock()
	at, ok := p.unsure.m[key]
	return ok && at == offset
}

// Unsure records that the commit of the message at offset failed and may
// have landed.
func (p *Partition) Unsure(key string, offset int64) {
	p.unsure.mu.Lock()
	defer p.unsure.mu.Unlock()
	if p.unsure.m == nil {
		p.unsure.m = make(map[string]int64)
	}
	if _, ok := p.unsure.m[key]; !ok {
		p.unsure.n.Add(1)
	}
	p.unsure.m[key] = offset
}

// Settled records that the message at offset is applied (or found so).
func (p *Partition) Settled(key string, offset int64) {
	if p.unsure.n.Load() == 0 {
		return
	}
	p.unsure.mu.Lock()
	defer p.unsure.mu.Unlock()
	if at, ok := p.unsure.m[key]; ok && at == offset {
		delete(p.unsure.m, key)
		p.unsure.n.Add(-1)
	}
}
