package producer

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/mockbroker"
)

// Options configures a Producer. The caller (core/config) resolves
// environment variables and defaults; this package reads no environment.
type Options struct {
	// Brokers are the bootstrap servers. At least one is required, even in
	// mock mode, where they are validated but never dialled.
	Brokers []string

	// Mock connects to the process-wide in-memory cluster
	// (mockbroker.Shared) instead of Brokers.
	Mock bool

	// SourceSystem is written as the source-system header of every record.
	// Required.
	SourceSystem string

	// SendTimeout bounds each Send from the call to the delivery report.
	// Zero means no bound other than the caller's context.
	SendTimeout time.Duration

	// IdempotenceCacheSize is the capacity of the set of recently delivered
	// (topic, key, event id) triples used to drop repeated sends. Zero
	// disables the cache.
	IdempotenceCacheSize int

	// Security are the TLS and SASL settings. They do not apply in mock
	// mode, whose in-memory cluster speaks plaintext.
	Security kafkasec.Settings

	// ClientID is the Kafka client.id. Empty means the host name, as in the
	// original, or "prosody" if that is unavailable.
	ClientID string
}

// The delivery budget sarama gets for one record before it reports failure.
// librdkafka, which the original uses, retries for up to 300 s
// (message.timeout.ms); capped exponential backoff with this many retries
// spends about the same.
const (
	retryMax        = 300
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = time.Second
)

// validate checks the options that do not depend on the network.
func (o *Options) validate() error {
	var errs []error
	if len(o.Brokers) == 0 {
		errs = append(errs, errors.New("at least one broker is required"))
	}
	for _, b := range o.Brokers {
		if b == "" {
			errs = append(errs, errors.New("broker addresses must not be empty"))
			break
		}
	}
	if o.SourceSystem == "" {
		errs = append(errs, errors.New("source system is required"))
	}
	if o.SendTimeout < 0 {
		errs = append(errs, fmt.Errorf("send timeout must not be negative, got %s", o.SendTimeout))
	}
	if o.IdempotenceCacheSize < 0 {
		errs = append(errs, fmt.Errorf("idempotence cache size must not be negative, got %d", o.IdempotenceCacheSize))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("producer: invalid options: %w", err)
	}
	return nil
}

// clientID returns the configured client id or the host name.
func (o *Options) clientID() string {
	if o.ClientID != "" {
		return o.ClientID
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "prosody"
}

// saramaConfig builds the producer configuration: the settings the original
// passes to librdkafka, translated.
func (o *Options) saramaConfig() (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	// Headers need 0.11 and idempotence needs 0.11; sarama additionally
	// lowers each request to what the broker advertises, so this works for
	// Kafka 4.x and for the mock cluster alike.
	cfg.Version = mockbroker.KafkaVersion
	cfg.ClientID = o.clientID()

	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Net.MaxOpenRequests = 1 // required by sarama's idempotent producer
	cfg.Producer.Compression = sarama.CompressionLZ4
	cfg.Producer.Partitioner = NewPartitioner
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	cfg.Producer.Retry.Max = retryMax
	cfg.Producer.Retry.BackoffFunc = retryBackoff

	// Fetch metadata only for topics this producer writes to, as
	// librdkafka does, rather than for the whole cluster.
	cfg.Metadata.Full = false

	if !o.Mock {
		if err := o.Security.Apply(cfg); err != nil {
			return nil, fmt.Errorf("producer: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("producer: invalid kafka configuration: %w", err)
	}
	return cfg, nil
}

// retryBackoff doubles from retryBackoffMin up to retryBackoffMax.
func retryBackoff(retries, _ int) time.Duration {
	d := retryBackoffMin
	for i := 1; i < retries && d < retryBackoffMax; i++ {
		d *= 2
	}
	return min(d, retryBackoffMax)
}
