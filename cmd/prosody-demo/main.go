// Command prosody-demo is `make demo`: it produces keyed JSON events to the
// in-process mock Kafka cluster and consumes them back with a consumer group,
// checking that every message arrives and that each key's messages arrive in
// order.
//
// It drives sarama directly for now. Once the Prosody consumer engine exists
// the consuming half will go through it instead; the mock cluster, producer
// settings and checks stay the same.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/mockbroker"
)

const (
	topic      = "prosody-demo"
	groupID    = "prosody-demo"
	partitions = 4
	keys       = 32
	messages   = 400
	timeout    = 30 * time.Second
)

// event is the JSON payload of every demo message.
type event struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Seq  int    `json:"seq"`
}

func main() {
	// sarama logs to sarama.Logger, which discards by default; the demo
	// leaves it that way so only the summary is printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "prosody-demo: %v\n", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cluster, err := mockbroker.Shared()
	if err != nil {
		return err
	}
	addrs := cluster.Addrs()
	if err := cluster.EnsureTopic(ctx, topic, partitions); err != nil {
		return err
	}

	produced, err := produce(addrs)
	if err != nil {
		return err
	}
	t := newTracker(produced)
	consumeErr := consume(ctx, addrs, t)

	fmt.Print(t.summary(addrs, time.Since(start)))
	return errors.Join(consumeErr, t.err())
}

// produce sends the demo events and returns, per key, the seqs it wrote in
// order together with the partition each key landed on.
func produce(addrs []string) (map[string]*keyLog, error) {
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.ClientID = "prosody-demo-producer"
	// The producer settings Prosody uses: idempotence (acks=all, one
	// in-flight request so retries cannot reorder), and librdkafka's
	// consistent_random partitioner, CRC-32(key) mod partitions, so a key
	// lands where the original implementation would put it.
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Partitioner = sarama.NewConsistentCRCHashPartitioner
	cfg.Producer.Return.Successes = true

	producer, err := sarama.NewSyncProducer(addrs, cfg)
	if err != nil {
		return nil, fmt.Errorf("create producer: %w", err)
	}

	msgs := make([]*sarama.ProducerMessage, messages)
	for seq := range messages {
		value, err := json.Marshal(event{
			ID:   fmt.Sprintf("demo-%04d", seq),
			Type: "demo.event",
			Seq:  seq,
		})
		if err != nil {
			_ = producer.Close()
			return nil, fmt.Errorf("encode event %d: %w", seq, err)
		}
		msgs[seq] = &sarama.ProducerMessage{
			Topic: topic,
			Key:   sarama.StringEncoder(fmt.Sprintf("key-%02d", seq%keys)),
			Value: sarama.ByteEncoder(value),
		}
	}
	// One batch call: the idempotent producer keeps per-partition order,
	// so each key's seqs are written in the order they are listed.
	sendErr := producer.SendMessages(msgs)
	if err := producer.Close(); err != nil && sendErr == nil {
		sendErr = fmt.Errorf("close producer: %w", err)
	}
	if sendErr != nil {
		return nil, fmt.Errorf("produce: %w", sendErr)
	}

	logs := make(map[string]*keyLog, keys)
	for seq, m := range msgs {
		key := string(m.Key.(sarama.StringEncoder))
		l := logs[key]
		if l == nil {
			l = &keyLog{partition: m.Partition}
			logs[key] = l
		}
		l.seqs = append(l.seqs, seq)
	}
	return logs, nil
}

// consume reads the topic with a fresh consumer group until the tracker has
// seen every produced message or ctx ends, then closes the group.
func consume(ctx context.Context, addrs []string, t *tracker) error {
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.ClientID = "prosody-demo-consumer"
	// A new group starts from the earliest offset (core-behavior.md §3.2),
	// and Prosody members offer only cooperative-sticky.
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{
		sarama.NewBalanceStrategyCooperativeSticky(),
	}
	cfg.Consumer.Return.Errors = true

	group, err := sarama.NewConsumerGroup(addrs, groupID, cfg)
	if err != nil {
		return fmt.Errorf("create consumer group: %w", err)
	}

	// Collect asynchronous consumer errors for the report; the channel
	// closes when the group does.
	var (
		wg        sync.WaitGroup
		asyncErrs []error
	)
	wg.Go(func() {
		for err := range group.Errors() {
			asyncErrs = append(asyncErrs, err)
		}
	})

	cctx, stop := context.WithCancel(ctx)
	defer stop()
	h := &handler{t: t, allSeen: stop}
	var consumeErr error
	// Consume returns at every rebalance; loop until done or out of time.
	for cctx.Err() == nil {
		if err := group.Consume(cctx, []string{topic}, h); err != nil {
			consumeErr = fmt.Errorf("consume: %w", err)
			break
		}
	}

	closeErr := group.Close()
	wg.Wait()
	errs := append([]error{consumeErr}, asyncErrs...)
	if closeErr != nil {
		errs = append(errs, fmt.Errorf("close consumer group: %w", closeErr))
	}
	if ctx.Err() != nil && !t.complete() {
		errs = append(errs, fmt.Errorf("stopped before consuming everything: %w", context.Cause(ctx)))
	}
	return errors.Join(errs...)
}

// handler feeds every claimed message to the tracker and marks it consumed.
type handler struct {
	t       *tracker
	allSeen context.CancelFunc
}

func (*handler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (*handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *handler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		var ev event
		if err := json.Unmarshal(msg.Value, &ev); err != nil {
			h.t.bad(fmt.Sprintf("partition %d offset %d: undecodable value: %v", msg.Partition, msg.Offset, err))
		} else if h.t.record(string(msg.Key), msg.Partition, msg.Offset, ev.Seq) {
			h.allSeen()
		}
		sess.MarkMessage(msg, "")
	}
	return nil
}
