package state

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/statestore"
)

// Service is a client's keyed state: its store, the namespace its
// collections live in (the consumer group), and the registered
// collections. Every partition of the client's consumer shares it.
type Service struct {
	store     statestore.Store
	namespace string
	subsystem string // "" when the client publishes nothing
	// markerTTL is how long a key's marker lives: as long as the longest
	// lived of the collections it protects (0: forever), whichever of
	// them the marked write touched.
	markerTTL time.Duration
	byName    map[string]*collection
	logger    *slog.Logger
	// local: the store does not wait on the network (memory), so layers
	// need not hand a partition's intake over while it works.
	local bool
}

// collection is one registered collection: its definition, and the
// problem with it found at registration (a durable schema of another
// kind or payload), which every open of it reports.
type collection struct {
	def config.StateCollection
	bad error
}

// NewService returns the keyed state of a client whose collections are
// defs, kept in store under namespace; subsystem names the service that
// publishes the published ones. Call Register before handlers run.
func NewService(store statestore.Store, namespace, subsystem string, defs []config.StateCollection, local bool,
	logger *slog.Logger) *Service {
	if logger == nil {
		logger = slog.Default()
	}
	s := &Service{store: store, namespace: namespace, subsystem: subsystem, byName: make(map[string]*collection, len(defs)),
		logger: logger, local: local}
	forever := false
	for _, d := range defs {
		s.byName[d.Name] = &collection{def: d}
		if ttl, ok := d.TTL.Get(); !ok {
			forever = true
		} else {
			s.markerTTL = max(s.markerTTL, ttl)
		}
	}
	if forever {
		s.markerTTL = 0
	}
	return s
}

// Store is the service's store.
func (s *Service) Store() statestore.Store { return s.store }

// Register records every collection's schema durably. A name already
// registered with another kind or payload keeps its durable schema; opening
// that collection then fails permanently, naming both, because reading the
// stored data with the wrong shape would corrupt it.
//
// It also reconciles the routing records of the client's subsystem: a
// published collection gets one (readers find it through it), and a
// registered collection no longer published has its record removed — the
// way to retire a published collection (keep it registered, and the
// subsystem set, for one deployment with published off).
//
// topics are the subscribed topics. Keyed state is kept per topic, and a
// reader names no topic, so the owner of a published collection must
// subscribe exactly one topic, named literally.
func (s *Service) Register(ctx context.Context, topics []string) error {
	if err := s.register(ctx); err != nil {
		return err
	}
	if s.subsystem == "" {
		return nil
	}
	for _, c := range s.byName {
		if c.def.Published && (len(topics) != 1 || strings.HasPrefix(topics[0], "^")) {
			return fmt.Errorf("state_collections: %q is published, and its owner must subscribe exactly one topic "+
				"named literally (keyed state is kept per topic; readers name no topic), got subscribed_topics %q",
				c.def.Name, topics)
		}
	}
	for _, c := range s.byName {
		var err error
		if c.def.Published && c.bad == nil {
			err = s.store.SetRoute(ctx, statestore.Route{Subsystem: s.subsystem, Collection: c.def.Name,
				Namespace: s.namespace, Topic: topics[0], Kind: c.def.Kind, Payload: c.def.Payload})
		} else if !c.def.Published {
			err = s.store.DeleteRoute(ctx, s.subsystem, c.def.Name, s.namespace)
		}
		if err != nil {
			return fmt.Errorf("reconciling the routing record of published collection %q: %w", c.def.Name, err)
		}
	}
	return nil
}

func (s *Service) register(ctx context.Context) error {
	for _, c := range s.byName {
		want := statestore.Schema{Name: c.def.Name, Kind: c.def.Kind, Payload: c.def.Payload}
		got, err := s.store.Register(ctx, s.namespace, want)
		if err != nil {
			return fmt.Errorf("registering keyed-state collection %q: %w", c.def.Name, err)
		}
		if got.Kind != want.Kind || got.Payload != want.Payload {
			c.bad = newError(ErrUnregistered,
				"keyed-state collection %q is registered durably as a %s of %s payloads, not a %s of %s payloads; use another name",
				c.def.Name, got.Kind, got.Payload, want.Kind, want.Payload)
			s.logger.Error("keyed-state collection disagrees with its durable registration",
				slog.String("collection", c.def.Name), slog.Any("error", c.bad))
		}
	}
	return nil
}

// lookup returns the collection name if it is registered with the kind
// the caller asks for.
func (s *Service) lookup(name string, kind config.CollectionKind) (*collection, error) {
	c, ok := s.byName[name]
	if !ok {
		return nil, newError(ErrUnregistered, "keyed-state collection %q is not registered; add it to state_collections", name)
	}
	if c.bad != nil {
		return nil, c.bad
	}
	if c.def.Kind != kind {
		return nil, newError(ErrUnregistered, "keyed-state collection %q is a %s, not a %s", name, c.def.Kind, kind)
	}
	return c, nil
}

// Recover settles the namespace's writes that a crash may have left
// half-applied, those recorded at least delay ago (a younger one may still
// be in the hands of a live writer), and returns how long until the next
// younger one is due (0: none is left). A record that cannot be settled is
// logged and left for the next sweep; the others are settled all the same.
func (s *Service) Recover(ctx context.Context, delay time.Duration) (time.Duration, error) {
	var next time.Duration
	err := s.settlePending(ctx, func(p statestore.Pending) bool {
		age := time.Since(p.Written)
		if age >= delay {
			return true
		}
		if wait := delay - age; next == 0 || wait < next {
			next = wait
		}
		return false
	})
	return next, err
}

// settlePending settles the namespace's pending writes that pick selects.
// Only listing them can fail it: a record that does not settle is logged
// and skipped, so that one bad record cannot hold back the others.
func (s *Service) settlePending(ctx context.Context, pick func(statestore.Pending) bool) error {
	pending, err := s.store.Pending(ctx, s.namespace)
	if err != nil {
		return fmt.Errorf("listing keyed-state writes to recover: %w", err)
	}
	for _, p := range pending {
		if !pick(p) {
			continue
		}
		if err := s.store.Settle(ctx, p); err != nil {
			s.logger.Error("a keyed-state write a crash cut short could not be settled; retrying at the next sweep",
				slog.String("source", p.Source), slog.Any("error", err))
			continue
		}
		s.logger.Info("settled a keyed-state write a crash cut short", slog.String("source", p.Source))
	}
	return nil
}

// RunRecovery is the recovery sweep: Recover now, and again every delay
// (or when a younger write becomes due) until stop closes.
func (s *Service) RunRecovery(stop <-chan struct{}, delay time.Duration) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		next, err := s.Recover(ctx, delay)
		cancel()
		if err != nil {
			s.logger.Warn("keyed-state recovery sweep failed; retrying", slog.Any("error", err))
		}
		if next <= 0 || next > delay {
			next = delay
		}
		select {
		case <-stop:
			return
		case <-time.After(next):
		}
	}
}
