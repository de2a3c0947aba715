// Package logging builds the library's slog logger from the PROSODY_LOG
// filter directive. A host (the C ABI, a Go program) may pass its own
// *slog.Logger instead; the directive then does not apply.
//
// The directive follows the original's env-filter style: a comma-separated
// list of `level` (the default for everything) and `target=level` items,
// e.g. "info" or "warn,prosody=debug". Our logs all belong to the target
// "prosody"; other targets (the original's "scylla", "rdkafka") are
// accepted and ignored so existing settings keep working.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Level returns the level for our logs that directive selects: the level
// given for "prosody" (or a "prosody::…" module) if any, else the default
// level, else info.
func Level(directive string) (slog.Level, error) {
	level := slog.LevelInfo
	var own *slog.Level
	for _, item := range strings.Split(directive, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		target, value, hasTarget := strings.Cut(item, "=")
		if !hasTarget {
			target, value = "", item
		}
		l, err := parseLevel(value)
		if err != nil {
			return slog.LevelInfo, fmt.Errorf("PROSODY_LOG: %w in %q", err, item)
		}
		switch {
		case target == "":
			level = l
		case target == "prosody" || strings.HasPrefix(target, "prosody::") || strings.HasPrefix(target, "prosody_"):
			own = &l
		}
	}
	if own != nil {
		return *own, nil
	}
	return level, nil
}

// off is above every level slog emits, so nothing passes.
const off = slog.Level(1 << 10)

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "trace", "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	case "off", "none":
		return off, nil
	}
	return 0, fmt.Errorf("unknown level %q (want trace, debug, info, warn, error or off)", s)
}

// New returns a text logger writing to w at the level directive selects.
func New(directive string, w io.Writer) (*slog.Logger, error) {
	level, err := Level(directive)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})).With(slog.String("target", "prosody")), nil
}
