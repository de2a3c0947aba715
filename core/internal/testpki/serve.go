package testpki

import (
	"crypto/tls"
	"testing"
	"time"
)

// ServeTLS starts a local TLS server whose certificate for localhost, from
// ca, is valid from notBefore to notAfter; it handshakes with each client
// and hangs up. It stops when the test ends.
func ServeTLS(t testing.TB, ca *CA, notBefore, notAfter time.Time) string {
	t.Helper()
	return ServeTLSWith(t, ca, notBefore, notAfter, nil)
}

// ServeTLSWith is ServeTLS with the server's configuration changed by
// tweak (when not nil) before it listens: to require a client certificate
// or to offer only old TLS versions, say.
func ServeTLSWith(t testing.TB, ca *CA, notBefore, notAfter time.Time, tweak func(*tls.Config)) string {
	t.Helper()
	cert, key, err := ca.Issue(t.TempDir(), "server", notBefore, notAfter, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}}
	if tweak != nil {
		tweak(cfg)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	return ln.Addr().String()
}
