package consumer

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/middleware"
)

const crashChildEnv = "PROSODY_CRASH_CHILD"

// runCrashChild is the consumer process the crash test kills. It consumes
// the topic named in the environment and appends "key/seq" for every
// handled message to a file. Each line is one write(2) on an O_APPEND file,
// so everything written before SIGKILL is in the file.
func runCrashChild() int {
	topic, group, out := os.Getenv("CRASH_TOPIC"), os.Getenv("CRASH_GROUP"), os.Getenv("CRASH_OUT")
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	handler := event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
		var body struct{ Seq int }
		if err := json.Unmarshal(m.Payload, &body); err != nil {
			return err
		}
		time.Sleep(200 * time.Microsecond)
		mu.Lock()
		defer mu.Unlock()
		_, err := fmt.Fprintf(f, "%s/%d\n", m.Key, body.Seq)
		return err
	}}
	opts := Options{
		Brokers: testservices.KafkaAddrs(), GroupID: group, Topics: []string{topic},
		MaxUncommitted: 64, PollInterval: 50 * time.Millisecond, CommitInterval: 200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second, StallThreshold: time.Minute, Logger: testLogger(),
	}
	if _, err := Start(withStacks(opts, handler, middleware.NewFIFOScheduler(8))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {} // until killed
}

func readLines(t *testing.T, path string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string]bool{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			seen[line] = true
		}
	}
	return seen
}

// TestCrashLosesNothing kills a consuming process with SIGKILL mid-stream
// and restarts a member of the same group: every message is handled by one
// of them, because only finished offsets were ever committed.
func TestCrashLosesNothing(t *testing.T) {
	tg := target{name: "kafka", brokers: testservices.RequireKafka(t)}
	const messages = 20000
	topic := createTopic(t, tg, 4)
	records := make([]record, messages)
	seq := map[string]int{}
	for i := range records {
		k := fmt.Sprintf("key-%d", i%300)
		seq[k]++
		records[i] = record{key: k, value: jsonValue(k, seq[k])}
	}
	produce(t, tg, topic, records)

	group := testservices.UniqueName("crash-group")
	out := filepath.Join(t.TempDir(), "handled.txt")
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), crashChildEnv+"=1", "CRASH_TOPIC="+topic, "CRASH_GROUP="+group, "CRASH_OUT="+out)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the child to handle a quarter of the stream", func() bool {
		return len(readLines(t, out)) >= messages/4
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	before := readLines(t, out)
	if len(before) >= messages {
		t.Fatalf("the child finished everything (%d) before it was killed; the test proves nothing", len(before))
	}

	var mu sync.Mutex
	after := map[string]bool{}
	handler := event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
		var body struct{ Seq int }
		_ = json.Unmarshal(m.Payload, &body)
		mu.Lock()
		defer mu.Unlock()
		after[fmt.Sprintf("%s/%d", m.Key, body.Seq)] = true
		return nil
	}}
	opts := baseOptions(tg, topic)
	opts.GroupID = group
	c, err := Start(withStacks(opts, handler, middleware.NewFIFOScheduler(8)))
	if err != nil {
		t.Fatal(err)
	}
	covered := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for k, s := range seq {
			for i := 1; i <= s; i++ {
				line := fmt.Sprintf("%s/%d", k, i)
				if before[line] || after[line] {
					n++
				}
			}
		}
		return n
	}
	// The killed member holds its partitions until its session times out.
	waitFor(t, 2*time.Minute, "every message handled by the child or the restarted member", func() bool { return covered() == messages })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("killed child handled %d; restarted member handled %d (%d replayed)", len(before), len(after), len(before)+len(after)-messages)
}
