package filter

import (
	"errors"
	"testing"

	"github.com/IBM/sarama"
)

func hdr(k, v string) *sarama.RecordHeader {
	return &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)}
}

func TestLookupSourceSystem(t *testing.T) {
	tests := []struct {
		name    string
		headers []*sarama.RecordHeader
		want    string
		ok      bool
		err     error
	}{
		{"no headers", nil, "", false, nil},
		{"present", []*sarama.RecordHeader{hdr("traceparent", "x"), hdr("source-system", "svc")}, "svc", true, nil},
		{"first occurrence wins", []*sarama.RecordHeader{hdr("source-system", "a"), hdr("source-system", "b")}, "a", true, nil},
		{"empty value is present", []*sarama.RecordHeader{hdr("source-system", "")}, "", true, nil},
		{"null value is absent", []*sarama.RecordHeader{{Key: []byte("source-system")}}, "", false, nil},
		{"name is exact", []*sarama.RecordHeader{hdr("Source-System", "a"), hdr("source-system ", "b"), hdr("source_system", "c")}, "", false, nil},
		{"nil header skipped", []*sarama.RecordHeader{nil, hdr("source-system", "a")}, "a", true, nil},
		{"UTF-8 value", []*sarama.RecordHeader{hdr("source-system", "dienst-ü")}, "dienst-ü", true, nil},
		{"invalid UTF-8 is absent", []*sarama.RecordHeader{hdr("source-system", "\xff"), hdr("source-system", "b")}, "", false, ErrSourceSystemNotUTF8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := LookupSourceSystem(tt.headers)
			if got != tt.want || ok != tt.ok || !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
				t.Errorf("LookupSourceSystem = (%q, %v, %v), want (%q, %v, %v)", got, ok, err, tt.want, tt.ok, tt.err)
			}
			got, ok = SourceSystem(tt.headers)
			if got != tt.want || ok != tt.ok {
				t.Errorf("SourceSystem = (%q, %v), want (%q, %v)", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestIsLoop(t *testing.T) {
	tests := []struct {
		name    string
		source  string
		present bool
		group   string
		want    bool
	}{
		{"same group", "orders", true, "orders", true},
		{"other system", "billing", true, "orders", false},
		{"absent", "", false, "orders", false},
		{"absent ignores value", "orders", false, "orders", false},
		{"case-sensitive", "Orders", true, "orders", false},
		{"no trimming", "orders ", true, "orders", false},
		{"prefix is not a match", "orders-v2", true, "orders", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsLoop(tt.source, tt.present, tt.group); got != tt.want {
				t.Errorf("IsLoop(%q, %v, %q) = %v, want %v", tt.source, tt.present, tt.group, got, tt.want)
			}
		})
	}
}
