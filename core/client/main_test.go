package client

import (
	"io"
	"log"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
)

func TestMain(m *testing.M) {
	if os.Getenv(deferChildEnv) != "" {
		os.Exit(runDeferChild())
	}
	if os.Getenv(stateChildEnv) != "" {
		os.Exit(runStateChild())
	}
	if os.Getenv(dedupChildEnv) != "" {
		os.Exit(runDedupChild())
	}
	// sarama reads its logger globals without synchronisation, so they
	// are set once, before any client runs; tests that want sarama's logs
	// switch where this writer sends them (saramaLog.set).
	sarama.Logger = log.New(saramaLog, "[sarama] ", log.LstdFlags)
	sarama.DebugLogger = sarama.Logger
	goleak.VerifyTestMain(m, testservices.LeakOptions()...)
}

// saramaLog is where sarama's log lines go: nowhere unless a test says.
var saramaLog = &switchWriter{}

// switchWriter forwards writes to a writer that can be changed while
// others write.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	s.w = w
	s.mu.Unlock()
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

func quietLogger() *slog.Logger {
	if os.Getenv("PROSODY_TEST_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// target is where a test runs: the in-process mock cluster or real Kafka.
type target struct {
	name string
	mock bool
}

func targets(t *testing.T) []target {
	testservices.RequireKafka(t)
	return []target{{"mock", true}, {"kafka", false}}
}

// newConfig builds a validated configuration for a test, with short
// intervals so tests do not wait on production defaults.
func newConfig(t *testing.T, tg target, set ...func(*config.Config)) *config.Config {
	t.Helper()
	base := func(c *config.Config) {
		c.BootstrapServers = testservices.KafkaAddrs()
		c.Mock = tg.mock
		c.CassandraNodes = testservices.CassandraNodes()
		c.PollInterval = 50 * time.Millisecond
		c.CommitInterval = 200 * time.Millisecond
		c.ShutdownTimeout = 5 * time.Second
		c.RetryBase = 5 * time.Millisecond
		c.MaxRetryDelay = 50 * time.Millisecond
		c.ProbePort = config.None[int]()
		c.TelemetryEnabled = false
	}
	cfg, err := config.Load(append([]func(*config.Config){base}, set...)...)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// newClient builds a client for a test and closes it when the test ends.
func newClient(t *testing.T, cfg *config.Config) *Client {
	t.Helper()
	c, err := New(cfg, WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeClient(t, c) })
	return c
}

// childConfig is the configuration of a consumer the tests run as a
// child process: group on topic, on the test services, intervals short,
// no probe server and no telemetry; set changes it further.
func childConfig(group, topic string, set ...func(*config.Config)) (*config.Config, error) {
	base := func(c *config.Config) {
		c.BootstrapServers = testservices.KafkaAddrs()
		c.CassandraNodes = testservices.CassandraNodes()
		c.GroupID, c.SubscribedTopics = group, []string{topic}
		c.PollInterval, c.CommitInterval = 50*time.Millisecond, 200*time.Millisecond
		c.ProbePort = config.None[int]()
		c.TelemetryEnabled = false
	}
	return config.Load(append([]func(*config.Config){base}, set...)...)
}

// childWithOutput opens a child consumer's output (the file named by the
// environment variable out, appended to: one write a line, so what was
// written before a SIGKILL is there) and its client, configured by
// childConfig.
func childWithOutput(out, group, topic string, set ...func(*config.Config)) (*Client, *os.File, error) {
	f, err := os.OpenFile(os.Getenv(out), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := childConfig(group, topic, set...)
	if err != nil {
		return nil, nil, err
	}
	c, err := New(cfg, WithLogger(quietLogger()))
	return c, f, err
}

// waitFor is testservices.WaitFor, named short for the many uses here.
var waitFor = testservices.WaitFor
