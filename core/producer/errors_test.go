package producer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/payload"
)

func TestSentinelClasses(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		target error
		want   fault.Class
	}{
		{"closed", ErrClosed, ErrClosed, fault.ClassTerminal},
		{"wrapped closed", fmt.Errorf("x: %w", ErrClosed), ErrClosed, fault.ClassTerminal},
		{"send timeout", ErrSendTimeout, ErrSendTimeout, fault.ClassTransient},
		{"wrapped send timeout", fmt.Errorf("x: %w", ErrSendTimeout), ErrSendTimeout, fault.ClassTransient},
		{"context deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), context.DeadlineExceeded, fault.ClassTransient},
		{"context cancelled", fmt.Errorf("x: %w", context.Canceled), context.Canceled, fault.ClassTransient},
		{"invalid payload", payloadError("t", fmt.Errorf("%w: bad", payload.ErrInvalid)), payload.ErrInvalid, fault.ClassPermanent},
		{"nil payload", payloadError("t", payload.ErrNull), payload.ErrNull, fault.ClassPermanent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fault.ClassOf(tt.err); got != tt.want {
				t.Errorf("ClassOf(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if !errors.Is(tt.err, tt.target) {
				t.Errorf("%v does not wrap %v", tt.err, tt.target)
			}
		})
	}
	if ErrClosed.Error() != "producer: closed" || ErrSendTimeout.Error() != "producer: send timed out" {
		t.Errorf("sentinel texts changed: %q, %q", ErrClosed, ErrSendTimeout)
	}
}

// The payload error names the argument and says what is wrong once.
func TestPayloadErrorText(t *testing.T) {
	_, err := payload.Meta([]byte(`{"id":`))
	got := payloadError("orders", err).Error()
	if !strings.HasPrefix(got, `producer: send to "orders": payload: not valid JSON: `) || strings.Count(got, "JSON") != 1 {
		t.Errorf("invalid payload error %q", got)
	}
	if got := payloadError("orders", payload.ErrNull).Error(); got != `producer: send to "orders": payload: is nil, want one JSON document` {
		t.Errorf("nil payload error %q", got)
	}
}

// New's errors classify too: invalid options can never succeed.
func TestNewErrorClass(t *testing.T) {
	_, err := New(Options{Brokers: []string{"b:1"}})
	if err == nil || fault.ClassOf(err) != fault.ClassTerminal {
		t.Errorf("New with invalid options = %v (class %v), want a terminal error", err, fault.ClassOf(err))
	}
}

// A delivery report carrying a Kafka error code reaches the caller of Send
// classified, with the sarama error reachable through errors.Is. The broker
// is an in-process kfake cluster that answers the one produce request with
// the code; the codes are ones sarama does not retry.
func TestSendDeliveryErrorClass(t *testing.T) {
	const topic = "delivery-errors"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	tests := []struct {
		name string
		code sarama.KError
		want fault.Class
	}{
		{"INVALID_RECORD", sarama.ErrInvalidRecord, fault.ClassPermanent},
		{"INVALID_TIMESTAMP", sarama.ErrInvalidTimestamp, fault.ClassPermanent},
		{"MESSAGE_TOO_LARGE", sarama.ErrMessageSizeTooLarge, fault.ClassPermanent},
		{"UNSUPPORTED_COMPRESSION_TYPE", sarama.ErrUnsupportedCompressionType, fault.ClassPermanent},
		{"POLICY_VIOLATION", sarama.ErrPolicyViolation, fault.ClassTransient},
		{"PRODUCER_FENCED", sarama.ErrProducerFenced, fault.ClassTerminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
				preq := req.(*kmsg.ProduceRequest)
				resp := preq.ResponseKind().(*kmsg.ProduceResponse)
				for _, rt := range preq.Topics {
					st := kmsg.NewProduceResponseTopic()
					st.Topic, st.TopicID = rt.Topic, rt.TopicID
					for _, rp := range rt.Partitions {
						sp := kmsg.NewProduceResponseTopicPartition()
						sp.Partition = rp.Partition
						sp.ErrorCode = int16(tt.code)
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})

			p, err := New(Options{Brokers: c.ListenAddrs(), SourceSystem: "s", SendTimeout: 20 * time.Second, IdempotenceCacheSize: 8})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := p.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			}()
			_, err = p.Send(context.Background(), topic, "k", []byte(`{"id":"x"}`))
			if err == nil {
				t.Fatal("Send succeeded")
			}
			if got := fault.ClassOf(err); got != tt.want || !errors.Is(err, tt.code) {
				t.Errorf("Send = %v (class %v), want %v wrapping %v", err, got, tt.want, tt.code)
			}
			// A failed send is not remembered: the retry is written.
			d, err := p.Send(context.Background(), topic, "k", []byte(`{"id":"x"}`))
			if err != nil || d.Skipped {
				t.Errorf("retry = %+v, %v; want a delivery", d, err)
			}
		})
	}
}
