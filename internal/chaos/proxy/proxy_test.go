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

	set(t, p, Faults{Latency: 100 * time.Millisecond})
	start := time.Now()
	roundTrip(t, c, "slow")
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("latency: a round trip took %v, want >= 200ms (both ways)", d)
	}

	set(t, p, Faults{Blackhole: true})
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); err == nil {
		t.Fatalf("blackhole: read %d bytes", n)
	}
	_ = c.SetReadDeadline(time.Time{})
	set(t, p, Faults{})
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

	// Refusal: open connections are reset, new ones are refused by the
	// closed port, and after it the same address forwards again.
	c, err = net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "open")
	set(t, p, Faults{Refuse: true})
	if _, err := io.ReadFull(c, buf); err == nil {
		t.Error("a connection open at the refusal still reads")
	}
	_ = c.Close()
	if c, err := net.Dial("tcp", p.Addr()); err == nil {
		_ = c.Close()
		t.Fatal("a dial during the refusal was accepted")
	}
	set(t, p, Faults{})
	c, err = net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("dial after the refusal: %v", err)
	}
	if got := roundTrip(t, c, "back"); got != "back" {
		t.Fatalf("echo after the refusal: %q", got)
	}
	_ = c.Close()

	// Closing while refusing leaves nothing behind either.
	set(t, p, Faults{Refuse: true})
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func set(t *testing.T, p *Proxy, f Faults) {
	t.Helper()
	if err := p.Set(f); err != nil {
		t.Fatal(err)
	}
}
