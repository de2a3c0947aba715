package client

import (
	"sync"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/dedupstore"
)

// mockDedupIDs are the deduplication ids of every mock-mode client in the
// process, for the same reason as mockTimers: a partition moving between
// clients keeps what was handled.
var mockDedupIDs = sync.OnceValue(func() dedupstore.Memory { return dedupstore.NewMemory(0) })

// dedupLocked is the client's deduplicator in pipeline mode with an
// idempotence_cache_size above 0 (nil otherwise: the other modes do not
// deduplicate, core-behavior.md §4.3), made on first use: the shared
// in-memory ids in mock mode, else the Cassandra table. The caller holds
// c.mu.
func (c *Client) dedupLocked() (*dedup.Deduplicator, error) {
	if c.cfg.Mode != config.ModePipeline || c.cfg.IdempotenceCacheSize == 0 {
		return nil, nil
	}
	if c.dedup != nil {
		return c.dedup, nil
	}
	var store dedupstore.Store = mockDedupIDs().WithTTL(c.cfg.IdempotenceTTL)
	if !c.cfg.Mock {
		if err := c.connectLocked(); err != nil {
			return nil, err
		}
		store = dedupstore.NewCassandra(c.session, c.cfg.IdempotenceTTL)
	}
	c.dedup = dedup.New(dedup.Options{
		Version:   c.cfg.IdempotenceVersion,
		Group:     c.cfg.GroupID,
		CacheSize: c.cfg.IdempotenceCacheSize,
		Store:     store,
		Logger:    c.log,
	})
	return c.dedup, nil
}

// DedupStats are the client's deduplication counters; zero when it does
// not deduplicate.
func (c *Client) DedupStats() dedup.Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dedup == nil {
		return dedup.Stats{}
	}
	return c.dedup.Stats()
}
