package state

import (
	"errors"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

// handle is what every collection handle holds: the attempt's transaction
// and the collection's staged part in it.
type handle struct {
	t *Txn
	s *staged
}

// open binds collection name, of kind, for the attempt of ctx.
func open(ctx *event.Context, name string, kind config.CollectionKind) (handle, error) {
	inv := (*invocation.Context)(ctx)
	if err := inv.Check(); err != nil {
		if errors.Is(err, invocation.ErrInvalidContext) {
			return handle{}, ErrExpired
		}
		return handle{}, err
	}
	p, _ := partitionOf(inv)
	if p == nil {
		return handle{}, ErrNoState
	}
	c, err := p.svc.lookup(name, kind)
	if err != nil {
		return handle{}, err
	}
	t := p.txn(inv)
	if t == nil {
		return handle{}, ErrExpired
	}
	return handle{t: t, s: t.stage(c)}, nil
}

// partitionOf is the keyed state of the partition an invocation runs in.
func partitionOf(c *invocation.Context) (*Partition, bool) {
	env := c.Env()
	if env == nil {
		return nil, false
	}
	p, ok := env.State.(*Partition)
	return p, ok
}

// PartitionOf is the keyed state of the partition an invocation runs in
// (for the engine's layers), nil when it has none.
func PartitionOf(c *invocation.Context) *Partition {
	p, _ := partitionOf(c)
	return p
}

// Commit writes this collection's staged changes now: they stay even if
// the attempt later fails.
func (h handle) Commit() error {
	if err := h.t.begin(); err != nil {
		return err
	}
	defer h.t.mu.Unlock()
	return h.t.commitOne(h.t.ctx, h.s)
}

// Rollback drops this collection's changes since its last commit.
func (h handle) Rollback() error {
	if err := h.t.begin(); err != nil {
		return err
	}
	defer h.t.mu.Unlock()
	h.s.reset(false)
	return nil
}
