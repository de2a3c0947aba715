package kafkafault

import (
	"errors"
	"fmt"
	"testing"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/fault"
)

// Every error sarama can report, built into the error Send returns, gets
// the original's class, and errors.Is still finds the sarama error.
func TestMark(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want fault.Class
	}{
		{"producer fenced", sarama.ErrProducerFenced, fault.ClassTerminal},
		{"fenced instance id", sarama.ErrFencedInstancedId, fault.ClassTerminal},
		{"corrupt message", sarama.ErrInvalidMessage, fault.ClassPermanent},
		{"invalid message size", sarama.ErrInvalidMessageSize, fault.ClassPermanent},
		{"message too large", sarama.ErrMessageSizeTooLarge, fault.ClassPermanent},
		{"invalid record", sarama.ErrInvalidRecord, fault.ClassPermanent},
		{"invalid timestamp", sarama.ErrInvalidTimestamp, fault.ClassPermanent},
		{"unsupported compression", sarama.ErrUnsupportedCompressionType, fault.ClassPermanent},
		{"producer error wrapping a kafka code", &sarama.ProducerError{Err: sarama.ErrInvalidRecord}, fault.ClassPermanent},
		{"not leader", sarama.ErrNotLeaderForPartition, fault.ClassTransient},
		{"request timed out", sarama.ErrRequestTimedOut, fault.ClassTransient},
		{"not enough replicas", sarama.ErrNotEnoughReplicas, fault.ClassTransient},
		{"invalid producer epoch", sarama.ErrInvalidProducerEpoch, fault.ClassTransient},
		{"policy violation", sarama.ErrPolicyViolation, fault.ClassTransient},
		{"out of brokers", sarama.ErrOutOfBrokers, fault.ClassTransient},
		{"incomplete response", sarama.ErrIncompleteResponse, fault.ClassTransient},
		{"encoding", sarama.PacketEncodingError{Info: "bad"}, fault.ClassPermanent},
		{"decoding", sarama.PacketDecodingError{Info: "bad"}, fault.ClassTransient},
		{"configuration", sarama.ConfigurationError("bad"), fault.ClassTerminal},
		{"shutting down", sarama.ErrShuttingDown, fault.ClassTerminal},
		{"closed client", sarama.ErrClosedClient, fault.ClassTerminal},
		{"unknown", errors.New("boom"), fault.ClassTransient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Mark(fmt.Errorf("producer: send to %q: %w", "t", tt.err))
			if got := fault.ClassOf(err); got != tt.want {
				t.Errorf("ClassOf(%v) = %v, want %v", err, got, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("%v does not wrap %v", err, tt.err)
			}
			// A caller adding context keeps the class.
			if got := fault.ClassOf(fmt.Errorf("publishing: %w", err)); got != tt.want {
				t.Errorf("wrapped: ClassOf = %v, want %v", got, tt.want)
			}
		})
	}
}
