package producer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"closed", ErrClosed, Terminal},
		{"wrapped closed", fmt.Errorf("x: %w", ErrClosed), Terminal},
		{"send timeout", fmt.Errorf("x: %w", ErrSendTimeout), Transient},
		{"context deadline", context.DeadlineExceeded, Transient},
		{"context cancelled", context.Canceled, Transient},
		{"producer fenced", sarama.ErrProducerFenced, Terminal},
		{"fenced instance id", sarama.ErrFencedInstancedId, Terminal},
		{"corrupt message", sarama.ErrInvalidMessage, Permanent},
		{"invalid message size", sarama.ErrInvalidMessageSize, Permanent},
		{"message too large", fmt.Errorf("send: %w", sarama.ErrMessageSizeTooLarge), Permanent},
		{"invalid record", sarama.ErrInvalidRecord, Permanent},
		{"invalid timestamp", sarama.ErrInvalidTimestamp, Permanent},
		{"unsupported compression", sarama.ErrUnsupportedCompressionType, Permanent},
		{"producer error wrapping kafka code", &sarama.ProducerError{Err: sarama.ErrInvalidRecord}, Permanent},
		{"not leader", sarama.ErrNotLeaderForPartition, Transient},
		{"request timed out", sarama.ErrRequestTimedOut, Transient},
		{"invalid producer epoch", sarama.ErrInvalidProducerEpoch, Transient},
		{"out of brokers", sarama.ErrOutOfBrokers, Transient},
		{"encoding", sarama.PacketEncodingError{Info: "bad"}, Permanent},
		{"configuration", sarama.ConfigurationError("bad"), Terminal},
		{"shutting down", sarama.ErrShuttingDown, Terminal},
		{"closed client", sarama.ErrClosedClient, Terminal},
		{"our permanent", withClass(Permanent, errors.New("bad input")), Permanent},
		{"unknown", errors.New("boom"), Transient},
		{"timeout wins over wrapped kafka text", fmt.Errorf("%w: %w", ErrSendTimeout, sarama.ErrInvalidRecord), Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestClassString(t *testing.T) {
	for c, want := range map[Class]string{Transient: "transient", Permanent: "permanent", Terminal: "terminal", Class(9): "unknown"} {
		if got := c.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(c), got, want)
		}
	}
}
