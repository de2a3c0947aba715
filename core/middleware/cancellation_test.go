package middleware

import (
	"errors"
	"testing"

	"github.com/prosody-events/prosody-go/core/event"
	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/invocation"
)

func TestCancellation(t *testing.T) {
	tests := []struct {
		name      string
		revoke    bool  // before the attempt
		handler   error // what the handler returns
		midway    bool  // the handler revokes before returning
		wantRun   bool
		wantClass fault.Class
		wantIs    error
	}{
		{"a live invocation runs", false, nil, false, true, 0, nil},
		{"a cancelled invocation does not run", true, nil, false, false, fault.ClassTerminal, invocation.ErrRevoked},
		{"a transient failure while shutting down is terminal", false, errors.New("interrupted"), true, true, fault.ClassTerminal, invocation.ErrRevoked},
		{"a permanent failure keeps its class", false, fault.Permanent(errors.New("bad")), true, true, fault.ClassPermanent, nil},
		{"a transient failure of a live invocation stays transient", false, errors.New("flaky"), false, true, fault.ClassTransient, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := newInv()
			defer cancel(nil)
			if tt.revoke {
				cancel(invocation.ErrRevoked)
			}
			ran := false
			h := handlerFunc(func(*event.Context, event.Event) error {
				ran = true
				if tt.midway {
					cancel(invocation.ErrRevoked)
				}
				return tt.handler
			})
			err := invoke(NewStack(Handler(h, nil), Cancellation{}), ctx, &event.Message{})
			if ran != tt.wantRun {
				t.Fatalf("handler ran: %v, want %v", ran, tt.wantRun)
			}
			if tt.handler == nil && !tt.revoke {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if fault.ClassOf(err) != tt.wantClass || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
				t.Fatalf("err = %v (%v), want %v wrapping %v", err, fault.ClassOf(err), tt.wantClass, tt.wantIs)
			}
			if tt.handler != nil && !errors.Is(err, tt.handler) {
				t.Fatalf("err = %v lost the handler's error", err)
			}
		})
	}
}
