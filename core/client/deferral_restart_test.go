package client

import (
	"bufio"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

const deferChildEnv = "PROSODY_DEFER_CHILD"

// runDeferChild is the consumer process the restart test kills: a
// pipeline consumer of DEFER_TOPIC in DEFER_GROUP whose handler fails
// every message of a "poison" key while DEFER_FAIL is set, and appends
// "key/seq ok|failed" for every call to DEFER_OUT (one write per line on
// an O_APPEND file, so what was written before a SIGKILL is there).
func runDeferChild() int {
	// The poisoned keys fail while DEFER_FAIL is set and, if it names a
	// file, while that file exists.
	failFile := os.Getenv("DEFER_FAIL")
	failing := func() bool {
		if failFile == "" || failFile == "1" {
			return failFile != ""
		}
		_, err := os.Stat(failFile)
		return err == nil
	}
	c, f, err := childWithOutput("DEFER_OUT", os.Getenv("DEFER_GROUP"), os.Getenv("DEFER_TOPIC"), func(c *config.Config) {
		c.DeferBase, c.DeferMaxDelay = time.Second, 2*time.Second
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	err = c.Subscribe(event.HandlerFuncs{Message: func(_ *event.Context, m *event.Message) error {
		failing := strings.HasPrefix(m.Key, "poison") && failing()
		result := "ok"
		if failing {
			result = "failed"
		}
		mu.Lock()
		_, werr := fmt.Fprintf(f, "%s/%d %s\n", m.Key, seqOf(m), result)
		mu.Unlock()
		if werr != nil {
			return werr
		}
		if failing {
			return fmt.Errorf("poisoned")
		}
		return nil
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {} // until killed
}

// calls reads a child's output: how many times each "key/seq result" was
// written.
func calls(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out[line]++
		}
	}
	return out
}

// startDeferChild starts runDeferChild; fail is DEFER_FAIL ("" for
// none, "1" for always, else a file whose existence makes them fail).
func startDeferChild(t *testing.T, topic, group, out, fail string) *exec.Cmd {
	t.Helper()
	env := []string{deferChildEnv + "=1", "DEFER_TOPIC=" + topic, "DEFER_GROUP=" + group, "DEFER_OUT=" + out}
	if fail != "" {
		env = append(env, "DEFER_FAIL="+fail)
	}
	return startTestChild(t, env...)
}

// startTestChild runs this test binary as a child process with env added
// (TestMain dispatches on it), killed when the test ends.
func startTestChild(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), env...)
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Signal(syscall.SIGKILL)
		_ = child.Wait()
	})
	return child
}

// Kill -9 the consumer while keys are deferred (their offsets committed,
// their retries failing), then start a new member: it finds the deferred
// keys in Cassandra and handles every deferred message exactly once
// more, in order, and nothing committed runs again.
func TestDeferredMessagesSurviveAKill(t *testing.T) {
	tg := target{name: "kafka"}
	testservices.RequireKafka(t)
	topic := createTopic(t, tg, 2)
	group := testservices.UniqueName("defer-kill")
	dir := t.TempDir()
	first, second := filepath.Join(dir, "first.txt"), filepath.Join(dir, "second.txt")

	child := startDeferChild(t, topic, group, first, "1")
	producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
	poisoned := []string{"poison-a/0", "poison-a/1", "poison-b/0", "poison-c/0", "poison-c/1", "poison-c/2"}
	for _, p := range poisoned {
		key, seq := keySeq(p)
		sendSeq(t, producer, topic, key, seq)
	}
	for i := 0; i < 20; i++ {
		sendSeq(t, producer, topic, fmt.Sprintf("healthy-%d", i), i)
	}
	waitFor(t, 2*time.Minute, "every key's head failed twice (deferred and retried), every healthy message handled and everything committed", func() bool {
		got := calls(t, first)
		for _, head := range []string{"poison-a/0", "poison-b/0", "poison-c/0"} {
			if got[head+" failed"] < 2 {
				return false
			}
		}
		for i := 0; i < 20; i++ {
			if got[fmt.Sprintf("healthy-%d/%d ok", i, i)] == 0 {
				return false
			}
		}
		return committedAll(t, tg, group, topic)
	})
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	before := calls(t, first)
	for _, p := range []string{"poison-a/1", "poison-c/1", "poison-c/2"} {
		if n := before[p+" failed"] + before[p+" ok"]; n != 0 {
			t.Fatalf("%s ran %d times while its key was deferred", p, n)
		}
	}

	startDeferChild(t, topic, group, second, "")
	waitFor(t, 2*time.Minute, "the new member to handle every deferred message", func() bool {
		got := calls(t, second)
		for _, p := range poisoned {
			if got[p+" ok"] == 0 {
				return false
			}
		}
		return true
	})
	after := calls(t, second)
	for _, p := range poisoned {
		if n := after[p+" ok"]; n != 1 {
			t.Errorf("%s handled %d times by the new member, want exactly once", p, n)
		}
	}
	for line := range after {
		if strings.HasPrefix(line, "healthy") {
			t.Errorf("committed message %q ran again", line)
		}
	}
	checkOrder(t, second)
}

// keySeq splits a child's "key/seq".
func keySeq(s string) (string, int) {
	key, seq, _ := strings.Cut(s, "/")
	n, _ := strconv.Atoi(seq)
	return key, n
}

// checkOrder fails t if a child's output at path shows a key's messages
// handled out of order.
func checkOrder(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[1] != "ok" {
			continue
		}
		key, seq := keySeq(f[0])
		if prev, seen := last[key]; seen && seq < prev {
			t.Errorf("%s: key %s ran %d after %d", path, key, seq, prev)
		}
		last[key] = seq
	}
}

// A rebalance while keys are deferred and retrying: a second member joins
// and takes a partition over mid-retry; once the failure ends, every
// deferred message is handled exactly once, by one of the two, in order,
// and nothing committed runs again.
func TestDeferredKeysMoveWithARebalance(t *testing.T) {
	tg := target{name: "kafka"}
	testservices.RequireKafka(t)
	topic := createTopic(t, tg, 2)
	group := testservices.UniqueName("defer-rebalance")
	dir := t.TempDir()
	first, second, failFile := filepath.Join(dir, "first.txt"), filepath.Join(dir, "second.txt"), filepath.Join(dir, "failing")
	if err := os.WriteFile(failFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Poisoned keys on both partitions (the producer's CRC-32 partitioner).
	var poisoned, heads []string
	perPartition := map[uint32]int{}
	for i := 0; len(poisoned) < 8; i++ {
		key := fmt.Sprintf("poison-%d", i)
		p := crc32.ChecksumIEEE([]byte(key)) % 2
		if perPartition[p] == 2 {
			continue
		}
		perPartition[p]++
		poisoned = append(poisoned, key+"/0", key+"/1")
		heads = append(heads, key+"/0")
	}
	startDeferChild(t, topic, group, first, failFile)
	producer := newClient(t, newConfig(t, tg, func(c *config.Config) { c.SourceSystem = "test" }))
	for _, p := range poisoned {
		key, seq := keySeq(p)
		sendSeq(t, producer, topic, key, seq)
	}
	for i := 0; i < 20; i++ {
		sendSeq(t, producer, topic, fmt.Sprintf("healthy-%d", i), i)
	}
	waitFor(t, 2*time.Minute, "every head deferred and retried, the rest handled or queued, everything committed", func() bool {
		got := calls(t, first)
		for _, h := range heads {
			if got[h+" failed"] < 2 {
				return false
			}
		}
		return committedAll(t, tg, group, topic)
	})
	// The second member takes a partition over while its keys retry.
	startDeferChild(t, topic, group, second, failFile)
	waitFor(t, 2*time.Minute, "the new member to retry a deferred key it took over", func() bool {
		for line := range calls(t, second) {
			if strings.HasPrefix(line, "poison") && strings.HasSuffix(line, " failed") {
				return true
			}
		}
		return false
	})
	if err := os.Remove(failFile); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Minute, "every deferred message handled", func() bool {
		a, b := calls(t, first), calls(t, second)
		for _, p := range poisoned {
			if a[p+" ok"]+b[p+" ok"] == 0 {
				return false
			}
		}
		return true
	})
	a, b := calls(t, first), calls(t, second)
	for _, p := range poisoned {
		if n := a[p+" ok"] + b[p+" ok"]; n != 1 {
			t.Errorf("%s handled %d times, want exactly once", p, n)
		}
	}
	for line := range b {
		if strings.HasPrefix(line, "healthy") {
			t.Errorf("committed message %q ran again on the new member", line)
		}
	}
	checkOrder(t, first)
	checkOrder(t, second)
}
