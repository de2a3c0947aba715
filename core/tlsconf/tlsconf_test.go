package tlsconf

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/internal/testpki"
)

func TestConfigErrorsNameTheOption(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cert, key, err := ca.Issue(dir, "client", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	oldCert, oldKey, err := ca.Issue(dir, "old", now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := ca.Issue(dir, "other", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not pem"), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name  string
		files Files
		want  string // "" for success
	}{
		{"CA and key pair", Files{CA: ca.CertPath, Cert: cert, Key: key}, ""},
		{"missing CA", Files{CA: filepath.Join(dir, "none.pem")}, "ssl_ca_location: reading the CA bundle"},
		{"CA not PEM", Files{CA: junk}, "ssl_ca_location: " + `"` + junk + `" holds no PEM certificate`},
		{"expired certificate", Files{Cert: oldCert, Key: oldKey}, "ssl_certificate_location: the client certificate in"},
		{"key of another certificate", Files{Cert: cert, Key: otherKey}, "ssl_key_location: the key in"},
		{"certificate not PEM", Files{Cert: junk, Key: key}, "ssl_certificate_location: "},
		{"key without certificate", Files{Key: key}, "ssl_certificate_location and ssl_key_location must be set together"},
		{"encrypted PKCS#8 key", Files{Cert: cert, Key: "testdata/encrypted-pkcs8.key"}, "ssl_key_location: encrypted private keys are not supported"},
		{"encrypted legacy PEM key", Files{Cert: cert, Key: "testdata/encrypted-legacy.key"}, "ssl_key_location: encrypted private keys are not supported"},
		{"key not PEM", Files{Cert: cert, Key: junk}, "ssl_key_location: " + `"` + junk + `" holds no PEM private key`},
		{"Cassandra prefix", Files{Prefix: "cassandra_", CA: junk}, "cassandra_ssl_ca_location: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.files.Config()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.GetClientCertificate == nil || cfg.RootCAs == nil || cfg.InsecureSkipVerify {
					t.Errorf("config: client certificate %v, roots %v, insecure %v", cfg.GetClientCertificate != nil, cfg.RootCAs != nil, cfg.InsecureSkipVerify)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "PRIVATE KEY") {
				t.Errorf("error shows key material: %v", err)
			}
		})
	}
	var expired *ExpiredError
	_, err = Files{Cert: oldCert, Key: oldKey}.Config()
	if !errors.As(err, &expired) || !IsHandshakeFailure(err) {
		t.Errorf("expired certificate: %T %v", err, err)
	}
}

// TestHandshakeFailuresAreRecognised runs real handshakes against a local
// TLS server whose certificate the client does not trust, or for another
// name, and checks that IsHandshakeFailure sees both.
func TestHandshakeFailuresAreRecognised(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.NewCA(dir, "other")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	server := testpki.ServeTLS(t, ca, now.Add(-time.Hour), now.Add(time.Hour))
	expired := testpki.ServeTLS(t, ca, now.Add(-48*time.Hour), now.Add(-time.Hour))
	for _, tc := range []struct {
		name  string
		addr  string
		files Files
		ok    bool
	}{
		{"trusted", server, Files{CA: ca.CertPath, ServerName: "localhost"}, true},
		{"unknown CA", server, Files{CA: other.CertPath, ServerName: "localhost"}, false},
		{"wrong name", server, Files{CA: ca.CertPath, ServerName: "kafka.example"}, false},
		{"expired server certificate", expired, Files{CA: ca.CertPath, ServerName: "localhost"}, false},
		{"verification off", server, Files{CA: other.CertPath, InsecureSkipVerify: true}, true},
		// Only CA set: the zero value of every other field must verify.
		{"zero value verifies", server, Files{CA: other.CertPath}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := tc.files.Config()
			if err != nil {
				t.Fatal(err)
			}
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", tc.addr, cfg)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				conn.Close()
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("handshake succeeded")
			}
			if !IsHandshakeFailure(err) {
				t.Errorf("%v (%T) not recognised", err, err)
			}
		})
	}
}

func TestAlertFromText(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want tls.AlertError
		ok   bool
	}{
		{"remote error: tls: bad certificate", 42, true},
		// "unknown certificate" is a prefix of "unknown certificate authority".
		{"gocql: unable to create session: remote error: tls: unknown certificate authority", 48, true},
		{"remote error: tls: unknown certificate", 46, true},
		{"remote error: tls: certificate required", 116, true},
		{"remote error: tls: alert(200)", 200, true},
		{"tls: first record does not look like a TLS handshake", 0, false},
	} {
		got, ok := AlertFromText(tc.msg)
		if got != tc.want || ok != tc.ok {
			t.Errorf("AlertFromText(%q) = %d, %v; want %d, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

// TestExplainAlert checks that only the alerts about the client's
// certificate blame ssl_certificate_location.
func TestExplainAlert(t *testing.T) {
	withCert := Files{Cert: "client.pem", Key: "client.key"}
	cases := []struct {
		name   string
		files  Files
		alert  tls.AlertError
		option string
		reason string
	}{
		{"bad certificate", withCert, alertBadCertificate, "ssl_certificate_location", `refused the client certificate in "client.pem"`},
		{"unknown certificate (Java)", withCert, alertCertificateUnknown, "ssl_certificate_location", "refused the client certificate"},
		{"unknown CA", withCert, alertUnknownCA, "ssl_certificate_location", "refused the client certificate"},
		{"expired", withCert, alertCertificateExpired, "ssl_certificate_location", "refused the client certificate"},
		{"revoked", withCert, alertCertificateRevoked, "ssl_certificate_location", "refused the client certificate"},
		{"unsupported", withCert, alertUnsupportedCertificate, "ssl_certificate_location", "refused the client certificate"},
		{"certificate required, none set", Files{}, alertCertificateRequired, "ssl_certificate_location", "requires a client certificate, and none is set"},
		{"bad certificate, none set", Files{}, alertBadCertificate, "ssl_certificate_location", "requires a client certificate, and none is set"},
		{"Cassandra prefix", Files{Prefix: "cassandra_"}, alertCertificateRequired, "cassandra_ssl_certificate_location", "requires a client certificate"},
		{"protocol version", withCert, alertProtocolVersion, "security_protocol", "share no TLS version or cipher suite"},
		{"handshake failure, no certificate", Files{}, alertHandshakeFailure, "security_protocol", "or the broker requires a client certificate and none is set (ssl_certificate_location)"},
		{"unrecognized name", withCert, alertUnrecognizedName, "ssl_server_name", "no certificate for the name"},
		{"internal error", withCert, 80, "security_protocol", `ended it with TLS alert "internal error"`},
		{"decrypt error", Files{}, 51, "security_protocol", `ended it with TLS alert "error decrypting message"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			option, reason := tc.files.ExplainAlert(tc.alert, "broker", "security_protocol")
			if option != tc.option || !strings.Contains(reason, tc.reason) {
				t.Errorf("got %s: %s; want %s: ...%s...", option, reason, tc.option, tc.reason)
			}
		})
	}
}
