// Command prosody-demo is `make demo`: a Prosody client in mock mode (an
// in-process Kafka cluster, nothing on the network) sends keyed JSON events,
// another client consumes them with a handler, and the demo checks that
// every message arrived and that each key's messages were handled in order.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/prosody-events/prosody-go/core/admin"
	"github.com/prosody-events/prosody-go/core/client"
	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/mockbroker"
	"github.com/prosody-events/prosody-go/core/producer"
)

const (
	topic      = "prosody-demo"
	groupID    = "prosody-demo"
	partitions = 4
	keys       = 32
	messages   = 400
	timeout    = 30 * time.Second
)

// payload is the JSON body of every demo message.
type payload struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Seq  int    `json:"seq"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "prosody-demo: %v\n", err)
		stop()
		os.Exit(1)
	}
}

// mockConfig is the configuration both demo clients share: mock mode, so
// bootstrap_servers is required but never dialled.
func mockConfig(set func(*config.Config)) (*config.Config, error) {
	return config.Load(func(c *config.Config) {
		c.BootstrapServers = []string{"localhost:9094"}
		c.Mock = true
		c.ProbePort = config.None[int]()
		c.CommitInterval = 200 * time.Millisecond
		set(c)
	})
}

func run(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	adm, err := admin.New(admin.Options{Brokers: []string{"localhost:9094"}, Mock: true})
	if err != nil {
		return err
	}
	defer adm.Close()
	if err := adm.CreateTopic(ctx, admin.TopicSpec{Name: topic, Partitions: partitions}); err != nil {
		return fmt.Errorf("creating topic: %w", err)
	}

	senderCfg, err := mockConfig(func(c *config.Config) { c.SourceSystem = "prosody-demo-sender" })
	if err != nil {
		return err
	}
	sender, err := client.New(senderCfg, client.WithLogger(quiet))
	if err != nil {
		return err
	}
	defer sender.Close(context.Background())

	// What will be produced, and where the key partitioner puts each key.
	produced := make(map[string]*keyLog, keys)
	order := make([]payload, messages)
	for i := range order {
		key := fmt.Sprintf("key-%02d", i%keys)
		l := produced[key]
		if l == nil {
			l = &keyLog{partition: producer.PartitionForKey([]byte(key), partitions)}
			produced[key] = l
		}
		seq := len(l.seqs) + 1
		l.seqs = append(l.seqs, seq)
		order[i] = payload{ID: fmt.Sprintf("%s-%d", key, seq), Type: "demo.event", Seq: seq}
	}
	track := newTracker(produced)

	receiverCfg, err := mockConfig(func(c *config.Config) {
		c.GroupID = groupID
		c.SubscribedTopics = []string{topic}
	})
	if err != nil {
		return err
	}
	receiver, err := client.New(receiverCfg, client.WithLogger(quiet))
	if err != nil {
		return err
	}
	defer receiver.Close(context.Background())

	done := make(chan struct{})
	var finished atomic.Bool
	var running, peak atomic.Int32
	followUps := newFollowUps(keys)
	err = receiver.Subscribe(event.HandlerFuncs{Message: func(ctx *event.Context, m *event.Message) error {
		n := running.Add(1)
		defer running.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		var body payload
		if err := json.Unmarshal(m.Payload, &body); err != nil {
			track.bad(fmt.Sprintf("partition %d offset %d: %v", m.Partition, m.Offset, err))
			return nil
		}
		time.Sleep(time.Millisecond) // a little work, so keys visibly overlap
		if body.Seq == len(produced[m.Key].seqs) {
			// The key's last event: schedule a follow-up a second from now.
			at := time.Now().Add(time.Second)
			if err := ctx.Schedule(at); err != nil {
				return err
			}
			followUps.scheduled(m.Key, at)
		}
		if track.record(m.Key, m.Partition, m.Offset, body.Seq) && finished.CompareAndSwap(false, true) {
			close(done)
		}
		return nil
	}, Timer: func(_ *event.Context, t *event.Timer) error {
		followUps.fired(t.Key)
		return nil
	}})
	if err != nil {
		return err
	}

	for i, p := range order {
		body, _ := json.Marshal(p)
		if err := sender.Send(ctx, topic, fmt.Sprintf("key-%02d", i%keys), body); err != nil {
			return fmt.Errorf("sending message %d: %w", i, err)
		}
	}

	select {
	case <-done:
	case <-ctx.Done():
	}
	select {
	case <-followUps.done:
	case <-ctx.Done():
	}
	stopCtx, stopCancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer stopCancel()
	if err := receiver.Unsubscribe(stopCtx); err != nil {
		return err
	}

	cluster, err := mockbroker.Shared()
	if err != nil {
		return err
	}
	fmt.Print(track.summary(cluster.Addrs(), time.Since(start)))
	fmt.Printf("  concurrency  up to %d handlers at once across keys (max_concurrency %d)\n", peak.Load(), receiverCfg.MaxConcurrency)
	fmt.Print(followUps.summary())
	if err := track.err(); err != nil {
		return err
	}
	if err := followUps.err(); err != nil {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("timed out after %v", timeout)
	}
	return nil
}
