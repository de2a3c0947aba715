// Package member is the fault harness's Go consumer: a Prosody client
// configured from the PROSODY_* variables the harness sets, whose handler
// obeys each payload's fault, counts the key's events in keyed state,
// schedules the payload's timer and appends what it did to its log
// (CHAOS_LOG) under its name (CHAOS_MEMBER). scripts/chaos/member.py and
// member.js do the same in Python and Node.
package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/internal/chaos/record"
)

// Counter is the keyed-state collection every member counts in.
const Counter = "count"

// errInjected is the failure a "throw" payload asks for.
var errInjected = errors.New("chaos: injected failure")

// Run consumes until SIGTERM or SIGINT, then unsubscribes cleanly.
func Run() error {
	log, err := record.Open(os.Getenv("CHAOS_LOG"))
	if err != nil {
		return err
	}
	defer log.Close()
	cfg, err := config.Load(func(c *config.Config) {
		c.StateCollections = []config.StateCollection{{Name: Counter, Kind: config.CollectionValue, Payload: config.PayloadJSON}}
		c.ProbePort = config.None[int]()
	})
	if err != nil {
		return fmt.Errorf("member: %w", err)
	}
	level := slog.LevelWarn
	if os.Getenv("PROSODY_LOG") == "debug" {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	c, err := client.New(cfg, client.WithLogger(logger))
	if err != nil {
		return fmt.Errorf("member: %w", err)
	}
	h := &handler{log: log, name: os.Getenv("CHAOS_MEMBER"), pid: os.Getpid(), tried: map[string]bool{}}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(stop)
	if err := c.Subscribe(event.HandlerFuncs{Message: h.message, Timer: h.timer}); err != nil {
		return fmt.Errorf("member: subscribe: %w", err)
	}
	<-stop
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Unsubscribe(ctx); err != nil {
		return fmt.Errorf("member: unsubscribe: %w", err)
	}
	if err := c.Close(ctx); err != nil {
		return fmt.Errorf("member: close: %w", err)
	}
	return nil
}

type handler struct {
	log  *record.Log
	name string
	pid  int

	mu sync.Mutex
	// tried holds the ids whose fault was already injected in this
	// process: a fault hits the first attempt only, so every event can
	// succeed in the end.
	tried map[string]bool
}

func (h *handler) firstTry(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tried[id] {
		return false
	}
	h.tried[id] = true
	return true
}

func (h *handler) base(kind record.Kind, m *event.Message, p record.Payload) record.Record {
	return record.Record{Kind: kind, Member: h.name, PID: h.pid, Time: time.Now().UnixNano(), Topic: m.Topic,
		Partition: m.Partition, Offset: m.Offset, Key: m.Key, Seq: p.Seq, ID: p.ID}
}

// fail records a failed attempt before returning its error: the checker
// excuses a committed offset past an unhandled event only for keys with a
// failure on record (deferred work is committed once stored).
func (h *handler) fail(m *event.Message, p record.Payload, why string, err error) error {
	r := h.base(record.Failed, m, p)
	r.Why = why
	if lerr := h.log.Append(r); lerr != nil {
		return lerr
	}
	return err
}

func (h *handler) message(ctx *event.Context, m *event.Message) error {
	var p record.Payload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		return fmt.Errorf("member: payload at %s/%d/%d: %w", m.Topic, m.Partition, m.Offset, err)
	}
	if p.Fault != "" && h.firstTry(p.ID) {
		switch p.Fault {
		case record.FaultThrow:
			return h.fail(m, p, p.Fault, errInjected)
		case record.FaultPanic:
			_ = h.fail(m, p, p.Fault, nil)
			panic("chaos: injected panic")
		case record.FaultHang:
			select {
			case <-ctx.Done():
			case <-time.After(time.Minute):
			}
			return h.fail(m, p, p.Fault, fmt.Errorf("chaos: hung past the timeout: %w", context.Cause(ctx)))
		}
	}
	if p.Timer > 0 {
		if err := ctx.Schedule(time.Unix(p.Timer, 0)); err != nil {
			return h.fail(m, p, "schedule", err)
		}
	}
	count, err := state.ValueOf(ctx, Counter)
	if err != nil {
		return h.fail(m, p, "state", err)
	}
	cur, ok, err := count.Get()
	if err != nil {
		return h.fail(m, p, "state", err)
	}
	n := int64(0)
	if ok {
		if n, err = strconv.ParseInt(string(cur), 10, 64); err != nil {
			return fmt.Errorf("member: counter %q: %w", cur, err)
		}
	}
	if err := count.Set([]byte(strconv.FormatInt(n+1, 10))); err != nil {
		return h.fail(m, p, "state", err)
	}
	if ctx.Err() != nil {
		// Cancelled (timeout, revocation): the outcome is not ours to
		// claim, so nothing is recorded as handled.
		return h.fail(m, p, "cancelled", context.Cause(ctx))
	}
	r := h.base(record.Handled, m, p)
	r.Count = n + 1
	return h.log.Append(r)
}

func (h *handler) timer(_ *event.Context, t *event.Timer) error {
	return h.log.Append(record.Record{Kind: record.Fired, Member: h.name, PID: h.pid, Time: time.Now().UnixNano(),
		Topic: t.Topic, Partition: t.Partition, Key: t.Key, At: t.Time.Unix()})
}
