package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prosody-events/prosody-go/core/cassandra"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/consumer"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// mockDeferrals is the defer store of every mock-mode client in the
// process, for the same reason as mockTimers.
var mockDeferrals = sync.OnceValue(deferstore.NewMemory)

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
	if err := c.connectLocked(); err != nil {
		return nil, err
	}
	return timerstore.NewCassandra(c.session, c.cfg.CassandraRetention), nil
}

// deferralLocked is the consumer's deferral in pipeline mode (nil in the
// other modes, which do not defer): the shared in-memory store in mock
// mode, else the Cassandra tables. The caller holds c.mu.
func (c *Client) deferralLocked() (*consumer.Deferral, error) {
	if c.cfg.Mode != config.ModePipeline {
		return nil, nil
	}
	d := &consumer.Deferral{MaxDelay: c.cfg.DeferMaxDelay, Loader: fetch.LoaderOptions{
		CacheSize:        c.cfg.DeferCacheSize,
		SeekTimeout:      c.cfg.DeferSeekTimeout,
		DiscardThreshold: c.cfg.DeferDiscardThreshold,
		MaxInFlight:      c.cfg.MaxUncommitted,
		Logger:           c.log,
	}}
	if c.cfg.Mock {
		d.Store = mockDeferrals()
		return d, nil
	}
	if err := c.connectLocked(); err != nil {
		return nil, err
	}
	d.Store = deferstore.NewCassandra(c.session, c.cfg.CassandraRetention, c.cfg.DeferStoreCacheSize)
	return d, nil
}

// connectLocked opens the client's Cassandra session (migrating the
// keyspace) unless it is open. The caller holds c.mu.
func (c *Client) connectLocked() error {
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
			TLS:        cassandraTLS(c.cfg),
			Logger:     c.log,
		})
		if err != nil {
			return fmt.Errorf("cassandra_nodes: connecting to Cassandra at %v: %w", c.cfg.CassandraNodes, err)
		}
		c.session = s
	}
	return nil
}

// cassandraTLS returns the Cassandra TLS files, or nil when client
// encryption is off.
func cassandraTLS(cfg *config.Config) *tlsconf.Files {
	if !cfg.CassandraSslEnabled {
		return nil
	}
	return &tlsconf.Files{
		Prefix:             "cassandra_",
		CA:                 cfg.CassandraSslCaLocation,
		Cert:               cfg.CassandraSslCertificateLocation,
		Key:                cfg.CassandraSslKeyLocation,
		ServerName:         cfg.CassandraSslServerName,
		InsecureSkipVerify: !cfg.CassandraEnableSslCertificateVerification,
	}
}
