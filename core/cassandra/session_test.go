package cassandra

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/prosody-events/prosody-go/core/fault"
)

func contextWithTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d)
}

func TestHostPorts(t *testing.T) {
	tests := []struct {
		in      []string
		want    []string
		wantErr bool
	}{
		{[]string{"localhost"}, []string{"localhost:9042"}, false},
		{[]string{"db1:9043", " db2 "}, []string{"db1:9043", "db2:9042"}, false},
		{[]string{"::1"}, []string{"[::1]:9042"}, false},
		{[]string{"[::1]:9044"}, []string{"[::1]:9044"}, false},
		{[]string{"db:notaport"}, nil, true},
		{[]string{""}, nil, true},
	}
	for _, tt := range tests {
		got, err := hostPorts(tt.in)
		if (err != nil) != tt.wantErr || strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("hostPorts(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		ok   bool
	}{
		{"ok", Options{Nodes: []string{"h"}, Keyspace: "prosody"}, true},
		{"no nodes", Options{Keyspace: "prosody"}, false},
		{"quoted keyspace", Options{Nodes: []string{"h"}, Keyspace: `a"b`}, false},
		{"injection", Options{Nodes: []string{"h"}, Keyspace: "x; DROP"}, false},
		{"rack without dc", Options{Nodes: []string{"h"}, Keyspace: "k", Rack: "r1"}, false},
		{"rack with dc", Options{Nodes: []string{"h"}, Keyspace: "k", Datacenter: "dc1", Rack: "r1"}, true},
	}
	for _, tt := range tests {
		err := tt.o.validate()
		if (err == nil) != tt.ok {
			t.Errorf("%s: validate = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !fault.IsTerminal(err) {
			t.Errorf("%s: configuration error is %v, want terminal", tt.name, fault.ClassOf(err))
		}
	}
}

func TestLZ4RoundTrip(t *testing.T) {
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	for _, in := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("prosody "), 1000), random} {
		enc, err := lz4Compressor{}.Encode(in)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		dec, err := lz4Compressor{}.Decode(enc)
		if err != nil || !bytes.Equal(dec, in) {
			t.Fatalf("round trip of %d bytes: got %d bytes, %v", len(in), len(dec), err)
		}
	}
	if _, err := (lz4Compressor{}).Decode([]byte{0, 0}); err == nil {
		t.Fatal("decoded a body without length prefix")
	}
}

// Large values travel compressed both ways through a real node.
func TestCompressedFramesReachCassandra(t *testing.T) {
	o, ctx, s := connectFresh(t)
	if err := s.Query(ctx, `CREATE TABLE `+o.Keyspace+`.blobs (k int PRIMARY KEY, v text)`).Exec(); err != nil {
		t.Fatalf("create: %v", err)
	}
	big := strings.Repeat("timers and slabs ", 20000)
	if err := s.Query(ctx, `INSERT INTO `+o.Keyspace+`.blobs (k, v) VALUES (1, ?)`, big).Exec(); err != nil {
		t.Fatalf("insert: %v", err)
	}
	var got string
	if err := s.Query(ctx, `SELECT v FROM `+o.Keyspace+`.blobs WHERE k = 1`).Scan(&got); err != nil || got != big {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
}

func TestTimestampsIncrease(t *testing.T) {
	var c clock
	prev := c.next()
	for range 10000 {
		n := c.next()
		if n <= prev {
			t.Fatalf("timestamp %d after %d", n, prev)
		}
		prev = n
	}
}

func TestClassify(t *testing.T) {
	plain := errors.New("connection reset")
	tests := []struct {
		name string
		err  error
		want fault.Class
	}{
		{"unknown errors stay transient", plain, fault.ClassTransient},
		{"timeouts are transient", &gocql.RequestErrWriteTimeout{}, fault.ClassTransient},
		{"unmarshal is terminal", gocql.UnmarshalError("can not unmarshal"), fault.ClassTerminal},
		{"marshal is terminal", gocql.MarshalError("can not marshal"), fault.ClassTerminal},
		{"already classified stays", fault.Permanent(plain), fault.ClassPermanent},
	}
	for _, tt := range tests {
		if got := fault.ClassOf(Classify(tt.err)); got != tt.want {
			t.Errorf("%s: class %v, want %v", tt.name, got, tt.want)
		}
	}
	if Classify(nil) != nil {
		t.Fatal("Classify(nil) != nil")
	}
}

// A statement that does not fit the schema is terminal.
func TestSchemaMismatchIsTerminal(t *testing.T) {
	o, ctx, s := connectFresh(t)
	err := Classify(s.Query(ctx, `SELECT no_such_column FROM `+o.Keyspace+`.timer_segments`).Exec())
	if !fault.IsTerminal(err) {
		t.Fatalf("invalid query: %v classified %v, want terminal", err, fault.ClassOf(err))
	}
}

// The DC- and rack-aware policies route to the local node when they are
// given its datacenter and rack.
func TestConnectWithDatacenterAndRack(t *testing.T) {
	o := freshKeyspace(t)
	ctx := testContext(t)
	s, err := Connect(ctx, o)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	var dc, rack string
	err = s.Query(ctx, `SELECT data_center, rack FROM system.local`).Scan(&dc, &rack)
	s.Close()
	if err != nil {
		t.Fatalf("read local dc: %v", err)
	}
	for _, tt := range []struct{ dc, rack string }{{dc, ""}, {dc, rack}} {
		o := o
		o.Datacenter, o.Rack = tt.dc, tt.rack
		s, err := Connect(ctx, o)
		if err != nil {
			t.Fatalf("Connect(dc=%q, rack=%q): %v", tt.dc, tt.rack, err)
		}
		var n int
		err = s.Query(ctx, `SELECT COUNT(*) FROM `+o.Keyspace+`.schema_migrations`).Scan(&n)
		s.Close()
		if err != nil || n == 0 {
			t.Fatalf("query through dc=%q rack=%q: %d rows, %v", tt.dc, tt.rack, n, err)
		}
	}
}
