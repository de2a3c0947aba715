package proxy

import (
	"io"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, msg string) string {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	return string(buf)
}

// The faults each do what they say, and Close leaves no goroutine of the
// proxy behind.
func TestFaults(t *testing.T) {
	// Registered first, so it runs after the echo server's cleanup.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	p, err := Listen("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got := roundTrip(t, c, "plain"); got != "plain" {
		t.Fatalf("echo: %q", got)
	}

	p.Set(Faults{Latency: 100 * time.Millisecond})
	start := time.Now()
	roundTrip(t, c, "slow")
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("latency: a round trip took %v, want >= 200ms (both ways)", d)
	}

	p.Set(Faults{Blackhole: true})
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); err == nil {
		t.Fatalf("blackhole: read %d bytes", n)
	}
	_ = c.SetReadDeadline(time.Time{})
	p.Set(Faults{})
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("healed: %q, %v", buf, err)
	}

	if n := p.Reset(); n != 2 {
		t.Errorf("reset closed %d connections, want 2 (both sides)", n)
	}
	if _, err := io.ReadFull(c, buf); err == nil {
		t.Error("read after a reset succeeded")
	}
	_ = c.Close()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
