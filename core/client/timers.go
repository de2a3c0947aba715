package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// mockTimers is the timer store of every mock-mode client in the process.
// It lives as long as the process, so timers survive a partition moving
// between clients, as they would in Cassandra.
var mockTimers = sync.OnceValue(timerstore.NewMemory)

// timerStoreLocked returns the store for the client's timers: the shared
// in-memory store in mock mode, else Cassandra through the client's
// session, connected (and migrated) on first use. The caller holds c.mu.
func (c *Client) timerStoreLocked() (timerstore.Store, error) {
	if c.cfg.Mock {
		return mockTimers(), nil
	}
	if c.session == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		s, err := cassandra.Connect(ctx, cassandra.Options{
			Nodes:      c.cfg.CassandraNodes,
			Keyspace:   c.cfg.CassandraKeyspace,
			User:       c.cfg.CassandraUser,
			Password:   c.cfg.CassandraPassword,
			Datacenter: c.cfg.CassandraDatacenter,
			Rack:       c.cfg.CassandraRack,
			Logger:     c.log,
		})
		if err != nil {
			return nil, fmt.Errorf("cassandra_nodes: connecting to Cassandra at %v: %w", c.cfg.CassandraNodes, err)
		}
		c.session = s
	}
	return timerstore.NewCassandra(c.session, c.cfg.CassandraRetention), nil
}
