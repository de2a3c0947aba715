package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"

	"github.com/prosody-events/prosody-go/internal/chaos/check"
	"github.com/prosody-events/prosody-go/internal/chaos/cluster"
	"github.com/prosody-events/prosody-go/internal/chaos/proxy"
)

// The fault kinds, one per scenario.
const (
	SIGKILL   = "sigkill"   // a random member killed and restarted
	SIGTERM   = "sigterm"   // a random member shut down cleanly and restarted
	Storm     = "storm"     // members joining and leaving every few seconds
	Broker    = "broker"    // Kafka killed and restarted on its data
	Cassandra = "cassandra" // Cassandra killed for 30 s and restarted on its data
	Network   = "network"   // latency, a bandwidth limit, resets, blackholes
	Handler   = "handler"   // only the payloads' handler faults, more of them
)

// Kinds lists every kind in the order a profile runs them.
var Kinds = []string{SIGKILL, SIGTERM, Storm, Broker, Cassandra, Network, Handler}

// hard tells whether a kind may replay a suffix (and so duplicate): a
// member or a store gone without a clean shutdown.
func hard(kind string) bool {
	switch kind {
	case SIGKILL, Broker, Cassandra, Network:
		return true
	}
	return false
}

// pause waits d or until ctx ends; false when ctx ended.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// inject runs the scenario's faults until ctx ends. A fault under way
// when ctx ends is completed first (a killed member restarted, a broker
// resumed, a proxy healed): ctx only says when to start no new one.
func (r *run) inject(ctx context.Context, rng *rand.Rand) error {
	switch r.kind {
	case SIGKILL, SIGTERM:
		return r.bounce(ctx, rng)
	case Storm:
		return r.storm(ctx, rng)
	case Broker:
		return r.restartService(ctx, rng, "kafka", 3*time.Second, 8*time.Second)
	case Cassandra:
		return r.restartService(ctx, rng, "cassandra", 30*time.Second, 30*time.Second)
	case Network:
		return r.network(ctx, rng)
	case Handler:
		<-ctx.Done()
		return nil
	}
	return fmt.Errorf("scenario: no fault kind %q", r.kind)
}

func (r *run) bounce(ctx context.Context, rng *rand.Rand) error {
	for pause(ctx, between(rng, 6*time.Second, 12*time.Second)) {
		names := r.memberNames()
		m := r.members[names[rng.IntN(len(names))]]
		start := time.Now()
		if r.kind == SIGKILL {
			if err := m.Signal(syscall.SIGKILL); err != nil {
				return err
			}
			<-m.Done()
		} else {
			stopCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			err := m.Stop(stopCtx)
			cancel()
			if err != nil {
				return fmt.Errorf("scenario: a clean shutdown of %s: %w", m.Name, err)
			}
			if err := m.ExitErr(); err != nil {
				return fmt.Errorf("scenario: %s's clean shutdown ended with %w (see %s.stderr)", m.Name, err, m.Name)
			}
		}
		time.Sleep(between(rng, time.Second, 3*time.Second)) // the fault's duration: the member is away
		if err := r.startMember(m.Name, m.Lang); err != nil {
			return err
		}
		r.fault(check.Fault{Kind: r.kind, Start: start.UnixNano(), End: time.Now().UnixNano(), Detail: m.Name})
	}
	return nil
}

func (r *run) storm(ctx context.Context, rng *rand.Rand) error {
	var extras []*cluster.Proc
	n := 0
	defer func() {
		for _, e := range extras {
			stopCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			_ = e.Stop(stopCtx)
			cancel()
		}
	}()
	for pause(ctx, between(rng, 2*time.Second, 5*time.Second)) {
		start := time.Now()
		if len(extras) < 2 && (len(extras) == 0 || rng.IntN(2) == 0) {
			n++
			p, err := r.launcher.Start(fmt.Sprintf("storm-%d", n), cluster.Go)
			if err != nil {
				return err
			}
			extras = append(extras, p)
			r.fault(check.Fault{Kind: Storm, Start: start.UnixNano(), End: time.Now().UnixNano(), Detail: p.Name + " joined"})
			continue
		}
		p := extras[0]
		extras = extras[1:]
		stopCtx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		err := p.Stop(stopCtx)
		cancel()
		if err != nil {
			return fmt.Errorf("scenario: %s leaving: %w", p.Name, err)
		}
		r.fault(check.Fault{Kind: Storm, Start: start.UnixNano(), End: time.Now().UnixNano(), Detail: p.Name + " left"})
	}
	return nil
}

func (r *run) restartService(ctx context.Context, rng *rand.Rand, name string, lo, hi time.Duration) error {
	for pause(ctx, between(rng, 5*time.Second, 10*time.Second)) {
		start := time.Now()
		bg, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := r.h.services.Kill(bg, name)
		if err == nil {
			time.Sleep(between(rng, lo, hi)) // the outage
			err = r.h.services.Resume(bg, name)
		}
		cancel()
		if err != nil {
			return err
		}
		r.fault(check.Fault{Kind: r.kind, Start: start.UnixNano(), End: time.Now().UnixNano(), Detail: name + " killed and resumed"})
	}
	return nil
}

func (r *run) network(ctx context.Context, rng *rand.Rand) error {
	type netFault struct {
		name string
		px   *proxy.Proxy
		f    proxy.Faults
		d    time.Duration
	}
	k, c := r.h.kafkaProxy, r.h.cassandraProxy
	faults := []netFault{
		{"kafka latency 150ms", k, proxy.Faults{Latency: 150 * time.Millisecond}, 8 * time.Second},
		{"kafka bandwidth 16KiB/s", k, proxy.Faults{Bandwidth: 16 << 10}, 8 * time.Second},
		{"kafka reset", k, proxy.Faults{}, 0},
		{"kafka blackhole 12s", k, proxy.Faults{Blackhole: true}, 12 * time.Second},
		{"kafka refused 6s", k, proxy.Faults{Refuse: true}, 6 * time.Second},
		{"cassandra latency 150ms", c, proxy.Faults{Latency: 150 * time.Millisecond}, 8 * time.Second},
		{"cassandra reset", c, proxy.Faults{}, 0},
		{"cassandra blackhole 10s", c, proxy.Faults{Blackhole: true}, 10 * time.Second},
		{"cassandra refused 6s", c, proxy.Faults{Refuse: true}, 6 * time.Second},
	}
	order := rng.Perm(len(faults))
	for i := 0; pause(ctx, between(rng, 3*time.Second, 6*time.Second)); i++ {
		nf := faults[order[i%len(faults)]]
		start := time.Now()
		if nf.d == 0 {
			nf.px.Reset()
		} else {
			if err := nf.px.Set(nf.f); err != nil {
				return fmt.Errorf("%s: %w", nf.name, err)
			}
			time.Sleep(nf.d)
			if err := nf.px.Set(proxy.Faults{}); err != nil {
				return fmt.Errorf("%s: %w", nf.name, err)
			}
		}
		r.fault(check.Fault{Kind: Network, Start: start.UnixNano(), End: time.Now().UnixNano(), Detail: nf.name})
	}
	return nil
}
