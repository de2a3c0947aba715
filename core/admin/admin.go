// Package admin creates and deletes Kafka topics (core-behavior.md §10).
//
// Topic settings are taken only from TopicSpec. The PROSODY_TOPIC_*
// environment variables (PARTITIONS, REPLICATION_FACTOR, CLEANUP_POLICY,
// RETENTION) are resolved by the configuration layer (core/config), which
// fills the spec; this package reads no environment.
package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// callTimeout bounds every request this client makes, like the original's
// 30 s admin operation timeout.
const callTimeout = 30 * time.Second

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("admin: client closed")

// Options configures a Client.
type Options struct {
	// Brokers are the bootstrap servers; at least one is required, even in
	// mock mode, where they are never dialled.
	Brokers []string
	// Mock uses the process-wide in-memory cluster (mockbroker.Shared).
	Mock bool
	// Security are the TLS and SASL settings; not used in mock mode.
	Security kafkasec.Settings
}

// Client is a Kafka admin client, safe for concurrent use.
type Client struct {
	admin        sarama.ClusterAdmin
	readyTimeout time.Duration // readyPollTimeout; shortened by tests

	// mu orders call start-up against Close so that Close can wait for
	// every request it did not prevent.
	mu     sync.RWMutex
	closed bool
	calls  sync.WaitGroup
}

// New connects to the cluster and returns a client.
func New(opts Options) (*Client, error) {
	if len(opts.Brokers) == 0 {
		return nil, errors.New("admin: at least one broker is required")
	}
	addrs := opts.Brokers
	if opts.Mock {
		cluster, err := mockbroker.Shared()
		if err != nil {
			return nil, fmt.Errorf("admin: start mock cluster: %w", err)
		}
		addrs = cluster.Addrs()
	}

	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.ClientID = "prosody-admin"
	cfg.Admin.Timeout = callTimeout
	// Metadata.Full stays on: sarama finds the controller through a
	// metadata refresh, which it skips when Full is off and no topic is
	// known yet.
	if !opts.Mock {
		if err := opts.Security.Apply(cfg); err != nil {
			return nil, fmt.Errorf("admin: %w", err)
		}
	}

	a, err := sarama.NewClusterAdmin(addrs, cfg)
	if err != nil {
		return nil, fmt.Errorf("admin: connect to %v: %w", addrs, opts.Security.Explain(err))
	}
	return &Client{admin: a, readyTimeout: readyPollTimeout}, nil
}

// Close releases the connections. Requests still running (those whose
// caller's context ended first) are aborted and waited for. Close is safe
// to call more than once.
func (c *Client) Close() {
	c.mu.Lock()
	already := c.closed
	c.closed = true
	c.mu.Unlock()
	if already {
		return
	}
	_ = c.admin.Close()
	c.calls.Wait()
}

// call runs fn bounded by ctx and timeout. sarama's admin calls take no
// context, so fn runs on its own goroutine; if the bound expires first the
// caller gets the context error at once, and fn finishes in the background
// within sarama's own network timeouts (Close waits for it).
func (c *Client) call(ctx context.Context, timeout time.Duration, fn func(sarama.ClusterAdmin) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := ctx.Err(); err != nil {
		return err
	}

	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return ErrClosed
	}
	c.calls.Add(1)
	c.mu.RUnlock()

	done := make(chan error, 1) // room for the result if nobody waits
	go func() {
		defer c.calls.Done()
		done <- fn(c.admin)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
