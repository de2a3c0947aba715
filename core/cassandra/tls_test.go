package cassandra

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/prosody-events/prosody-go/core/fault"
	"github.com/prosody-events/prosody-go/core/internal/testpki"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/secret"
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
		{"trusted CA", tlsconf.Files{CA: s.CA}, ""},
		{"client certificate", tlsconf.Files{CA: s.CA, Cert: s.ClientCertificate, Key: s.ClientKey}, ""},
		{"unknown CA", tlsconf.Files{CA: other.CertPath}, "cassandra_ssl_ca_location: the node's certificate is not signed by a trusted CA"},
		// The node's certificate is for localhost and 127.0.0.1.
		{"server name", tlsconf.Files{CA: s.CA, ServerName: "localhost"}, ""},
		{"another server name", tlsconf.Files{CA: s.CA, ServerName: "cassandra.example"}, "cassandra_ssl_server_name: the node's certificate is for another name"},
		{"verification off", tlsconf.Files{CA: other.CertPath, InsecureSkipVerify: true}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := tc.files
			files.Prefix = "cassandra_"
			awaitGocqlGoroutines(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			sess, err := Connect(ctx, Options{Nodes: []string{s.CQL}, Keyspace: "prosody_tls_tests", TLS: &files, Logger: slog.New(slog.DiscardHandler)})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(sess.Close)
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

// awaitGocqlGoroutines makes the test, once its cleanups (a session's
// Close among them) have run, wait until every goroutine started after
// this call has ended. A TLS handshake and a login take long enough (the
// node hashes the password) that gocql may still be opening the pool's
// other connections when the session is closed; it retries those on its
// own timer for a few seconds before their goroutines end, and the
// package's leak check would report them. goleak tells goroutines apart
// by identity, so goroutines of other tests starting or ending do not
// move this wait, as they would a goroutine count.
func awaitGocqlGoroutines(t *testing.T) {
	t.Helper()
	opts := append(testservices.LeakOptions(), goleak.IgnoreCurrent())
	t.Cleanup(func() {
		testservices.WaitFor(t, 15*time.Second, "the session's gocql goroutines to end", func() bool {
			return goleak.Find(opts...) == nil
		})
	})
}

// TestPasswordAuthenticatorOverTLS logs in to the cassandra-auth node
// (TLS required, PasswordAuthenticator): the right password works, a wrong
// one fails at once naming the options and not showing it.
func TestPasswordAuthenticatorOverTLS(t *testing.T) {
	s := testservices.RequireAuthCassandra(t)
	const wrong = "cassandra-Wrong-Pa55word"
	files := tlsconf.Files{Prefix: "cassandra_", CA: s.CA}
	cases := []struct {
		name           string
		user, password string
		tls            *tlsconf.Files
		wantErr        string
	}{
		{"TLS and the right password", s.User, s.Password, &files, ""},
		{"wrong password", s.User, wrong, &files, "cassandra_user / cassandra_password: the node refused the credentials"},
		{"no password", "", "", &files, "cassandra_user / cassandra_password: the node requires a login"},
		{"no TLS", s.User, s.Password, nil, "connect to"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			awaitGocqlGoroutines(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			sess, err := Connect(ctx, Options{Nodes: []string{s.CQL}, Keyspace: "prosody_auth_tests",
				User: tc.user, Password: secret.New(tc.password), TLS: tc.tls, Logger: slog.New(slog.DiscardHandler)})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				sess.Close()
				return
			}
			if err == nil {
				sess.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), wrong) {
				t.Errorf("error: %v", err)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %v", took)
			}
			if tc.tls != nil && !fault.IsTerminal(err) {
				t.Errorf("a refused login is not terminal: %v", err)
			}
			t.Logf("failed in %v (terminal %v): %v", time.Since(start).Round(time.Millisecond), fault.IsTerminal(err), err)
		})
	}
}

// TestExplainRefusal checks the options named for what gocql leaves of a
// refused handshake (text only): an alert blames the client certificate
// only when it is about the certificate.
func TestExplainRefusal(t *testing.T) {
	const prefix = "gocql: unable to create session: unable to discover protocol version: "
	noCert := &tlsconf.Files{Prefix: "cassandra_"}
	withCert := &tlsconf.Files{Prefix: "cassandra_", Cert: "client.pem", Key: "client.key"}
	for _, tc := range []struct {
		name  string
		msg   string
		files *tlsconf.Files
		want  string // "" for not a refusal
	}{
		{"certificate required", "remote error: tls: certificate required", noCert, "cassandra_ssl_certificate_location: the TLS handshake failed: the node requires a client certificate, and none is set"},
		{"certificate refused", "remote error: tls: unknown certificate", withCert, `cassandra_ssl_certificate_location: the TLS handshake failed: the node refused the client certificate in "client.pem"`},
		{"no version in common", "remote error: tls: protocol version not supported", withCert, "cassandra_ssl_enabled: the TLS handshake failed: the node and the client share no TLS version"},
		{"another alert", "remote error: tls: internal error", withCert, `cassandra_ssl_enabled: the TLS handshake failed: the node ended it with TLS alert "internal error"`},
		{"unknown CA", "tls: failed to verify certificate: x509: certificate signed by unknown authority", noCert, "cassandra_ssl_ca_location: the node's certificate is not signed by a trusted CA"},
		{"wrong password", "Provided username cassandra and/or password are incorrect", nil, "cassandra_user / cassandra_password: the node refused the credentials"},
		{"an alert without TLS is not explained as one", "remote error: tls: internal error", nil, ""},
		{"connection refused", "dial tcp 127.0.0.1:9043: connect: connection refused", withCert, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := explainRefusal(errors.New(prefix+tc.msg), tc.files)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("explained as %v", err)
			case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
				t.Errorf("got %v\nwant %s...", err, tc.want)
			}
		})
	}
}
