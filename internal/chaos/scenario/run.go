package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/prosody-events/prosody-go/internal/chaos/check"
	"github.com/prosody-events/prosody-go/internal/chaos/cluster"
	"github.com/prosody-events/prosody-go/internal/chaos/record"
	"github.com/prosody-events/prosody-go/internal/chaos/workload"
)

const (
	partitions = 6
	// recoveryBound is how long after a fault's end the events sent before
	// it may take to be handled. A Cassandra restart is the slowest fault:
	// the members' sessions reconnect and deferred work is retried.
	recoveryBound = 2 * time.Minute
	// drainBound is how long, after the producer stops, everything may
	// take to be handled and committed.
	drainBound = 4 * time.Minute
	// handlerTimeout is the members' handler deadline, which "hang"
	// payloads outlive.
	handlerTimeout = 3 * time.Second
)

type run struct {
	h        *Harness
	kind     string
	spec     Spec
	dir      string
	meta     check.Meta
	launcher *cluster.Launcher

	mu      sync.Mutex
	members map[string]*cluster.Proc
	faults  *os.File
}

func (r *run) memberNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.members))
	for n := range r.members {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (r *run) startMember(name string, lang cluster.Lang) error {
	p, err := r.launcher.Start(name, lang)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.members[name] = p
	r.mu.Unlock()
	return nil
}

func (r *run) fault(f check.Fault) {
	line, _ := json.Marshal(f)
	_, _ = r.faults.Write(append(line, '\n'))
	r.h.opt.Log("  %s %s (%v)", f.Kind, f.Detail, time.Duration(f.End-f.Start).Round(time.Millisecond))
}

func (r *run) writeMeta() error {
	b, err := json.MarshalIndent(r.meta, "", "  ")
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, check.MetaFile), b, 0o644); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	return nil
}

func (r *run) env() []string {
	h := r.h
	level := "warn"
	if h.opt.Debug {
		level = "debug"
	}
	return append(os.Environ(),
		"PROSODY_BOOTSTRAP_SERVERS="+h.services.MemberKafkaAddr(),
		"PROSODY_CASSANDRA_NODES="+h.services.MemberCassandraAddr(),
		"PROSODY_CASSANDRA_KEYSPACE=prosody_chaos",
		"PROSODY_GROUP_ID="+r.meta.Group,
		"PROSODY_SUBSCRIBED_TOPICS="+r.meta.Topic,
		"PROSODY_TIMEOUT="+handlerTimeout.String(),
		"PROSODY_PROBE_PORT=none",
		"PROSODY_TELEMETRY_ENABLED=false",
		"PROSODY_COMMIT_INTERVAL=500ms",
		"PROSODY_SHUTDOWN_TIMEOUT=15s",
		"PROSODY_STATE_RECOVERY_DELAY=5s",
		// Retries back off to at most 5 s and deferred retries to 10 s (the
		// defaults are 5 minutes and a day), so recovery after an outage
		// measures the engine, not the backoff: with the defaults a 30 s
		// Cassandra outage took 160 s to recover from here, each partition
		// waiting on its oldest event's next retry.
		"PROSODY_RETRY_MAX_DELAY=5s",
		"PROSODY_DEFER_MAX_DELAY=10s",
		"PROSODY_LOG="+level,
	)
}

func (r *run) execute(ctx context.Context) (err error) {
	h := r.h
	if r.faults, err = os.OpenFile(filepath.Join(r.dir, check.FaultsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	defer r.faults.Close()
	if err := h.admin.CreateTopic(r.meta.Topic, partitions); err != nil {
		return err
	}
	r.launcher = &cluster.Launcher{Repo: h.opt.Repo, Self: h.opt.Self, Dir: r.dir, Env: r.env()}
	defer r.killAll()
	for i, lang := range h.opt.Langs {
		if err := r.startMember(fmt.Sprintf("%s-%d", lang, i+1), lang); err != nil {
			return err
		}
	}
	if err := r.waitMembers(ctx, len(h.opt.Langs)); err != nil {
		return err
	}

	rng := rand.New(rand.NewPCG(r.spec.Seed, 2))
	mix := workload.Mix{Keys: 40, Rate: r.spec.Rate, Timer: 0.05, Throw: 0.01, Panic: 0.005, Hang: 0.002, TimerMin: 2, TimerMaxSecond: 6}
	if r.kind == Handler {
		mix.Throw, mix.Panic, mix.Hang = 0.05, 0.02, 0.01
	}
	prod, err := workload.NewProducer(h.services.KafkaAddr(), r.meta.Topic, filepath.Join(r.dir, check.ProducedFile), mix, r.spec.Seed)
	if err != nil {
		return err
	}
	defer prod.Close()
	sampleCtx, stopSampling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sampleErr, prodErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		sampleErr = workload.SampleCommits(sampleCtx, h.services.KafkaAddr(), r.meta.Group, r.meta.Topic, partitions,
			filepath.Join(r.dir, check.CommitsFile), 500*time.Millisecond)
	}()
	defer func() { stopSampling(); wg.Wait(); err = errors.Join(err, sampleErr) }()

	prodCtx, stopProducing := context.WithCancel(ctx)
	prodDone := make(chan struct{})
	go func() { defer close(prodDone); prodErr = prod.Run(prodCtx) }()

	faultCtx, stopFaults := context.WithTimeout(ctx, r.spec.Duration)
	ierr := r.inject(faultCtx, rng)
	stopFaults()
	// A few seconds more of traffic after the last fault, so its recovery
	// is measured under load too.
	pause(ctx, 3*time.Second)
	stopProducing()
	<-prodDone
	if err := errors.Join(ierr, prodErr); err != nil {
		return err
	}
	sent, retried := prod.Sent()
	h.opt.Log("  produced %d events (%d sends retried); draining", sent, retried)

	t0 := time.Now()
	lag, err := r.drain(ctx)
	r.meta.Drain, r.meta.Lag = int64(time.Since(t0)), lag
	if err != nil {
		return err
	}
	// The checker needs a sample of the final commits, taken after the lag
	// was 0.
	r.waitSample(ctx, time.Now())
	// The topic is read even when a member's shutdown failed, so the
	// checker can still say what was lost.
	stopErr := r.stopAll()
	_, readErr := h.admin.ReadTopic(r.meta.Topic, partitions, filepath.Join(r.dir, check.TopicFile))
	return errors.Join(stopErr, readErr)
}

func (r *run) waitMembers(ctx context.Context, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := r.h.admin.Members(r.meta.Group)
		if err == nil && got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("scenario: %d of %d members assigned after 2 minutes (last error: %v)", got, n, err)
		}
		if !pause(ctx, 250*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// drain waits until every acknowledged event was handled, every timer
// fired and the group's lag is 0; it returns the last lag seen.
func (r *run) drain(ctx context.Context) (int64, error) {
	deadline := time.Now().Add(drainBound)
	lag := int64(-1)
	for {
		done, why := r.drained()
		if done {
			var err error
			if lag, err = r.h.admin.Lag(r.meta.Group, r.meta.Topic, partitions); err == nil && lag == 0 {
				return 0, nil
			}
			why = fmt.Sprintf("lag %d", lag)
		}
		if time.Now().After(deadline) {
			r.h.opt.Log("  not drained after %v: %s", drainBound, why)
			return lag, nil // the checker reports what is missing
		}
		if !pause(ctx, 500*time.Millisecond) {
			return lag, ctx.Err()
		}
	}
}

func (r *run) drained() (bool, string) {
	recs, err := record.ReadDir(r.dir)
	if err != nil {
		return false, err.Error()
	}
	handled := map[string]bool{}
	fired := map[string]bool{}
	for _, rec := range recs {
		switch rec.Kind {
		case record.Handled:
			handled[rec.ID] = true
		case record.Fired:
			fired[fmt.Sprintf("%s@%d", rec.Key, rec.At)] = true
		}
	}
	var acks []workload.Ack
	b, err := os.ReadFile(filepath.Join(r.dir, check.ProducedFile))
	if err != nil {
		return false, err.Error()
	}
	for _, line := range splitLines(b) {
		var a workload.Ack
		if json.Unmarshal(line, &a) == nil {
			acks = append(acks, a)
		}
	}
	missing, timers := 0, 0
	for _, a := range acks {
		if !handled[a.ID] {
			missing++
		}
		if a.Timer > 0 && !fired[fmt.Sprintf("%s@%d", a.Key, a.Timer)] {
			timers++
		}
	}
	return missing == 0 && timers == 0, fmt.Sprintf("%d events unhandled, %d timers not fired", missing, timers)
}

// waitSample waits until the sampler has written a sample taken after
// since (10 s at most: the sampler runs every 500 ms).
func (r *run) waitSample(ctx context.Context, since time.Time) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(filepath.Join(r.dir, check.CommitsFile))
		lines := splitLines(b)
		var c workload.Commit
		if len(lines) > 0 && json.Unmarshal(lines[len(lines)-1], &c) == nil && c.Time > since.UnixNano() {
			return
		}
		if !pause(ctx, 100*time.Millisecond) {
			return
		}
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}

// stopAll shuts every member down cleanly, all at once.
func (r *run) stopAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(r.members))
	for _, name := range r.memberNames() {
		r.mu.Lock()
		p := r.members[name]
		r.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Stop(ctx); err != nil {
				errs <- err
			} else if err := p.ExitErr(); err != nil {
				errs <- fmt.Errorf("scenario: %s exited with %w (see %s.stderr)", p.Name, err, p.Name)
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for e := range errs {
		all = append(all, e)
	}
	return errors.Join(all...)
}

// killAll ends whatever member is still running when a scenario leaves
// early.
func (r *run) killAll() {
	for _, name := range r.memberNames() {
		r.mu.Lock()
		p := r.members[name]
		r.mu.Unlock()
		select {
		case <-p.Done():
		default:
			_ = p.Signal(syscall.SIGKILL)
			<-p.Done()
		}
	}
}
