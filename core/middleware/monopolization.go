package middleware

import (
	"errors"
	"fmt"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/monopolization"
)

// ErrMonopolized is the transient failure of an event refused because its
// key's handlers ran more than monopolization_threshold of the window.
var ErrMonopolized = errors.New("prosody: key is monopolizing handler time")

// Monopolization refuses an event whose key's handlers have been running
// more than threshold of the tracker's window (core-behavior.md §4.8), so
// that one hot key cannot keep the consumer's permits: the refusal is
// transient, so pipeline mode defers the key (or, with deferral gated
// off, the outer retry backs off), and other keys get the permits.
type Monopolization struct {
	tracker   *monopolization.Tracker
	threshold float64
}

// NewMonopolization returns the layer over tracker, which refuses above
// threshold (monopolization_threshold; the layer names it in its error).
func NewMonopolization(tracker *monopolization.Tracker, threshold float64) *Monopolization {
	return &Monopolization{tracker: tracker, threshold: threshold}
}

// Before implements Layer.
func (m *Monopolization) Before(r *Run) Step {
	topic, partition, key, _, ok := handled(r.ev)
	if !ok {
		return Continue
	}
	tpk := monopolization.TPK{Topic: topic, Partition: partition, Key: key}
	if refuse, share := m.tracker.Exceeds(tpk); refuse {
		return Result(fault.Transient(fmt.Errorf("%w: %.0f%% of the window (monopolization_threshold is %.0f%%)", ErrMonopolized, share*100, m.threshold*100)))
	}
	return Continue
}

// After implements Layer.
func (*Monopolization) After(_ *Run, err error) Step { return Result(err) }
