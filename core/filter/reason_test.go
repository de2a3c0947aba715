package filter

import "testing"

func TestReason(t *testing.T) {
	tests := []struct {
		r           Reason
		want        string
		undecodable bool
	}{
		{ReasonStale, "stale", false},
		{ReasonSourceSystemLoop, "source-system-loop", false},
		{ReasonEventType, "event-type", false},
		{ReasonDeduplicated, "deduplicated", false},
		{ReasonDuplicateEventID, "duplicate-event-id", false},
		{ReasonNoKey, "no-key", true},
		{ReasonKeyNotUTF8, "key-not-utf8", true},
		{ReasonNullPayload, "null-payload", true},
		{ReasonInvalidJSON, "invalid-json", true},
		{0, "unknown", false},
		{reasonEnd, "unknown", false},
		{255, "unknown", false},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("Reason(%d).String() = %q, want %q", tt.r, got, tt.want)
		}
		if got := tt.r.Undecodable(); got != tt.undecodable {
			t.Errorf("Reason(%d).Undecodable() = %v, want %v", tt.r, got, tt.undecodable)
		}
	}
}
