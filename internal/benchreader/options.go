// Package benchreader fills the engine's options for a benchmark reader
// from the configuration, as the client does. It is apart from benchkit,
// which the engine's own tests import.
package benchreader

import (
	"log/slog"
	"os"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/consumer"
	"github.com/prosody-events/prosody-go/core/deferstore"
	"github.com/prosody-events/prosody-go/core/fetch"
)

// Options are the engine's options for a benchmark reader of
// topic in group, filled from cfg as the client fills them; the caller
// adds the stacks, the scheduler and, in pipeline mode, the stores.
func Options(cfg config.Config, addrs []string, group, topic string, level slog.Level) consumer.Options {
	return consumer.Options{
		Brokers: addrs, GroupID: group, Topics: []string{topic},
		MaxUncommitted: cfg.MaxUncommitted, PollInterval: cfg.PollInterval, CommitInterval: cfg.CommitInterval,
		ShutdownTimeout: cfg.ShutdownTimeout, StallThreshold: cfg.StallThreshold, SlabSize: cfg.SlabSize,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	}
}

// Deferral is pipeline mode's deferral as cfg describes it, with store as
// the store of deferred keys.
func Deferral(cfg config.Config, store deferstore.Store) *consumer.Deferral {
	return &consumer.Deferral{Store: store, MaxDelay: cfg.DeferMaxDelay, Loader: fetch.LoaderOptions{
		CacheSize: cfg.DeferCacheSize, SeekTimeout: cfg.DeferSeekTimeout, DiscardThreshold: cfg.DeferDiscardThreshold,
	}}
}
