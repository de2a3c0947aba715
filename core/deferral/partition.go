package deferral

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/timerstore"
)

// Retry is a due retry timer of a deferred key, of type
// timerstore.DeferredMessage or timerstore.DeferredTimer: the event the
// defer layers consume in place of a handler's. Handlers never see one.
type Retry struct {
	event.Timer
	Type timerstore.Type
}

// RetryTimers are the partition's timers as the defer layers use them:
// typed, for the retry timers of deferred keys (at most one per key and
// type, since it is only ever set by ClearAndSchedule).
type RetryTimers interface {
	ClearAndSchedule(ctx context.Context, t timerstore.Trigger) error
	ClearScheduled(ctx context.Context, key string, typ timerstore.Type) error
}

// Partition is one partition's deferral state: its stores, its retry
// timers, the loader of its deferred messages, and which of its keys are
// deferred.
//
// The sets of deferred keys are what keep deferral free on the success
// path: a message of a key that is not deferred costs a lookup in memory,
// not a store read. They are authoritative because a deferred key always
// has a retry timer (the timer is written before the store, and removed
// after it), so the keys with timers of the deferred types, read from the
// timer store when the partition is assigned, are every deferred key; the
// layers keep the sets current from then on.
type Partition struct {
	Topic    string
	ID       int32
	Messages deferstore.MessageSegment
	Timers   deferstore.TimerSegment
	Retries  RetryTimers
	// Load reads the message at offset back from Kafka, decoded as the
	// fetch loop decodes; a Permanent error when the record is gone or
	// cannot be decoded.
	Load   func(ctx context.Context, offset int64) (*event.Message, error)
	Logger *slog.Logger
	// Local: the stores are in this process's memory (mock mode), so the
	// layers call them without telling the engine they block.
	Local bool

	messages keySet
	timers   keySet
}

// NewPartition readies p, a partition whose deferred keys are messageKeys
// and timerKeys (the keys with retry timers of each type), and returns it.
func NewPartition(p *Partition, messageKeys, timerKeys []string) *Partition {
	out := p
	if out.Logger == nil {
		out.Logger = slog.Default()
	}
	out.messages.init(messageKeys)
	out.timers.init(timerKeys)
	return out
}

// MessageDeferred reports whether key's messages queue behind a deferred
// one.
func (p *Partition) MessageDeferred(key string) bool { return p.messages.has(key) }

// TimerDeferred reports whether key's application timers queue behind a
// deferred one.
func (p *Partition) TimerDeferred(key string) bool { return p.timers.has(key) }

// SetMessageDeferred records whether key has deferred messages.
func (p *Partition) SetMessageDeferred(key string, deferred bool) { p.messages.set(key, deferred) }

// SetTimerDeferred records whether key has deferred timers.
func (p *Partition) SetTimerDeferred(key string, deferred bool) { p.timers.set(key, deferred) }

// ScheduleRetry sets key's retry timer of typ to fire after delay, with
// the trace context span. A retry without delay is set for the current
// second, not the nearest one (which may be half a second ahead): a key
// draining its queue retries each entry that way, one after another.
func (p *Partition) ScheduleRetry(ctx context.Context, key string, typ timerstore.Type, delay time.Duration, span map[string]string) error {
	now := time.Now()
	at := timerstore.TimeOf(now.Add(delay))
	if delay == 0 {
		at = timerstore.Time(now.Unix())
	}
	return p.Retries.ClearAndSchedule(ctx, timerstore.Trigger{Key: key, Time: at, Type: typ, Span: span})
}

// keySet is a set of keys that is almost always empty, so that asking
// costs an atomic load then.
type keySet struct {
	n    atomic.Int64
	mu   sync.RWMutex
	keys map[string]struct{}
}

func (s *keySet) init(keys []string) {
	s.keys = make(map[string]struct{}, len(keys))
	for _, k := range keys {
		s.keys[k] = struct{}{}
	}
	s.n.Store(int64(len(s.keys)))
}

func (s *keySet) has(key string) bool {
	if s.n.Load() == 0 {
		return false
	}
	s.mu.RLock()
	_, ok := s.keys[key]
	s.mu.RUnlock()
	return ok
}

func (s *keySet) set(key string, in bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok == in {
		return
	}
	if in {
		// A message's key shares the bytes of its fetch response, which a
		// key kept here would keep alive.
		s.keys[strings.Clone(key)] = struct{}{}
	} else {
		delete(s.keys, key)
	}
	s.n.Store(int64(len(s.keys)))
}
