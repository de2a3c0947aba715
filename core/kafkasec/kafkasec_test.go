package kafkasec

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/testpki"
	"github.com/prosody-events/prosody-go/core/secret"
	"github.com/prosody-events/prosody-go/core/tlsconf"
)

func TestApply(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("opaque-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		s         Settings
		tls, sasl bool
		mechanism sarama.SASLMechanism
		wantErr   string
	}{
		{name: "zero value is plaintext", s: Settings{}},
		{name: "plaintext", s: Settings{Protocol: config.ProtocolPlaintext}},
		{name: "ssl", s: Settings{Protocol: config.ProtocolSSL, TLS: tlsFiles(true)}, tls: true},
		{name: "sasl_plaintext PLAIN", s: Settings{Protocol: config.ProtocolSASLPlaintext, Mechanism: config.MechanismPlain, Username: "u", Password: secret.New("p")}, sasl: true, mechanism: sarama.SASLTypePlaintext},
		{name: "sasl_ssl SCRAM-SHA-256", s: Settings{Protocol: config.ProtocolSASLSSL, Mechanism: config.MechanismScramSHA256, Username: "u", Password: secret.New("p"), TLS: tlsFiles(true)}, tls: true, sasl: true, mechanism: sarama.SASLTypeSCRAMSHA256},
		{name: "sasl_ssl SCRAM-SHA-512", s: Settings{Protocol: config.ProtocolSASLSSL, Mechanism: config.MechanismScramSHA512, Username: "u", Password: secret.New("p"), TLS: tlsFiles(true)}, tls: true, sasl: true, mechanism: sarama.SASLTypeSCRAMSHA512},
		{name: "OAUTHBEARER", s: Settings{Protocol: config.ProtocolSASLSSL, Mechanism: config.MechanismOAuthBearer, TokenFile: token, TLS: tlsFiles(true)}, tls: true, sasl: true, mechanism: sarama.SASLTypeOAuth},
		{name: "OAUTHBEARER without its file", s: Settings{Protocol: config.ProtocolSASLSSL, Mechanism: config.MechanismOAuthBearer, TokenFile: filepath.Join(dir, "none")}, wantErr: "sasl_oauthbearer_token_file: "},
		{name: "missing CA file", s: Settings{Protocol: config.ProtocolSSL, TLS: tlsFiles(true, filepath.Join(dir, "ca.pem"))}, wantErr: "ssl_ca_location: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sarama.NewConfig()
			err := tc.s.Apply(cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// The dialer does the TLS handshake, not sarama.
			d, ok := cfg.Net.Proxy.Dialer.(*dialer)
			if !ok || !cfg.Net.Proxy.Enable || cfg.Net.TLS.Enable {
				t.Fatalf("dialer %T (enabled %v), sarama's TLS %v", cfg.Net.Proxy.Dialer, cfg.Net.Proxy.Enable, cfg.Net.TLS.Enable)
			}
			if (d.tls != nil) != tc.tls || cfg.Net.SASL.Enable != tc.sasl || cfg.Net.SASL.Mechanism != tc.mechanism && tc.sasl {
				t.Errorf("TLS %v SASL %v %q", d.tls != nil, cfg.Net.SASL.Enable, cfg.Net.SASL.Mechanism)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("sarama refuses the configuration: %v", err)
			}
			if s := fmt.Sprintf("%v %+v %#v", tc.s, tc.s, tc.s); tc.s.Password.IsSet() && strings.Contains(s, tc.s.Password.Reveal()+" ") {
				t.Errorf("settings print the password: %s", s)
			}
		})
	}
}

// TestFromConfigVerifies checks that certificates are verified unless
// enable_ssl_certificate_verification is explicitly false.
func TestFromConfigVerifies(t *testing.T) {
	for _, verify := range []bool{true, false} {
		s := FromConfig(&config.Config{SecurityProtocol: config.ProtocolSSL, EnableSslCertificateVerification: verify})
		cfg, err := s.TLS.Config()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.InsecureSkipVerify == verify {
			t.Errorf("enable_ssl_certificate_verification %v gives InsecureSkipVerify %v", verify, cfg.InsecureSkipVerify)
		}
	}
}

func tlsFiles(verify bool, ca ...string) (f tlsconf.Files) {
	f.InsecureSkipVerify = !verify
	if len(ca) > 0 {
		f.CA = ca[0]
	}
	return f
}

func TestExplain(t *testing.T) {
	s := Settings{Mechanism: config.MechanismScramSHA512, Username: "alice", Password: secret.New("hunter2")}
	err := s.Explain(fmt.Errorf("connect: %w", sarama.Wrap(sarama.ErrOutOfBrokers, sarama.ErrSASLAuthenticationFailed)))
	var ae *AuthError
	if !errors.As(err, &ae) || ae.Option != "sasl_username / sasl_password" || !strings.Contains(err.Error(), `SCRAM-SHA-512 credentials of user "alice"`) {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("shows the password: %v", err)
	}
	oauth := Settings{Mechanism: config.MechanismOAuthBearer, TokenFile: "/run/token"}
	if err := oauth.Explain(sarama.ErrSASLAuthenticationFailed); !strings.HasPrefix(err.Error(), `sasl_oauthbearer_token_file: the broker refused the token in "/run/token"`) {
		t.Errorf("OAUTHBEARER: %v", err)
	}
	// An alert that is not about the client certificate does not blame it.
	internal := &net.OpError{Op: "remote error", Err: tls.AlertError(80)}
	if err := s.Explain(fmt.Errorf("connect: %w", internal)); !errors.As(err, &ae) || ae.Option != "security_protocol" || !strings.Contains(ae.Reason, `TLS alert "internal error"`) {
		t.Errorf("internal_error alert: %v", err)
	}
	if plain := errors.New("connection refused"); s.Explain(plain) != plain || IsAuthError(plain) {
		t.Error("an ordinary network error is left alone")
	}
}

// jwt builds an unsigned token with an exp claim; only the claim is read.
func jwt(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"exp":%d}`, exp.Unix()))) + ".sig"
}

func TestTokenFileIsReadAtEveryAuthentication(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	now := time.Unix(1_800_000_000, 0)
	write := func(token string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	tf := newTokenFile(path)
	tf.now = func() time.Time { return now }

	first := jwt(now.Add(time.Minute))
	write(first, now)
	if tok, err := tf.Token(); err != nil || tok.Token != first {
		t.Fatalf("first read: %v", err)
	}

	// Renewed with a token of the same length, and the modification time
	// kept: the new token is used all the same.
	renewed := jwt(now.Add(time.Minute + time.Second))
	if len(renewed) != len(first) {
		t.Fatalf("test tokens differ in length: %d, %d", len(renewed), len(first))
	}
	write(renewed, now)
	if tok, err := tf.Token(); err != nil || tok.Token != renewed {
		t.Fatalf("renewed in place: got %v, %v", tok, err)
	}

	// Expired and not refreshed: a clear error naming the option.
	now = now.Add(2 * time.Minute)
	_, err := tf.Token()
	if err == nil || !strings.Contains(err.Error(), "sasl_oauthbearer_token_file: the token in") || strings.Contains(err.Error(), renewed) {
		t.Fatalf("expired token: %v", err)
	}

	// Refreshed by a sidecar: the new token is used.
	second := jwt(now.Add(time.Hour))
	write(second, now)
	if tok, err := tf.Token(); err != nil || tok.Token != second {
		t.Fatalf("after refresh: %v", err)
	}

	// An opaque token has no expiry.
	write("opaque-1", now.Add(time.Second))
	if tok, err := tf.Token(); err != nil || tok.Token != "opaque-1" {
		t.Fatalf("opaque: %v %v", tok, err)
	}
	write("  \n", now.Add(2*time.Second))
	if _, err := tf.Token(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty file: %v", err)
	}
}

// TestExplainHandshakes explains real handshake failures: the broker's
// certificate from an unknown CA, expired, or for another name; the
// client's certificate missing or refused; no TLS version in common.
func TestExplainHandshakes(t *testing.T) {
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
	clientCert, clientKey, err := ca.Issue(dir, "client", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	strangerCert, strangerKey, err := other.Issue(dir, "stranger", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	valid := testpki.ServeTLS(t, ca, now.Add(-time.Hour), now.Add(time.Hour))
	expired := testpki.ServeTLS(t, ca, now.Add(-48*time.Hour), now.Add(-time.Hour))
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca.Cert)
	mutual := testpki.ServeTLSWith(t, ca, now.Add(-time.Hour), now.Add(time.Hour), func(c *tls.Config) {
		c.ClientAuth = tls.RequireAndVerifyClientCert
		c.ClientCAs = clientCAs
	})
	oldTLS := testpki.ServeTLSWith(t, ca, now.Add(-time.Hour), now.Add(time.Hour), func(c *tls.Config) {
		c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	})
	for _, tc := range []struct {
		name, addr, ca, serverName string
		cert, key                  string
		option, reason             string
	}{
		{name: "unknown CA", addr: valid, ca: other.CertPath, serverName: "localhost",
			option: "ssl_ca_location", reason: "not signed by a trusted CA"},
		{name: "expired broker certificate", addr: expired, ca: ca.CertPath, serverName: "localhost",
			option: "ssl_ca_location", reason: "not valid (expired, or not yet valid)"},
		{name: "another name", addr: valid, ca: ca.CertPath, serverName: "kafka.example",
			option: "ssl_server_name", reason: "for another name"},
		{name: "no client certificate", addr: mutual, ca: ca.CertPath, serverName: "localhost",
			option: "ssl_certificate_location", reason: "requires a client certificate, and none is set"},
		{name: "client certificate from another CA", addr: mutual, ca: ca.CertPath, serverName: "localhost", cert: strangerCert, key: strangerKey,
			option: "ssl_certificate_location", reason: "refused the client certificate"},
		// The client certificate is fine; the alert is about versions.
		{name: "no TLS version in common", addr: oldTLS, ca: ca.CertPath, serverName: "localhost", cert: clientCert, key: clientKey,
			option: "security_protocol", reason: "share no TLS version or cipher suite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Settings{Protocol: config.ProtocolSSL, TLS: tlsconf.Files{CA: tc.ca, ServerName: tc.serverName, Cert: tc.cert, Key: tc.key}}
			cfg, err := s.TLS.Config()
			if err != nil {
				t.Fatal(err)
			}
			err = handshake(tc.addr, cfg)
			if err == nil {
				t.Fatal("handshake succeeded")
			}
			var ae *AuthError
			if !errors.As(s.Explain(err), &ae) || ae.Option != tc.option || !strings.Contains(ae.Reason, tc.reason) {
				t.Errorf("Explain(%v) = %v", err, s.Explain(err))
			}
		})
	}
	t.Run("trusted client certificate", func(t *testing.T) {
		cfg, err := tlsconf.Files{CA: ca.CertPath, ServerName: "localhost", Cert: clientCert, Key: clientKey}.Config()
		if err != nil {
			t.Fatal(err)
		}
		if err := handshake(mutual, cfg); err != nil {
			t.Fatal(err)
		}
	})
}

// handshake connects and reads until the server hangs up: with TLS 1.3 a
// server that refuses the client's certificate says so after the client's
// side of the handshake is done, in the first record the client reads.
func handshake(addr string, cfg *tls.Config) error {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Read(make([]byte, 1)); err != io.EOF {
		return err
	}
	return nil
}

// fakeListener accepts connections and hands each to serve, for a broker
// that speaks some other protocol. It stops when the test ends.
func fakeListener(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestProtocolMismatch connects through sarama, as every client of the
// library does, to listeners that speak the other protocol, and checks
// that the failure is explained as such rather than left as an EOF, which
// is retried for ever.
func TestProtocolMismatch(t *testing.T) {
	plaintext := fakeListener(t, fakePlaintextKafka)
	// A TLS listener answers a Kafka request with an alert record and
	// hangs up (what Kafka's SSL listener sends, captured).
	tlsListener := fakeListener(t, func(c net.Conn) {
		_, _ = c.Read(make([]byte, 64))
		_, _ = c.Write([]byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50})
	})
	for _, tc := range []struct {
		name   string
		s      Settings
		addr   string
		reason string
	}{
		{"TLS client, plaintext listener", Settings{Protocol: config.ProtocolSSL}, plaintext,
			`the broker at ` + plaintext + ` did not answer a TLS handshake; is security_protocol right? "ssl" speaks TLS`},
		{"SASL_SSL client, plaintext listener", Settings{Protocol: config.ProtocolSASLSSL, Mechanism: config.MechanismPlain, Username: "u", Password: secret.New("p")}, plaintext,
			`did not answer a TLS handshake; is security_protocol right? "sasl_ssl" speaks TLS`},
		{"plaintext client, TLS listener", Settings{}, tlsListener,
			`the broker at ` + tlsListener + ` answered with TLS; is security_protocol right? "plaintext" does not speak TLS`},
		{"SASL_PLAINTEXT client, TLS listener", Settings{Protocol: config.ProtocolSASLPlaintext, Mechanism: config.MechanismScramSHA512, Username: "u", Password: secret.New("p")}, tlsListener,
			`answered with TLS; is security_protocol right? "sasl_plaintext" does not speak TLS`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := sarama.NewConfig()
			cfg.Metadata.Retry.Max = 0
			if err := tc.s.Apply(cfg); err != nil {
				t.Fatal(err)
			}
			client, err := sarama.NewClient([]string{tc.addr}, cfg)
			if err == nil {
				client.Close()
				t.Fatal("connected")
			}
			var ae *AuthError
			if !errors.As(tc.s.Explain(err), &ae) || ae.Option != "security_protocol" || !strings.Contains(ae.Reason, tc.reason) {
				t.Errorf("Explain(%v) = %v", err, tc.s.Explain(err))
			}
		})
	}
}

// fakePlaintextKafka serves one connection as a plaintext Kafka listener
// does: it reads a ClientHello's record header as a request size over its
// limit and hangs up, and answers an ApiVersions request with a response
// to its correlation id.
func fakePlaintextKafka(c net.Conn) {
	var head [4]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return
	}
	size := binary.BigEndian.Uint32(head[:])
	if size > 1<<20 {
		return
	}
	req := make([]byte, size)
	if _, err := io.ReadFull(c, req); err != nil || len(req) < 8 {
		return
	}
	resp := binary.BigEndian.AppendUint32(nil, 4+2+4)
	resp = append(resp, req[4:8]...) // correlation id
	resp = append(resp, 0, 0)        // no error
	resp = append(resp, 0, 0, 0, 0)  // no api versions
	_, _ = c.Write(resp)
}

// TestHungUpHandshakeIsNotAMismatch: a listener that hangs up on a TLS
// handshake without speaking plaintext Kafka (a broker going down, over its
// connection limit, a balancer without a backend, a TLS server dying) is a
// transient failure, not a wrong security_protocol, which a producer would
// stop sending for (found in review: four dropped connections made sends
// fail for 30 s).
func TestHungUpHandshakeIsNotAMismatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
	}{
		{"accepts and closes", func(net.Conn) {}},
		{"reads the ClientHello and closes", func(c net.Conn) { _, _ = c.Read(make([]byte, 512)) }},
		{"resets", func(c net.Conn) {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		}},
		{"starts a TLS record and closes", func(c net.Conn) {
			_, _ = c.Read(make([]byte, 512))
			_, _ = c.Write([]byte{0x16, 0x03, 0x03, 0x00, 0x40, 0x02, 0x00})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakeListener(t, tc.serve)
			s := Settings{Protocol: config.ProtocolSSL}
			cfg := sarama.NewConfig()
			cfg.Metadata.Retry.Max = 0
			if err := s.Apply(cfg); err != nil {
				t.Fatal(err)
			}
			client, err := sarama.NewClient([]string{addr}, cfg)
			if err == nil {
				client.Close()
				t.Fatal("connected")
			}
			if IsAuthError(s.Explain(err)) {
				t.Errorf("Explain(%v) = %v, want the transient error as it was", err, s.Explain(err))
			}
		})
	}
}

// TestPlaintextConnPassesKafkaResponses checks that the plaintext watch
// lets an ordinary response through, byte for byte, after its first read.
func TestPlaintextConnPassesKafkaResponses(t *testing.T) {
	response := []byte{0x00, 0x00, 0x00, 0x08, 0x00, 0x00, 0x00, 0x01, 0x15, 0x16, 0x00, 0x00}
	addr := fakeListener(t, func(c net.Conn) {
		_, _ = c.Write(response)
	})
	cfg := sarama.NewConfig()
	d := &dialer{cfg: cfg}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := io.ReadAll(conn)
	if err != nil || string(got) != string(response) {
		t.Fatalf("read % x, %v; want % x", got, err, response)
	}
}
