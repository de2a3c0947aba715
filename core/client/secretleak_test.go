//go:build linux

package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/secret"
)

// syncBuffer is a bytes.Buffer safe for the many goroutines that log.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureStderr sends what the process writes to file descriptor 2 (the
// default slog and log output, anything a library or the runtime prints)
// into out until the returned function is called. The descriptor is
// redirected, not the os.Stderr variable, which other goroutines read.
func captureStderr(t *testing.T, out io.Writer) (restore func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup3(int(w.Fd()), 2, 0); err != nil {
		t.Fatal(err)
	}
	w.Close() // fd 2 keeps the pipe open
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(out, r)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = syscall.Dup3(saved, 2, 0) // closes the pipe's last writer
			_ = syscall.Close(saved)
			<-done
			r.Close()
		})
	}
}

// TestSecretsNeverLeaveTheProcess runs an authenticated client (SCRAM over
// TLS, a Cassandra password too) with debug logging everywhere: the
// client's logger, sarama's loggers, the standard logger and stderr. It
// also provokes a refused login and validation errors, and prints the
// configuration every way Go can. The passwords appear in none of it.
func TestSecretsNeverLeaveTheProcess(t *testing.T) {
	s := testservices.RequireSecureKafka(t)
	testservices.RequireCassandra(t)
	const wrongPassword = "leak-check-Wrong-Pa55word"
	const cassandraPassword = "leak-check-Cassandra-Pa55word"

	var out syncBuffer
	logger := slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	saramaLog.set(&out) // sarama's Logger and DebugLogger write there (TestMain)
	prevOutput := log.Writer()
	log.SetOutput(&out)
	restoreStderr := captureStderr(t, &out)
	defer func() {
		restoreStderr()
		saramaLog.set(nil)
		log.SetOutput(prevOutput)
	}()
	emit := func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }
	fmt.Fprintln(os.Stderr, "stderr is captured")

	authenticated := func(password string) func(*config.Config) {
		return func(c *config.Config) {
			scram512(s, password)(c)
			c.CassandraUser = "cassandra"
			c.CassandraPassword = secret.New(cassandraPassword)
		}
	}
	base := newConfig(t, target{"kafka", false}, authenticated(s.Password))
	topic := secureTopic(t, base)
	cfg := newConfig(t, target{"kafka", false}, authenticated(s.Password), func(c *config.Config) {
		c.GroupID = testservices.UniqueName("g-leak")
		c.SubscribedTopics = []string{topic}
		c.SendTimeout = config.Some(30 * time.Second)
	})
	// Every way of printing the configuration and the settings made of it.
	for _, v := range []any{cfg, *cfg, kafkasec.FromConfig(cfg)} {
		emit("%v | %+v | %#v | %s", v, v, v, v)
		js, err := json.Marshal(v)
		emit("%s %v", js, err)
		logger.Debug("configuration", "config", v)
	}

	// An authenticated run: send, consume in a group, fire a timer.
	received := make(chan struct{}, 1)
	c, err := New(cfg, WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	sender, err := New(newConfig(t, target{"kafka", false}, authenticated(s.Password), func(c *config.Config) {
		c.SourceSystem = "leak-sender"
		c.SendTimeout = config.Some(30 * time.Second)
	}), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(event.HandlerFuncs{
		Message: func(ctx *event.Context, m *event.Message) error { return ctx.Schedule(time.Now()) },
		Timer: func(ctx *event.Context, tm *event.Timer) error {
			select {
			case received <- struct{}{}:
			default:
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := sender.Send(context.Background(), topic, "k", []byte(`{"id":"1"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-received:
	case <-time.After(time.Minute):
		t.Fatal("the message's timer did not fire within a minute")
	}
	closeClient(t, c)
	closeClient(t, sender)

	// A refused login: every error it produces.
	bad := newConfig(t, target{"kafka", false}, authenticated(wrongPassword), func(c *config.Config) {
		c.GroupID = testservices.UniqueName("g-leak-bad")
		c.SubscribedTopics = []string{topic}
		c.SendTimeout = config.Some(30 * time.Second)
	})
	emit("%+v", bad)
	bc, err := New(bad, WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	emit("send: %v", bc.Send(context.Background(), topic, "k", []byte(`{}`)))
	emit("subscribe: %v", bc.Subscribe(event.HandlerFuncs{}))
	closeClient(t, bc)

	// Validation errors, from JSON and from the environment.
	_, err = config.FromJSON(fmt.Appendf(nil, `{"bootstrap_servers":"x:1","sasl_password":%q}`, wrongPassword))
	emit("validation: %v", err)
	_, err = config.FromJSON(fmt.Appendf(nil, `{"bootstrap_servers":"x:1","cassandra_password":%q}`, cassandraPassword))
	emit("validation: %v", err)
	t.Setenv("PROSODY_SASL_PASSWORD", s.Password)
	_, err = config.FromJSON([]byte(`{"bootstrap_servers":"x:1","security_protocol":"ssl"}`))
	emit("validation: %v", err)

	restoreStderr()
	text := out.String()
	for _, want := range []string{"stderr is captured", "partition assigned", "SASL", "sasl_username / sasl_password", "sasl_password: needs security_protocol", "[redacted]"} {
		if !strings.Contains(text, want) {
			t.Errorf("the capture lacks %q: is everything captured? (%d bytes)", want, len(text))
		}
	}
	for name, pw := range map[string]string{"Kafka password": s.Password, "wrong password": wrongPassword, "Cassandra password": cassandraPassword} {
		if i := strings.Index(text, pw); i >= 0 {
			lo, hi := max(0, i-200), min(len(text), i+len(pw)+50)
			t.Errorf("the %s appears in what the process emitted:\n...%s...", name, text[lo:hi])
		}
	}
	t.Logf("searched %d bytes of logs, errors and printed configuration", len(text))
}
