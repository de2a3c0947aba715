package client

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// DefaultStateCacheSize is the keyed-state cache's capacity when
// state_cache_size_bytes is not set.
const DefaultStateCacheSize = 64 << 20

// keyedState is a client's keyed state: the service its partitions open,
// the locked workspace, and the recovery sweep while subscribed.
type keyedState struct {
	svc       *state.Service
	workspace *state.Workspace
	mock      bool
	stop      chan struct{} // closes the recovery sweep; nil when it is not running
	swept     chan struct{} // closed when the sweep returned
}

// keyedStateLocked returns the client's keyed state, opening it on first
// use: nil without state collections. Outside mock mode it connects to
// Cassandra, registers the collections and settles the writes a crash left
// half-applied that are due. The caller holds c.mu.
func (c *Client) keyedStateLocked() (*keyedState, error) {
	if len(c.cfg.StateCollections) == 0 {
		return nil, nil
	}
	if c.keyed != nil {
		return c.keyed, nil
	}
	ws, err := state.OpenWorkspace(c.cfg.StateCacheDir.Or(""))
	if err != nil {
		return nil, err
	}
	k := &keyedState{workspace: ws, mock: c.cfg.Mock}
	var store statestore.Store
	if c.cfg.Mock {
		store = statestore.InMemory()
	} else {
		if err := c.connectLocked(); err != nil {
			ws.Release()
			return nil, err
		}
		size := c.cfg.StateOwnedCacheSize.Or(c.cfg.StateCacheSizeBytes.Or(DefaultStateCacheSize))
		store = statestore.Cached(statestore.NewCassandra(c.session), int64(min(size, 1<<62)))
	}
	k.svc = state.NewService(store, c.cfg.GroupID, c.cfg.Subsystem.Or(""), c.cfg.StateCollections, c.cfg.Mock, c.log)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := k.svc.Register(ctx, c.cfg.SubscribedTopics); err != nil {
		ws.Release()
		return nil, fmt.Errorf("state_collections: %w", err)
	}
	if !c.cfg.Mock {
		// A sweep that fails is retried by the running sweep; each
		// partition also settles its own keys' records when assigned.
		if _, err := k.svc.Recover(ctx, c.cfg.StateRecoveryDelay); err != nil {
			c.log.Warn("keyed-state recovery sweep failed; retrying while subscribed", "error", err)
		}
	}
	c.keyed = k
	return k, nil
}

func (k *keyedState) service() *state.Service {
	if k == nil {
		return nil
	}
	return k.svc
}

// startRecovery runs the recovery sweep while the client is subscribed
// (in memory nothing is ever half-applied).
func (k *keyedState) startRecovery(cfg *config.Config) {
	if k == nil || k.mock || k.stop != nil {
		return
	}
	k.stop, k.swept = make(chan struct{}), make(chan struct{})
	go func(stop, swept chan struct{}) {
		defer close(swept)
		k.svc.RunRecovery(stop, cfg.StateRecoveryDelay)
	}(k.stop, k.swept)
}

func (k *keyedState) stopRecovery() {
	if k == nil || k.stop == nil {
		return
	}
	close(k.stop)
	<-k.swept
	k.stop, k.swept = nil, nil
}

// release stops the sweep and unlocks the workspace.
func (k *keyedState) release() {
	if k == nil {
		return
	}
	k.stopRecovery()
	k.workspace.Release()
	if c, ok := k.svc.Store().(io.Closer); ok {
		_ = c.Close() // the owned cache's goroutines
	}
}

// Reader opens a reader of the collection name, of kind, that subsystem
// publishes (see state.Readers): committed state only, through the
// client's read cache (state_read_cache_size, state_read_cache_ttl; ttl
// overrides the window for this reader, Some(0) turning it off). It needs
// no consumer: a client with only bootstrap_servers (or mock) and
// cassandra_nodes can read. Outside mock mode the first reader connects
// to Cassandra through the client's one session.
func (c *Client) Reader(subsystem, name string, kind config.CollectionKind, ttl config.Optional[time.Duration]) (*state.Reader, error) {
	if subsystem == "" {
		return nil, fmt.Errorf("subsystem: must not be empty")
	}
	if name == "" {
		return nil, fmt.Errorf("collection name: must not be empty")
	}
	if kind != config.CollectionValue && kind != config.CollectionMap && kind != config.CollectionDeque {
		return nil, fmt.Errorf(`kind: expected "value", "map", or "deque", got %q`, kind)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.readers == nil {
		var store statestore.Store
		if c.cfg.Mock {
			store = statestore.InMemory()
		} else {
			if err := c.connectLocked(); err != nil {
				return nil, err
			}
			store = statestore.NewCassandra(c.session)
		}
		size := c.cfg.StateReadCacheSize.Or(c.cfg.StateOwnedCacheSize.Or(state.DefaultReadCacheSize))
		rs, err := state.NewReaders(store, int64(min(size, 1<<62)), c.cfg.StateReadCacheTTL.Or(0))
		if err != nil {
			return nil, fmt.Errorf("state_read_cache_size: %w", err)
		}
		c.readers = rs
	}
	if _, set := ttl.Get(); !set {
		// A collection this client registers says how stale its own
		// reads may be (read_cache).
		for _, sc := range c.cfg.StateCollections {
			if sc.Name == name {
				ttl = sc.ReadCache
			}
		}
	}
	return c.readers.Open(subsystem, name, kind, ttl), nil
}
