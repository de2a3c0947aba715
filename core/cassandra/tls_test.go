package cassandra

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/testpki"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// TestTLSConnect connects over TLS to the test node (its CQL port takes
// TLS and plaintext clients alike): trusted, with a client certificate,
// and refused for a CA that did not sign the node's certificate, with an
// error naming the option and classified terminal.
func TestTLSConnect(t *testing.T) {
	s := testservices.RequireSecureCassandra(t)
	other, err := testpki.NewCA(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		files   tlsconf.Files
		wantErr string
	}{
		{"trusted CA", tlsconf.Files{CA: s.CA, Verify: true}, ""},
		{"client certificate", tlsconf.Files{CA: s.CA, Cert: s.ClientCertificate, Key: s.ClientKey, Verify: true}, ""},
		{"unknown CA", tlsconf.Files{CA: other.CertPath, Verify: true}, "cassandra_ssl_ca_location: the node's certificate is not signed by a trusted CA"},
		{"verification off", tlsconf.Files{CA: other.CertPath, Verify: false}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			files.Prefix = "cassandra_"
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			sess, err := Connect(ctx, Options{Nodes: []string{s.CQL}, Keyspace: "prosody_tls_tests", TLS: &files, Logger: slog.New(slog.DiscardHandler)})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer sess.Close()
				if err := sess.Gocql().Query("SELECT release_version FROM system.local").WithContext(ctx).Exec(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				sess.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tc.wantErr) || !fault.IsTerminal(err) {
				t.Errorf("error (terminal %v): %v", fault.IsTerminal(err), err)
			}
			t.Logf("failed in %v: %v", time.Since(start).Round(time.Millisecond), err)
		})
	}
}
