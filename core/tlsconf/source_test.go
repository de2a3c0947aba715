package tlsconf

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/internal/testpki"
)

// serveWhoAmI starts a TLS server for localhost that requires a client
// certificate signed by ca and answers each connection with the common
// name of the certificate the client presented.
func serveWhoAmI(t *testing.T, ca *testpki.CA) string {
	t.Helper()
	now := time.Now()
	cert, key, err := ca.Issue(t.TempDir(), "server", now.Add(-time.Hour), now.Add(time.Hour), "localhost")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	clientCAs := x509.NewCertPool()
	clientCAs.AddCert(ca.Cert)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
	})
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
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					return
				}
				_, _ = tc.Write([]byte(tc.ConnectionState().PeerCertificates[0].Subject.CommonName + "\n"))
			}()
		}
	}()
	return ln.Addr().String()
}

// whoAmI connects with cfg and returns the name the server saw.
func whoAmI(addr string, cfg *tls.Config) (string, error) {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	line, err := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line), err
}

// copyFile puts src's content at dst, as a renewal writes it in place.
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestClientCertificateIsReadAgain renews the client certificate and key
// files in place under one configuration, built once: each new connection
// presents what the files hold then.
func TestClientCertificateIsReadAgain(t *testing.T) {
	dir := t.TempDir()
	ca, err := testpki.NewCA(dir, "ca")
	if err != nil {
		t.Fatal(err)
	}
	addr := serveWhoAmI(t, ca)
	now := time.Now()
	issue := func(name string, notAfter time.Time) (cert, key string) {
		t.Helper()
		cert, key, err := ca.Issue(t.TempDir(), name, now.Add(-time.Hour), notAfter)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key
	}
	certPath, keyPath := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	firstCert, firstKey := issue("first", now.Add(time.Hour))
	copyFile(t, firstCert, certPath)
	copyFile(t, firstKey, keyPath)

	clock := now
	files := Files{CA: ca.CertPath, Cert: certPath, Key: keyPath, ServerName: "localhost", Now: func() time.Time { return clock }}
	cfg, err := files.Config()
	if err != nil {
		t.Fatal(err)
	}
	expect := func(want string) {
		t.Helper()
		if got, err := whoAmI(addr, cfg); err != nil || got != want {
			t.Fatalf("the server saw %q (%v), want %q", got, err, want)
		}
	}
	expect("first")

	secondCert, secondKey := issue("second", now.Add(2*time.Hour))
	copyFile(t, secondCert, certPath)
	copyFile(t, secondKey, keyPath)
	expect("second")

	// Caught half-written: the new certificate is there, not its key yet.
	// The previous pair, still valid, is used meanwhile.
	thirdCert, thirdKey := issue("third", now.Add(3*time.Hour))
	copyFile(t, thirdCert, certPath)
	expect("second")
	copyFile(t, thirdKey, keyPath)
	expect("third")

	// Past its expiry and not renewed: the handshake fails at the client,
	// saying so, rather than with the server's bare alert.
	clock = now.Add(4 * time.Hour)
	_, err = whoAmI(addr, cfg)
	var expired *ExpiredError
	if !errors.As(err, &expired) || expired.Option != "ssl_certificate_location" {
		t.Fatalf("expired certificate: %v", err)
	}
	fourthCert, fourthKey := issue("fourth", now.Add(5*time.Hour))
	copyFile(t, fourthCert, certPath)
	copyFile(t, fourthKey, keyPath)
	expect("fourth")
}

// TestCABundleIsReadAgain adds the server's CA to the bundle after the
// Source was built: configurations handed out afterwards trust it.
func TestCABundleIsReadAgain(t *testing.T) {
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
	cert, key, err := ca.Issue(dir, "client", now.Add(-time.Hour), now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	addr := serveWhoAmI(t, ca)
	bundle := filepath.Join(dir, "bundle.pem")
	copyFile(t, other.CertPath, bundle)
	src, err := Files{CA: bundle, Cert: cert, Key: key, ServerName: "localhost"}.Source()
	if err != nil {
		t.Fatal(err)
	}
	var unknown x509.UnknownAuthorityError
	if _, err := whoAmI(addr, src.Config()); !errors.As(err, &unknown) {
		t.Fatalf("before the CA is added: %v", err)
	}

	both, err := os.ReadFile(other.CertPath)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(ca.CertPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, append(both, caPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := whoAmI(addr, src.Config()); err != nil || got != "client" {
		t.Fatalf("after the CA is added: %q, %v", got, err)
	}

	// A bundle that stops parsing leaves the last good one in use.
	if err := os.WriteFile(bundle, []byte("being rewritten"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := whoAmI(addr, src.Config()); err != nil {
		t.Fatalf("with a broken bundle: %v", err)
	}
}
