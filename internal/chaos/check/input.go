// Package check is the fault harness's checker: it reads what a scenario
// left in its directory (the members' logs, the records read back from
// the topic, the producer's acknowledgements, the sampled committed
// offsets and the faults injected) and tells whether the invariants held.
// It trusts nothing the members say about themselves beyond their logs.
package check

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/prosody-events/prosody-go/internal/chaos/record"
	"github.com/prosody-events/prosody-go/internal/chaos/workload"
)

// File names in a scenario's directory (member logs are NAME.log).
const (
	MetaFile     = "scenario.json"
	ProducedFile = "produced.jsonl"
	CommitsFile  = "commits.jsonl"
	TopicFile    = "topic.jsonl"
	FaultsFile   = "faults.jsonl"
)

// Meta describes the scenario to the checker.
type Meta struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Seed   uint64 `json:"seed"`
	Topic  string `json:"topic"`
	Group  string `json:"group"`
	Hard   bool   `json:"hard"` // the faults may replay a suffix (kills, lost sessions, store outages)
	Bound  int64  `json:"recovery_bound_ns"`
	Lag    int64  `json:"final_lag"`        // the group's lag when the members were stopped
	Drain  int64  `json:"drain_ns"`         // from the producer's stop until everything was handled
	Errors string `json:"errors,omitempty"` // what went wrong in the harness itself
}

// Fault is one line of faults.jsonl.
type Fault struct {
	Kind   string `json:"kind"`
	Start  int64  `json:"start"`
	End    int64  `json:"end"` // when the fault was over (a restart answered, a proxy healed)
	Detail string `json:"detail,omitempty"`
}

type input struct {
	meta     Meta
	handled  []record.Record // every member's records, all kinds
	produced []workload.Ack
	commits  []workload.Commit
	topic    []workload.TopicRecord
	faults   []Fault
}

func load(dir string) (*input, error) {
	in := &input{}
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	if err := json.Unmarshal(b, &in.meta); err != nil {
		return nil, fmt.Errorf("check: %s: %w", MetaFile, err)
	}
	if in.handled, err = record.ReadDir(dir); err != nil {
		return nil, err
	}
	if err := readLines(filepath.Join(dir, ProducedFile), &in.produced); err != nil {
		return nil, err
	}
	if err := readLines(filepath.Join(dir, CommitsFile), &in.commits); err != nil {
		return nil, err
	}
	if err := readLines(filepath.Join(dir, TopicFile), &in.topic); err != nil {
		return nil, err
	}
	if err := readLines(filepath.Join(dir, FaultsFile), &in.faults); err != nil {
		return nil, err
	}
	return in, nil
}

// readLines appends each JSON line of path to *out; a missing file is
// empty.
func readLines[T any](path string, out *[]T) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			var v T
			if jerr := json.Unmarshal(line, &v); jerr != nil {
				return fmt.Errorf("check: %s: %w", path, jerr)
			}
			*out = append(*out, v)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("check: %w", err)
		}
	}
}
