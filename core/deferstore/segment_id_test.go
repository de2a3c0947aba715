package deferstore

import (
	"testing"

	"github.com/gocql/gocql"
)

// The expected ids were computed once with Python's
// uuid.uuid5(uuid.NAMESPACE_OID, name), independently of this code.
func TestSegmentID(t *testing.T) {
	tests := []struct {
		group, topic string
		partition    int32
		want         string
	}{
		{"billing", "orders", 7, "bd8f7e01-9403-589a-b4d1-792bb3dbd3ea"},
		{"g", "t", 0, "9a83c502-1f0d-5218-b225-c3088763ed8d"},
		{"grp", "topic", -1, "2f71b05f-8a6e-5cb7-98dd-a179cb370409"},
	}
	for _, tt := range tests {
		if got := gocql.UUID(SegmentID(tt.group, tt.topic, tt.partition)).String(); got != tt.want {
			t.Errorf("SegmentID(%q, %q, %d) = %s, want %s", tt.group, tt.topic, tt.partition, got, tt.want)
		}
	}
}
