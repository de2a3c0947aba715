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
	cert, key, err := ca.Issue(t.TempDir(), "server", notBefore, notAfter, "localhost")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
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
