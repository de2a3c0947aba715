package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxDetails caps how many problems the summary lists, so a broken run
// stays readable.
const maxDetails = 10

// keyLog is what the producer wrote for one key.
type keyLog struct {
	partition int32 // where the partitioner put the key
	seqs      []int // in production order
}

// tracker checks consumed messages against what was produced. ConsumeClaim
// runs once per partition concurrently, hence the mutex.
type tracker struct {
	produced map[string]*keyLog
	total    int

	mu          sync.Mutex
	consumed    int                     // every delivery, duplicates included
	distinct    int                     // produced messages seen at least once
	seen        map[string]map[int]bool // key -> seqs delivered
	last        map[string]int          // key -> last seq delivered
	perPart     map[int32]int           // partition -> deliveries
	orderErrs   []string
	invalidErrs []string
}

func newTracker(produced map[string]*keyLog) *tracker {
	t := &tracker{
		produced: produced,
		seen:     make(map[string]map[int]bool),
		last:     make(map[string]int),
		perPart:  make(map[int32]int),
	}
	for _, l := range produced {
		t.total += len(l.seqs)
	}
	return t
}

// record notes one delivery and reports whether every produced message has
// now been seen.
func (t *tracker) record(key string, partition int32, offset int64, seq int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.consumed++
	t.perPart[partition]++

	where := fmt.Sprintf("partition %d offset %d", partition, offset)
	log, ok := t.produced[key]
	if !ok || !slices.Contains(log.seqs, seq) {
		t.invalidErrs = append(t.invalidErrs, fmt.Sprintf("%s: seq %d was never produced for this key (%s)", key, seq, where))
		return t.distinct == t.total
	}
	if last, ok := t.last[key]; ok && seq <= last {
		// A redelivery also lands here: ordering per key means each
		// key's messages are seen once, in increasing seq order.
		t.orderErrs = append(t.orderErrs, fmt.Sprintf("%s: seq %d after seq %d (%s)", key, seq, last, where))
	} else {
		t.last[key] = seq
	}
	if t.seen[key] == nil {
		t.seen[key] = make(map[int]bool)
	}
	if !t.seen[key][seq] {
		t.seen[key][seq] = true
		t.distinct++
	}
	return t.distinct == t.total
}

// bad records a message that could not be checked at all.
func (t *tracker) bad(detail string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.consumed++
	t.invalidErrs = append(t.invalidErrs, detail)
}

func (t *tracker) complete() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.distinct == t.total
}

// missing lists, per key, how many produced messages never arrived.
func (t *tracker) missing() []string {
	var out []string
	for _, key := range slices.Sorted(maps.Keys(t.produced)) {
		if n := len(t.produced[key].seqs) - len(t.seen[key]); n > 0 {
			out = append(out, fmt.Sprintf("%s: %d of %d missing", key, n, len(t.produced[key].seqs)))
		}
	}
	return out
}

// err is non-nil if anything was missing, out of order or unexpected.
func (t *tracker) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	if n := t.total - t.distinct; n > 0 {
		errs = append(errs, fmt.Errorf("%d of %d messages not consumed", n, t.total))
	}
	if n := len(t.orderErrs); n > 0 {
		errs = append(errs, fmt.Errorf("%d per-key order violations", n))
	}
	if n := len(t.invalidErrs); n > 0 {
		errs = append(errs, fmt.Errorf("%d unexpected messages", n))
	}
	return errors.Join(errs...)
}

// summary renders the human-readable report.
func (t *tracker) summary(addrs []string, elapsed time.Duration) string {
	t.mu.Lock()
	defer t.mu.Unlock()

	// Partitions used, from the producer's side: where the keys landed.
	keysPerPart := make(map[int32]int)
	for _, l := range t.produced {
		keysPerPart[l.partition]++
	}
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(keysPerPart)) {
		parts = append(parts, fmt.Sprintf("p%d: %d keys/%d msgs", p, keysPerPart[p], t.perPart[p]))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Prosody demo: two clients in mock mode (in-process Kafka at %s)\n", strings.Join(addrs, ","))
	fmt.Fprintf(&b, "  topic        %s (%d partitions)\n", topic, partitions)
	fmt.Fprintf(&b, "  produced     %d messages over %d keys\n", t.total, len(t.produced))
	fmt.Fprintf(&b, "  consumed     %d messages (%d distinct)\n", t.consumed, t.distinct)
	fmt.Fprintf(&b, "  partitions   %d used (%s)\n", len(keysPerPart), strings.Join(parts, ", "))

	if miss := t.missing(); len(miss) > 0 {
		fmt.Fprintf(&b, "  completeness FAILED, %d messages missing\n", t.total-t.distinct)
		b.WriteString(indent(capped(miss)))
	} else {
		b.WriteString("  completeness OK, every produced message consumed\n")
	}
	if len(t.orderErrs) > 0 {
		fmt.Fprintf(&b, "  key order    FAILED, %d violations\n", len(t.orderErrs))
		b.WriteString(indent(capped(t.orderErrs)))
	} else {
		fmt.Fprintf(&b, "  key order    OK, each of the %d keys received arrived in increasing seq order\n", len(t.last))
	}
	if len(t.invalidErrs) > 0 {
		fmt.Fprintf(&b, "  unexpected   %d messages\n", len(t.invalidErrs))
		b.WriteString(indent(capped(t.invalidErrs)))
	}
	fmt.Fprintf(&b, "  elapsed      %s\n", elapsed.Round(time.Millisecond))
	return b.String()
}

// capped trims a detail list to maxDetails lines, saying how many were cut.
func capped(lines []string) []string {
	if len(lines) <= maxDetails {
		return lines
	}
	return append(slices.Clone(lines[:maxDetails]), fmt.Sprintf("... and %d more", len(lines)-maxDetails))
}

// indent prefixes every line of a multi-line detail block.
func indent(lines []string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString("    ")
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
