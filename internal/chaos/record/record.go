// Package record is the fault harness's shared vocabulary: the payload the
// producer writes and the lines every member appends for each handled
// event, failed attempt and fired timer. The Python and Node members write
// the same JSON, so the checker reads every member alike.
package record

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Kind says what a line records.
type Kind string

const (
	Handled Kind = "handled" // the handler succeeded (its state write follows)
	Failed  Kind = "failed"  // an attempt failed on purpose (a fault of the payload)
	Fired   Kind = "fired"   // a timer's handler ran
)

// Fault is what the payload asks the handler to do on its first attempt in
// a process.
const (
	FaultThrow = "throw" // return an error (raise, reject)
	FaultPanic = "panic" // panic (Go), an uncaught error elsewhere
	FaultHang  = "hang"  // outlive the handler timeout
)

// Payload is the value of every produced event.
type Payload struct {
	ID    string `json:"id"`
	Seq   int64  `json:"seq"`
	Timer int64  `json:"timer,omitempty"` // unix seconds of a timer to schedule
	Fault string `json:"fault,omitempty"`
}

// Record is one line of a member's log.
type Record struct {
	Kind      Kind   `json:"k"`
	Member    string `json:"m"`
	PID       int    `json:"pid"`
	Time      int64  `json:"t"` // unix nanoseconds, when the line was written
	Topic     string `json:"tp,omitempty"`
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Key       string `json:"key"`
	Seq       int64  `json:"seq,omitempty"`
	ID        string `json:"id,omitempty"`
	Count     int64  `json:"c,omitempty"`  // the key's counter after this event
	At        int64  `json:"at,omitempty"` // a fired timer's time, unix seconds
	Why       string `json:"why,omitempty"`
}

// Log appends records to a file.
type Log struct{ f *os.File }

// Open opens path for appending, creating it.
func Open(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	return &Log{f: f}, nil
}

// Append writes r as one line in one write(2): with O_APPEND the line
// lands whole, so a SIGKILL after Append returns loses nothing of it and
// never leaves half a line.
func (l *Log) Append(r Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("record: %w", err)
	}
	if _, err := l.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	return nil
}

// Close closes the file.
func (l *Log) Close() error { return l.f.Close() }

// ReadDir reads every *.log file of dir.
func ReadDir(dir string) ([]Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	var all []Record
	for _, p := range paths {
		rs, err := readFile(p)
		if err != nil {
			return nil, err
		}
		all = append(all, rs...)
	}
	return all, nil
}

func readFile(path string) ([]Record, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	defer f.Close()
	var out []Record
	r := bufio.NewReaderSize(f, 1<<16)
	for n := 1; ; n++ {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			if strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("record: %s:%d: a line without its end (a torn write)", path, n)
			}
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("record: %w", err)
		}
		var rec Record
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			return nil, fmt.Errorf("record: %s:%d: %w", path, n, err)
		}
		out = append(out, rec)
	}
}
