package consumer

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/fetch"
	"github.com/prosody-events/prosody-go/core/kafkasec"
	"github.com/prosody-events/prosody-go/core/middleware"
	"github.com/prosody-events/prosody-go/core/mockbroker"
	"github.com/prosody-events/prosody-go/core/state"
	"github.com/prosody-events/prosody-go/core/telemetry"
	"github.com/prosody-events/prosody-go/core/timerstore"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// Options configure a Consumer. The high-level client fills them from the
// validated configuration; Go programs may fill them directly.
type Options struct {
	Brokers []string
	// Mock uses the process-wide in-memory cluster instead of Brokers.
	Mock bool
	// Security are the TLS and SASL settings of every connection: the
	// group's, the fetch loop's and the deferred-message loader's (they
	// share one sarama configuration). Not used in mock mode.
	Security kafkasec.Settings
	GroupID  string
	Topics   []string
	// AllowedEvents are type prefixes; empty allows every event.
	AllowedEvents []string

	MaxUncommitted  int           // unfinished offsets per partition before it pauses
	PollInterval    time.Duration // longest a fetch waits for data
	CommitInterval  time.Duration // how often finished offsets are committed
	ShutdownTimeout time.Duration // drain budget on revocation and stop
	StallThreshold  time.Duration // oldest unfinished offset older than this = stalled

	// Timers is the store of durable timers; nil means handlers have no
	// timers (operations fail with event.ErrNoTimers).
	Timers timerstore.Store
	// SlabSize groups stored timers by time (slab_size); whole seconds.
	SlabSize time.Duration

	// Deferral, when set, gives every partition the state the defer
	// layers of pipeline mode need (package deferral): the stores of its
	// deferred keys, and a loader that reads deferred messages back. It
	// needs Timers, which carry the retries. Nil: stored retry timers are
	// left alone (a mode that does not defer).
	Deferral *Deferral

	// State, when set, is the client's keyed state: every partition opens
	// its part (state.Service.Partition) before admitting records, and
	// its handlers' contexts offer it. It needs Timers (it opens with them).
	State *state.Service

	// Stacks run the events: every message and timer through Events
	// (required), undecodable records through Undecodable (nil: they are
	// committed as skipped). An event whose handler starts asynchronously
	// (middleware.Stack.StartsAsync) holds no goroutine while it runs.
	Stacks middleware.Stacks

	// Scheduler, when set, is the stacks' scheduler: a driver running
	// quick events one after another on its own goroutine leases one of
	// its permits for the series, while no attempt waits for one, instead
	// of each event taking and returning one (middleware.Scheduler.Lease).
	// Nil: every event takes its own, as the stack does anyway.
	Scheduler *middleware.Scheduler

	// MessageSpans relates the spans the consumer makes of a message
	// outside the stacks (message.filtered, load) to the record's context,
	// when the core's spans are recorded (message_spans).
	MessageSpans tracing.Relation

	// Broadcast, when set, is told of the timers scheduled and cancelled
	// (telemetry.TimerScheduled, TimerCancelled), for its observers of
	// every kind of event (the telemetry emitter).
	Broadcast *telemetry.Broadcast

	// Fetched, if set, sees each batch of records as its fetch delivers
	// it (fetch.Options.Fetched): a measurement hook, for the time
	// records wait between their fetch and their handler. It runs on the
	// fetch loop and must be quick; rs and its bytes are the fetch
	// response's, reused once it returns, so it must not keep them.
	Fetched func(topic string, partition int32, rs []fetch.Record)

	ClientID string       // defaults to the host name
	Logger   *slog.Logger // defaults to slog.Default()
}

// Deferral configures deferred retry (Options.Deferral).
type Deferral struct {
	Store deferstore.Store
	// MaxDelay is defer_max_delay: how far ahead a retry timer can be,
	// which bounds the timers read when a partition is assigned.
	MaxDelay time.Duration
	// Loader configures the point reads of deferred messages; its
	// MaxInFlight defaults to MaxUncommitted.
	Loader fetch.LoaderOptions
}

func (o *Options) validate() error {
	var errs []error
	if o.Stacks.Events == nil {
		errs = append(errs, errors.New("consumer: Options.Stacks.Events is required"))
	}
	if o.GroupID == "" {
		errs = append(errs, errors.New("group_id: required to consume"))
	}
	if len(o.Topics) == 0 {
		errs = append(errs, errors.New("subscribed_topics: at least one topic is required to consume"))
	}
	if !o.Mock && len(o.Brokers) == 0 {
		errs = append(errs, errors.New("bootstrap_servers: at least one server is required"))
	}
	if o.Timers != nil && o.SlabSize < time.Second {
		errs = append(errs, fmt.Errorf("slab_size: must be at least 1s when timers are used, got %v", o.SlabSize))
	}
	if o.State != nil && o.Timers == nil {
		errs = append(errs, errors.New("consumer: Options.State needs Options.Timers"))
	}
	if o.Deferral != nil && (o.Deferral.Store == nil || o.Timers == nil) {
		errs = append(errs, errors.New("consumer: Options.Deferral needs a Store and Options.Timers"))
	}
	if o.MaxUncommitted < 1 {
		errs = append(errs, fmt.Errorf("max_uncommitted: must be at least 1, got %d", o.MaxUncommitted))
	}
	for name, d := range map[string]time.Duration{
		"poll_interval": o.PollInterval, "commit_interval": o.CommitInterval,
		"shutdown_timeout": o.ShutdownTimeout, "stall_threshold": o.StallThreshold,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive, got %v", name, d))
		}
	}
	return errors.Join(errs...)
}

// saramaConfig maps the options onto sarama's consumer-group settings.
func (o *Options) saramaConfig() (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.Version = mockbroker.KafkaVersion
	cfg.ClientID = o.ClientID
	if cfg.ClientID == "" {
		if h, err := os.Hostname(); err == nil {
			cfg.ClientID = h
		}
	}
	// Every member of a group must offer the same protocol; the original
	// offers only cooperative-sticky, so a mixed fleet needs it too.
	cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyCooperativeSticky()}
	// Revoked partitions drain for up to shutdown_timeout before they are
	// released; the broker must wait at least that long for the member.
	cfg.Consumer.Group.Rebalance.Timeout = o.ShutdownTimeout + 10*time.Second
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = o.CommitInterval
	cfg.Consumer.MaxWaitTime = o.PollInterval
	// sarama's own partition consumers only serve as claims (package fetch
	// reads the records) and are paused as each claim starts; this bounds
	// what one fetches before that.
	cfg.Consumer.Fetch.Default = 32 << 10
	cfg.Consumer.Return.Errors = true
	cfg.Metadata.RefreshFrequency = time.Minute
	if !o.Mock {
		if err := o.Security.Apply(cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}
