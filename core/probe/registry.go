package probe

import (
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Registry holds the named heartbeats of one scope: the consumer (names
// prefixed with the group id) or one partition ("{topic}:{partition}").
// Stalled is the scope's answer to /livez and logs each heartbeat's stall
// and recovery exactly once per transition.
type Registry struct {
	prefix    string
	threshold time.Duration
	clock     func() time.Time
	logger    *slog.Logger

	mu    sync.RWMutex
	beats map[string]*Heartbeat
}

// NewRegistry creates a registry whose heartbeats are named "prefix name"
// (just "name" when prefix is empty) and stall after threshold. A nil clock
// means time.Now, a nil logger slog.Default().
func NewRegistry(prefix string, threshold time.Duration, clock func() time.Time, logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.Default()
	}
	return &Registry{
		prefix:    prefix,
		threshold: threshold,
		clock:     clock,
		logger:    logger,
		beats:     make(map[string]*Heartbeat),
	}
}

// Register creates and returns a fresh heartbeat under name. A heartbeat
// already registered under that name is replaced: a restarted loop starts
// with a clean slate instead of inheriting its predecessor's stall.
func (r *Registry) Register(name string) *Heartbeat {
	full := name
	if r.prefix != "" {
		full = r.prefix + " " + name
	}
	h := NewHeartbeat(full, r.threshold, r.clock)
	r.mu.Lock()
	r.beats[name] = h
	r.mu.Unlock()
	return h
}

// Unregister removes the heartbeat registered under name, if any. A loop
// that exits on purpose unregisters so it is not reported as stalled.
func (r *Registry) Unregister(name string) {
	r.mu.Lock()
	delete(r.beats, name)
	r.mu.Unlock()
}

// Stalled reports whether any heartbeat is stalled and returns the full
// names of the stalled ones, sorted. A heartbeat that becomes stalled is
// logged at warn level, and its recovery at info level, once per transition
// even when Stalled is called concurrently.
func (r *Registry) Stalled() (bool, []string) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var stalled []string
	for _, h := range r.beats {
		since := h.SinceBeat()
		if since > h.threshold {
			stalled = append(stalled, h.name)
			if h.reported.CompareAndSwap(false, true) {
				r.logger.Warn("heartbeat stalled",
					"heartbeat", h.name, "since_last_beat", since, "threshold", h.threshold)
			}
		} else if h.reported.CompareAndSwap(true, false) {
			r.logger.Info("heartbeat no longer stalled", "heartbeat", h.name)
		}
	}
	slices.Sort(stalled)
	return len(stalled) > 0, stalled
}
