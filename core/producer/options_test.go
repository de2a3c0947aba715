package producer

import (
	"strings"
	"testing"
	"time"
)

func TestNewValidatesOptions(t *testing.T) {
	valid := Options{Brokers: []string{"localhost:9094"}, SourceSystem: "svc", Mock: true}
	tests := []struct {
		name    string
		edit    func(*Options)
		wantErr string
	}{
		{"no brokers", func(o *Options) { o.Brokers = nil }, "at least one broker"},
		{"no brokers in mock mode", func(o *Options) { o.Brokers = nil; o.Mock = true }, "at least one broker"},
		{"empty broker", func(o *Options) { o.Brokers = []string{""} }, "must not be empty"},
		{"no source system", func(o *Options) { o.SourceSystem = "" }, "source system"},
		{"negative timeout", func(o *Options) { o.SendTimeout = -time.Second }, "send timeout"},
		{"negative cache size", func(o *Options) { o.IdempotenceCacheSize = -1 }, "cache size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.edit(&o)
			p, err := New(o)
			if err == nil {
				p.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestSaramaConfig(t *testing.T) {
	o := Options{Brokers: []string{"b:1"}, SourceSystem: "s", ClientID: "my-client"}
	cfg, err := o.saramaConfig()
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Producer.Idempotent || cfg.Net.MaxOpenRequests != 1 || cfg.Producer.Compression.String() != "lz4" ||
		!cfg.Producer.Return.Successes || !cfg.Producer.Return.Errors || cfg.ClientID != "my-client" {
		t.Errorf("unexpected config: %+v", cfg.Producer)
	}
	if o.ClientID = ""; o.clientID() == "" {
		t.Error("empty default client id")
	}
}

func TestRetryBackoff(t *testing.T) {
	tests := []struct {
		retries int
		want    time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{300, time.Second},
	}
	for _, tt := range tests {
		if got := retryBackoff(tt.retries, retryMax); got != tt.want {
			t.Errorf("retryBackoff(%d) = %s, want %s", tt.retries, got, tt.want)
		}
	}
}
