package middleware

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestLog(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantLog string // "" for none
	}{
		{"success logs nothing", nil, ""},
		{"a transient failure is logged and passed on", errors.New("flaky"), "ERROR event failed; committed without a retry (best-effort mode) key=k class=transient error=flaky"},
		{"a permanent failure likewise", fault.Permanent(errors.New("bad")), "ERROR event failed; committed without a retry (best-effort mode) key=k class=permanent error=bad"},
		{"a terminal failure is an abort", fault.Terminal(errors.New("gone")), "INFO event aborted by a terminal failure key=k class=terminal error=gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &logRecorder{}
			ctx, cancel := newInv()
			defer cancel(nil)
			err := invoke(NewStack(Handler(handlerFunc(func(*event.Context, event.Event) error { return tt.err }), nil), NewLog(slog.New(rec))), ctx, &event.Message{})
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if got := strings.Join(rec.lines(), "\n"); got != tt.wantLog {
				t.Fatalf("log %q, want %q", got, tt.wantLog)
			}
		})
	}
}
