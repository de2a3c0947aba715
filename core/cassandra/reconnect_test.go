package cassandra

import (
	"errors"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/internal/chaos/proxy"
)

// A node that refused every connection long enough to be marked down is
// used again within seconds of coming back, not on gocql's once-a-minute
// redial of down nodes: the control connection's heartbeat reconnects and
// refreshes the ring, which refills the node's pool. Every store (timers,
// deferrals, deduplication, keyed state) waits on this after an outage.
func TestReconnectsSoonAfterTheNodeIsBack(t *testing.T) {
	o := freshKeyspace(t) // dropped through the real address
	p, err := proxy.Listen("127.0.0.1:0", o.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	o.Nodes = []string{p.Addr()}
	ctx := testContext(t)
	s, err := Connect(ctx, o)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(s.Close)
	ping := func() error {
		return s.Query(ctx, `SELECT release_version FROM system.local`).Exec()
	}
	if err := ping(); err != nil {
		t.Fatalf("before the outage: %v", err)
	}

	if err := p.Set(proxy.Faults{Refuse: true}); err != nil {
		t.Fatal(err)
	}
	// The pool finds every connection gone and its refill refused, and
	// marks the node down: queries then find no host at all.
	for err := ping(); !errors.Is(err, gocql.ErrNoConnections); err = ping() {
		if ctx.Err() != nil {
			t.Fatalf("the session never lost its node: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// An outage longer than the pool's own retries (a few attempts a
	// second apart), so only the reconnect ticker can bring the node back.
	time.Sleep(3 * time.Second)
	if err := p.Set(proxy.Faults{}); err != nil {
		t.Fatal(err)
	}

	back := time.Now()
	for err := ping(); err != nil; err = ping() {
		if time.Since(back) > 20*time.Second {
			t.Fatalf("still no connection 20 s after the node came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("reconnected %v after the node came back", time.Since(back).Round(time.Millisecond))
}
