package middleware

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/dedup"
	"github.com/prosody-events/prosody-go/core/dedupstore"
	"github.com/prosody-events/prosody-go/core/deferral"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
	"github.com/prosody-events/prosody-go/core/monopolization"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/core/statestore"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"go.opentelemetry.io/otel/trace"
)

// The parity suite: every layer, and the whole stack of every mode, runs
// the same scripted handler through both drives of a stack — Invoke with a
// Go handler on the calling goroutine, and Start with a handler that
// finishes on another goroutine, as a host language behind the C ABI does
// — and what can be observed must be identical: the outcome, the attempts
// and what each saw (its demand, the permits taken, its context's cause),
// the retry delays asked of the (fake) clock, the dead letters written,
// the permits left taken, the log.

// act is what one attempt of the scripted handler does.
type act int

const (
	actOK        act = iota
	actTransient     // fails transiently
	actPermanent     // fails permanently
	actTerminal      // fails terminally
	actHang          // waits until its context is cancelled (a timeout), then fails
	actHangOK        // waits until its context is cancelled, then succeeds
	actShutdown      // revokes the partition, then fails transiently
)

type scenario struct {
	name  string
	timer bool  // a timer rather than a message
	acts  []act // the attempts' acts, then actOK
	// sinkFails is how many dead-letter writes fail before one succeeds.
	sinkFails int
	// revokeAt revokes the partition instead of ending the n-th retry
	// delay (1-based); 0 never.
	revokeAt int
	// retry makes the event the retry timer of a key deferred before (of
	// this type), instead of a message or a timer of the key.
	retry timerstore.Type
	// seen records the message's deduplication id before it runs.
	seen bool
}

var scenarios = []scenario{
	{name: "success"},
	{name: "a transient failure, then success", acts: []act{actTransient}},
	{name: "transient failures beyond the retries", acts: []act{actTransient, actTransient, actTransient, actTransient, actTransient}},
	{name: "a permanent failure", acts: []act{actPermanent}},
	{name: "a terminal failure", acts: []act{actTerminal}},
	{name: "a timeout, then success", acts: []act{actHang}},
	{name: "success after the timeout", acts: []act{actHangOK}},
	{name: "a failure while shutting down", acts: []act{actShutdown}},
	{name: "a revocation during the backoff", acts: []act{actTransient, actTransient}, revokeAt: 2},
	{name: "a failed dead-letter write", acts: []act{actPermanent, actPermanent}, sinkFails: 1},
	{name: "a timer failing beyond the retries", timer: true, acts: []act{actTransient, actTransient, actTransient, actTransient}},
	{name: "a timer failing permanently", timer: true, acts: []act{actPermanent}},
	{name: "a deferred message's retry", retry: timerstore.DeferredMessage},
	{name: "a deferred message's retry failing again", retry: timerstore.DeferredMessage, acts: []act{actTransient}},
	{name: "a deferred timer's retry", retry: timerstore.DeferredTimer},
	{name: "a deferred timer's retry failing permanently", retry: timerstore.DeferredTimer, acts: []act{actPermanent}},
	{name: "a message handled before", seen: true},
}

// parityEnv is what one run of a scenario is built from: fresh for each
// drive, so that nothing is shared between the two.
type parityEnv struct {
	limiter   *Scheduler
	timeouts  *Timeouts
	clock     *fakeClock
	sink      *fakeSink
	logs      *logRecorder
	log       *slog.Logger
	broadcast *telemetry.Broadcast
	published *telemetryRecorder
	part      *deferral.Partition
	retries   *fakeRetries
	state     *state.Partition
	stateKV   statestore.Store
	dedupIDs  dedupstore.Memory
	dedup     *dedup.Deduplicator
}

// elsewhereStore answers on another goroutine, as the Cassandra store does.
type elsewhereStore struct{ mem dedupstore.Memory }

func (s elsewhereStore) Exists(id dedupstore.ID, done func(bool, error)) {
	go s.mem.Exists(id, done)
}

func (s elsewhereStore) Record(id dedupstore.ID, done func(error)) { go s.mem.Record(id, done) }

// recorded says whether the suite's message is recorded as handled.
func (e *parityEnv) recorded() bool {
	_ = e.dedup.Flush(context.Background()) // its writes go out behind the outcome
	found := make(chan bool, 1)
	e.dedupIDs.Exists(e.dedup.ID(parityMessage()), func(ok bool, _ error) { found <- ok })
	return <-found
}

// parityMessage is the suite's message, which the partition's loader
// also reads back for a deferred retry.
func parityMessage() *event.Message {
	return &event.Message{Topic: "orders", Partition: 3, Offset: 42, Key: "k",
		Timestamp: time.UnixMilli(1_700_000_000_123), Payload: []byte(`{"id":"e-1"}`)}
}

func newParityEnv() *parityEnv {
	e := &parityEnv{
		limiter:   NewFIFOScheduler(2),
		timeouts:  newTimeouts(100*time.Millisecond, false),
		clock:     newFakeClock(),
		sink:      &fakeSink{},
		logs:      &logRecorder{},
		broadcast: new(telemetry.Broadcast),
		published: &telemetryRecorder{},
		retries:   &fakeRetries{},
	}
	e.log = slog.New(e.logs)
	e.broadcast.Subscribe(e.published)
	e.dedupIDs = dedupstore.NewMemory(time.Hour)
	e.dedup = dedup.New(dedup.Options{Version: "1", Group: "group", CacheSize: 64, Store: elsewhereStore{e.dedupIDs}, Logger: e.log})
	store := deferstore.NewMemory()
	ctx := context.Background()
	msgs, _ := store.Messages(ctx, "group", "orders", 3)
	tms, _ := store.Timers(ctx, "group", "orders", 3)
	e.stateKV = statestore.NewMemory()
	svc := state.NewService(e.stateKV, "group", "", []config.StateCollection{
		{Name: "v", Kind: config.CollectionValue, Payload: config.PayloadJSON}}, true, e.log)
	_ = svc.Register(ctx, []string{"orders"})
	e.state, _ = svc.Partition(ctx, "orders", 3)
	e.part = deferral.NewPartition(&deferral.Partition{Topic: "orders", ID: 3, Messages: msgs, Timers: tms, Retries: e.retries, Logger: e.log,
		Load: func(context.Context, int64) (*event.Message, error) { return parityMessage(), nil }}, nil, nil)
	return e
}

func (e *parityEnv) deferPolicy() *DeferPolicy {
	return &DeferPolicy{Enabled: true, Backoff: deferral.Backoff{Base: time.Second, MaxDelay: time.Minute, Jitter: jitter}, Logger: e.log}
}

// hotTracker is a monopolization tracker that has seen key k of the
// suite's partition run for the whole of its window.
func hotTracker() *monopolization.Tracker {
	tr := monopolization.NewTracker(time.Second, 8, 0.9)
	now := telemetry.Now()
	tr.Observe(telemetry.Event{Kind: telemetry.HandlerSucceeded, Start: now - int64(time.Hour), At: now, Topic: "orders", Partition: 3, Key: "k"})
	return tr
}

// telemetryRecorder keeps what the broadcast carried, without times.
type telemetryRecorder struct {
	mu  sync.Mutex
	got []string
}

func (t *telemetryRecorder) Observe(e telemetry.Event) {
	t.mu.Lock()
	t.got = append(t.got, fmt.Sprintf("%s %s/%d/%s timer=%v failure=%v", e.Kind, e.Topic, e.Partition, e.Key, e.Timer, e.Failure))
	t.mu.Unlock()
}

func (t *telemetryRecorder) events() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.got)
}

// deferredState is what the partition's deferral holds for key k.
func (e *parityEnv) deferredState() string {
	ctx := context.Background()
	off, mr, mok, _ := e.part.Messages.Next(ctx, "k")
	tm, tr, tok, _ := e.part.Timers.Next(ctx, "k")
	e.retries.mu.Lock()
	history := strings.Join(e.retries.history, "; ")
	e.retries.mu.Unlock()
	return fmt.Sprintf("messages %v %d/%d (set %v), timers %v %d/%d (set %v), retry timers: %s",
		mok, off, mr, e.part.MessageDeferred("k"), tok, tm.Time, tr, e.part.TimerDeferred("k"), history)
}

// committedState is the key's committed keyed state.
func (e *parityEnv) committedState() string {
	v, ok, err := e.stateKV.Value(context.Background(), stateKey, "v")
	return fmt.Sprintf("%s %v %v", v, ok, err)
}

// jitter makes the retries' delays the same in both drives.
func jitter(n int64) int64 { return n / 2 }

func (e *parityEnv) policy(maxRetries int) RetryPolicy {
	return RetryPolicy{MaxRetries: maxRetries, Base: 20 * time.Millisecond, MaxDelay: time.Second, Logger: e.log, Jitter: jitter}
}

// parityCase builds the layers of a stack, outermost first.
type parityCase struct {
	name   string
	layers func(e *parityEnv) []Layer
}

// layerCases has an entry for every layer of the package, named after its
// type; TestEveryLayerIsInTheParitySuite keeps it complete.
var layerCases = []parityCase{
	{"Retry", func(e *parityEnv) []Layer { return []Layer{NewRetry(e.policy(2))} }},
	{"Cancellation", func(e *parityEnv) []Layer { return []Layer{Cancellation{}} }},
	{"Scheduler", func(e *parityEnv) []Layer { return []Layer{e.limiter} }},
	{"Timeouts", func(e *parityEnv) []Layer { return []Layer{e.timeouts} }},
	{"DeadLetter", func(e *parityEnv) []Layer { return []Layer{NewDeadLetter("failures", "group", e.sink, e.log)} }},
	{"Log", func(e *parityEnv) []Layer { return []Layer{NewLog(e.log)} }},
	{"MessageDefer", func(e *parityEnv) []Layer { return []Layer{NewMessageDefer(e.deferPolicy())} }},
	{"TimerDefer", func(e *parityEnv) []Layer { return []Layer{NewTimerDefer(e.deferPolicy())} }},
	{"Monopolization", func(e *parityEnv) []Layer { return []Layer{NewMonopolization(hotTracker(), 0.9)} }},
	{"Telemetry", func(e *parityEnv) []Layer { return []Layer{NewTelemetry(e.broadcast)} }},
	{"Transaction", func(e *parityEnv) []Layer { return []Layer{&Transaction{Logger: e.log}} }},
	{"Deduplication", func(e *parityEnv) []Layer { return []Layer{NewDeduplication(e.dedup)} }},
	{"Spans", func(e *parityEnv) []Layer {
		return []Layer{&Spans{Tracer: sdktrace.NewTracerProvider().Tracer("parity")}}
	}},
}

// modeCases are the whole stack of each mode, as the client builds it.
var modeCases = func() []parityCase {
	var cases []parityCase
	for _, mode := range []config.Mode{config.ModePipeline, config.ModeLowLatency, config.ModeBestEffort} {
		cases = append(cases, parityCase{string(mode), func(e *parityEnv) []Layer {
			cfg := config.Default()
			cfg.Mode, cfg.GroupID, cfg.FailureTopic, cfg.MaxRetries = mode, "group", "failures", 2
			cfg.RetryBase, cfg.MaxRetryDelay = 20*time.Millisecond, time.Second
			stacks := ModeStacks(&cfg, nil, Services{Scheduler: e.limiter, Timeouts: e.timeouts,
				DeadLetters: e.sink, Logger: e.log, Jitter: jitter, Broadcast: e.broadcast, KeyedState: true, Dedup: e.dedup})
			return stacks.Events.layers
		}})
	}
	return cases
}()

func TestParity(t *testing.T) {
	for _, pc := range append(slices.Clone(layerCases), modeCases...) {
		t.Run(pc.name, func(t *testing.T) {
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					sync := runScenario(t, pc.layers, false, sc)
					async := runScenario(t, pc.layers, true, sc)
					if !reflect.DeepEqual(sync, async) {
						t.Fatalf("the drives disagree\nInvoke: %+v\nStart:  %+v", sync, async)
					}
					if sync.permitsAfter != 0 || sync.attemptsTimed {
						t.Fatalf("a run left %d permits taken (attempts still timed: %v)", sync.permitsAfter, sync.attemptsTimed)
					}
				})
			}
		})
	}
}

// A layer missing from one drive's stack shows in the suite: for every
// layer, some scenario comes out differently without it.
func TestParityDetectsAMissingLayer(t *testing.T) {
	for _, pc := range layerCases {
		t.Run(pc.name, func(t *testing.T) {
			without := func(e *parityEnv) []Layer { return nil }
			for _, sc := range scenarios {
				full := runScenario(t, pc.layers, false, sc)
				missing := runScenario(t, without, true, sc)
				if !reflect.DeepEqual(full, missing) {
					return
				}
			}
			t.Fatalf("no scenario tells a stack with %s from one without it", pc.name)
		})
	}
}

// Every type of the package with a layer's Before and After has a case in
// layerCases: a new layer must be added to the parity suite.
func TestEveryLayerIsInTheParitySuite(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		{
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Recv == nil || (fn.Name.Name != "Before" && fn.Name.Name != "After") {
					continue
				}
				typ := fn.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				name := typ.(*ast.Ident).Name
				if methods[name] == nil {
					methods[name] = map[string]bool{}
				}
				methods[name][fn.Name.Name] = true
			}
		}
	}
	covered := map[string]bool{}
	for _, pc := range layerCases {
		e := newParityEnv()
		for _, l := range pc.layers(e) {
			covered[reflect.Indirect(reflect.ValueOf(l)).Type().Name()] = true
		}
	}
	for name, m := range methods {
		if m["Before"] && m["After"] && !covered[name] {
			t.Errorf("layer %s has no case in layerCases (parity_test.go)", name)
		}
	}
	if len(covered) < 6 {
		t.Fatalf("found only %d layers: %v", len(covered), covered)
	}
}

// observed is what a run shows.
type observed struct {
	outcome       string // "ok", or the class and text of the error
	timeout       bool   // the outcome is a timeout
	revoked       bool   // the outcome is the revocation
	attempts      int
	demands       []Demand // of each attempt
	permits       []int    // taken while each attempt ran
	causes        []string // each attempt's context's cause as it ended
	delays        []time.Duration
	letters       []string // dead letters written
	log           []string
	published     []string // telemetry events
	deferred      string   // the deferral state of the key afterwards
	recorded      bool     // the message is recorded as handled afterwards
	state         string   // the key's committed keyed state afterwards
	permitsAfter  int
	attemptsTimed bool
	traced        []bool // each attempt ran in a span
}

// runScenario runs sc through a stack of layers, driven by Invoke with a Go
// handler (async false) or by Start with a handler finishing on another
// goroutine (async true).
func runScenario(t *testing.T, layers func(*parityEnv) []Layer, async bool, sc scenario) observed {
	t.Helper()
	e := newParityEnv()
	e.sink.fails = sc.sinkFails
	if sc.seen {
		e.dedupIDs.Record(e.dedup.ID(parityMessage()), func(error) {})
	}
	parent, revoke := context.WithCancelCause(context.Background())
	defer revoke(nil)
	h := &scriptHandler{acts: sc.acts, limiter: e.limiter, revoke: revoke, hanging: make(chan struct{}, 16)}
	var handler event.Handler = h
	if async {
		handler = asyncScript{h}
	}
	probe := &demandProbe{}
	stack := NewStack(Handler(handler, e.limiter), append(layers(e), probe)...).WithClock(e.clock)

	var ev event.Event = parityMessage()
	timer := event.Timer{Topic: "orders", Partition: 3, Key: "k", Time: time.Unix(1_700_000_000, 0)}
	if sc.timer {
		ev = &timer
	}
	switch sc.retry {
	case timerstore.DeferredMessage:
		_ = e.part.Messages.DeferFirst(context.Background(), "k", 42)
		e.part.SetMessageDeferred("k", true)
		ev = &deferral.Retry{Timer: timer, Type: sc.retry}
	case timerstore.DeferredTimer:
		_ = e.part.Timers.DeferFirst(context.Background(), "k", deferstore.DeferredTimer{Time: timerstore.TimeOf(timer.Time)})
		e.part.SetTimerDeferred("k", true)
		ev = &deferral.Retry{Timer: timer, Type: sc.retry}
	}
	inv := invocation.NewInvocation(parent, "k")
	inv.SetEnv(&invocation.Env{Deferral: e.part, State: e.state}, nil)
	done := make(chan error, 1)
	if async {
		stack.Start(new(Run), inv, ev, outcome(done))
	} else {
		go func() { done <- invoke(stack, inv, ev) }()
	}

	var err error
	retries := 0
	timeout := time.After(30 * time.Second)
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-e.clock.added:
			retries++
			if retries == sc.revokeAt {
				revoke(invocation.ErrRevoked)
			} else if !e.clock.fire() {
				t.Fatal("a retry delay was asked for and stopped at once")
			}
		case <-h.hanging:
			// The watchdog ticks until the attempt is cancelled; a stack
			// without timeouts has its partition revoked instead.
			for i := 0; h.hung.Load(); i++ {
				if i == 200 {
					revoke(invocation.ErrRevoked)
				}
				e.timeouts.tickOnce()
				time.Sleep(50 * time.Microsecond)
			}
		case <-timeout:
			t.Fatalf("the run did not end (async %v)", async)
		}
	}
	inv.Invalidate()
	// Under Start the permit is released after the outcome has left (for
	// the key's next event): give the walk the moment it needs to end.
	for deadline := time.Now().Add(time.Second); e.limiter.InUse() != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}

	obs := observed{outcome: "ok", attempts: h.attempts, permits: h.permits, causes: h.causes,
		demands: probe.demands, traced: probe.traced, delays: e.clock.asked(), letters: e.sink.letters(), log: e.logs.lines(),
		published: e.published.events(), deferred: e.deferredState(), state: e.committedState(), recorded: e.recorded(),
		permitsAfter: e.limiter.InUse(), attemptsTimed: e.timeouts.scan()}
	if err != nil {
		obs.outcome = fault.ClassOf(err).String() + ": " + err.Error()
		obs.timeout = errors.Is(err, invocation.ErrTimeout)
		obs.revoked = errors.Is(err, invocation.ErrRevoked)
	}
	return obs
}

// scriptHandler does its acts, one per attempt, recording what each saw.
type scriptHandler struct {
	acts    []act
	limiter *Scheduler
	revoke  context.CancelCauseFunc
	hanging chan struct{} // an attempt waits for its cancellation
	hung    atomic.Bool

	mu       sync.Mutex
	attempts int
	permits  []int
	causes   []string
}

func (h *scriptHandler) OnMessage(ctx *event.Context, _ *event.Message) error { return h.do(ctx) }
func (h *scriptHandler) OnTimer(ctx *event.Context, _ *event.Timer) error     { return h.do(ctx) }

func (h *scriptHandler) do(ctx *event.Context) (err error) {
	h.mu.Lock()
	n := h.attempts
	h.attempts++
	h.permits = append(h.permits, h.limiter.InUse())
	h.mu.Unlock()
	defer func() {
		cause := ""
		if c := ctx.Cause(); c != nil {
			cause = c.Error()
		}
		h.mu.Lock()
		h.causes = append(h.causes, cause)
		h.mu.Unlock()
	}()
	// Every attempt writes its number to the key's state: only a
	// successful one's write may be committed.
	if v, err := state.ValueOf(ctx, "v"); err == nil {
		if err := v.Set([]byte(strconv.Itoa(n))); err != nil {
			return err
		}
	}
	a := actOK
	if n < len(h.acts) {
		a = h.acts[n]
	}
	switch a {
	case actTransient:
		return errors.New("flaky")
	case actPermanent:
		return fault.Permanent(errors.New("bad input"))
	case actTerminal:
		return fault.Terminal(errors.New("gone"))
	case actHang, actHangOK:
		h.hung.Store(true)
		h.hanging <- struct{}{}
		<-ctx.Done()
		h.hung.Store(false)
		if a == actHangOK {
			return nil
		}
		return fmt.Errorf("gave up: %w", ctx.Err())
	case actShutdown:
		h.revoke(invocation.ErrRevoked)
		return errors.New("interrupted")
	}
	return nil
}

// asyncScript is the scripted handler behind an asynchronous boundary:
// each message's attempt finishes on a goroutine of its own.
type asyncScript struct{ *scriptHandler }

func (asyncScript) PrepareMessage(*event.Message) event.Prepared { return nil }

func (a asyncScript) StartMessage(ctx *event.Context, _ *event.Message, _ event.Prepared, done event.Done) {
	go func() { done.Done(a.do(ctx)) }()
}

// demandProbe is the innermost layer of the suite's stacks: it records the
// demand of each attempt.
type demandProbe struct {
	mu      sync.Mutex
	demands []Demand
	traced  []bool
}

func (p *demandProbe) Before(r *Run) Step {
	p.mu.Lock()
	p.demands = append(p.demands, r.Demand())
	p.traced = append(p.traced, trace.SpanContextFromContext(r.call).IsValid())
	p.mu.Unlock()
	return Continue
}

func (p *demandProbe) After(_ *Run, err error) Step { return Result(err) }

// fakeSink records dead letters; its first writes fail as asked.
type fakeSink struct {
	mu      sync.Mutex
	fails   int
	written []string
}

func (s *fakeSink) record(topic, key string, value []byte, headers []event.Header) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fails > 0 {
		s.fails--
		return errors.New("broker unavailable")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s key=%q value=%q", topic, key, value)
	for _, h := range headers {
		fmt.Fprintf(&b, " %s=%q", h.Key, h.Value)
	}
	s.written = append(s.written, b.String())
	return nil
}

func (s *fakeSink) SendJSON(_ context.Context, topic, key string, value []byte, headers []event.Header) error {
	return s.record(topic, key, value, headers)
}

func (s *fakeSink) SendRaw(_ context.Context, topic string, key, value []byte, headers []event.Header) error {
	return s.record(topic, string(key), value, headers)
}

func (s *fakeSink) letters() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.written)
}

// logRecorder is a slog.Handler keeping each record's level, message and
// attributes.
type logRecorder struct {
	mu  sync.Mutex
	out []string
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }

func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.out = append(l.out, b.String())
	l.mu.Unlock()
	return nil
}

func (l *logRecorder) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.out)
}
