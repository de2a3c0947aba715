// Package scenario runs the fault harness's scenarios: for each, a fresh
// topic and group, three members (Go, Python, Node), a producer, one kind
// of fault injected under a seed, a drain, a clean stop and the checker.
package scenario

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/prosody-events/prosody-go/internal/chaos/check"
	"github.com/prosody-events/prosody-go/internal/chaos/cluster"
	"github.com/prosody-events/prosody-go/internal/chaos/proxy"
	"github.com/prosody-events/prosody-go/internal/chaos/workload"
)

// Options configure a harness.
type Options struct {
	Repo  string         // the repository (scripts/services, the Python and Node members)
	Self  string         // this program, for the Go member
	Out   string         // where each scenario's directory goes
	Run   string         // the services' run directory
	Ports cluster.Ports  // the services' and proxies' ports
	Langs []cluster.Lang // the three core members' languages
	Debug bool           // the members log at debug level
	Log   func(string, ...any)
}

// Harness holds what the scenarios share: the services and the proxies.
type Harness struct {
	opt            Options
	services       *cluster.Services
	kafkaProxy     *proxy.Proxy
	cassandraProxy *proxy.Proxy
	admin          *workload.Admin
}

// Start starts the proxies, then Kafka and Cassandra.
func Start(ctx context.Context, opt Options) (*Harness, error) {
	h := &Harness{opt: opt}
	p := opt.Ports
	var err error
	if h.kafkaProxy, err = proxy.Listen(fmt.Sprintf("127.0.0.1:%d", p.KafkaProxy), fmt.Sprintf("127.0.0.1:%d", p.KafkaProxied)); err != nil {
		return nil, err
	}
	if h.cassandraProxy, err = proxy.Listen(fmt.Sprintf("127.0.0.1:%d", p.CassandraProxy), fmt.Sprintf("127.0.0.1:%d", p.Cassandra)); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	t0 := time.Now()
	if h.services, err = cluster.StartServices(ctx, opt.Repo, opt.Run, p); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	opt.Log("services: Kafka on %s (members through %s), Cassandra on %s (members through %s), ready in %v",
		h.services.KafkaAddr(), h.services.MemberKafkaAddr(), h.services.CassandraAddr(), h.services.MemberCassandraAddr(), time.Since(t0).Round(time.Second))
	if h.admin, err = workload.NewAdmin(h.services.KafkaAddr()); err != nil {
		return nil, errors.Join(err, h.Close())
	}
	return h, nil
}

// Close stops the services and the proxies.
func (h *Harness) Close() error {
	var errs []error
	if h.admin != nil {
		errs = append(errs, h.admin.Close())
	}
	if h.services != nil {
		errs = append(errs, h.services.Stop())
	}
	if h.kafkaProxy != nil {
		errs = append(errs, h.kafkaProxy.Close())
	}
	if h.cassandraProxy != nil {
		errs = append(errs, h.cassandraProxy.Close())
	}
	return errors.Join(errs...)
}

// Spec is one scenario of a profile.
type Spec struct {
	Kind     string
	Seed     uint64
	Duration time.Duration // of fault injection
	Rate     float64       // events per second
}

// Run runs one scenario as the index-th of its profile and checks it.
func (h *Harness) Run(ctx context.Context, index int, s Spec) (*check.Report, error) {
	dir := filepath.Join(h.opt.Out, fmt.Sprintf("%02d-%s", index, s.Kind))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	r := &run{h: h, kind: s.Kind, spec: s, dir: dir, members: map[string]*cluster.Proc{}}
	r.meta = check.Meta{Name: filepath.Base(dir), Kind: s.Kind, Seed: s.Seed, Hard: hard(s.Kind),
		Topic: fmt.Sprintf("chaos-%s-%016x", s.Kind, s.Seed), Bound: int64(recoveryBound)}
	r.meta.Group = r.meta.Topic
	err := r.execute(ctx)
	if err != nil {
		r.meta.Errors = err.Error()
	}
	if werr := r.writeMeta(); werr != nil {
		return nil, errors.Join(err, werr)
	}
	rep, cerr := check.Dir(dir)
	if cerr != nil {
		return nil, errors.Join(err, cerr)
	}
	return rep, nil
}
