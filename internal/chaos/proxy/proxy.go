// Package proxy is a TCP proxy on loopback that injects network faults
// between the harness's members and Kafka or Cassandra: added latency, a
// bandwidth limit, connection resets, a blackhole (nothing forwarded
// either way until it heals, as a partition that TCP outlives) and refusal
// (the port closed, as a service that is down).
package proxy

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
)

// Faults is what the proxy does to the bytes it forwards now.
type Faults struct {
	Latency   time.Duration // added before each chunk is forwarded
	Bandwidth int           // bytes per second and direction, 0 for no limit
	Blackhole bool          // forward nothing until cleared
	Refuse    bool          // connections reset and new ones refused until cleared
}

// Proxy forwards connections from its listener to one upstream address.
type Proxy struct {
	addr     string
	upstream string

	mu     sync.Mutex
	ln     net.Listener // nil while refusing
	faults Faults
	healed chan struct{} // closed when a blackhole ends
	conns  map[net.Conn]struct{}
	closed bool

	wg sync.WaitGroup
}

// Listen starts a proxy on addr in front of upstream. With port 0 it
// picks a free port below the system's ephemeral range (Linux's starts at
// 32768, macOS's at 49152): while a refusal has the port closed, the
// kernel could otherwise hand that port to an outgoing connection, and
// the proxy could not listen on it again.
func Listen(addr, upstream string) (*Proxy, error) {
	ln, err := listen(addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{addr: ln.Addr().String(), upstream: upstream, conns: map[net.Conn]struct{}{}, healed: make(chan struct{})}
	close(p.healed)
	p.serveListener(ln)
	return p, nil
}

// Ports a proxy asked for port 0 picks from: below every common ephemeral
// range.
const (
	firstPort = 20000
	ports     = 12000
)

func listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return net.Listen("tcp", addr)
	}
	start := rand.IntN(ports)
	for i := range 200 {
		p := firstPort + (start+i*7919)%ports
		if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
			return ln, nil
		}
	}
	return nil, fmt.Errorf("no free port between %d and %d on %s", firstPort, firstPort+ports-1, host)
}

// Addr is the listening address; it stays the same across a refusal.
func (p *Proxy) Addr() string { return p.addr }

// Set replaces the faults. Ending a refusal listens on the same address
// again, and fails if something else took the port meanwhile.
func (p *Proxy) Set(f Faults) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.faults
	p.faults = f
	switch {
	case f.Blackhole && !was.Blackhole:
		p.healed = make(chan struct{})
	case !f.Blackhole && was.Blackhole:
		close(p.healed)
	}
	switch {
	case f.Refuse && !was.Refuse && p.ln != nil:
		_ = p.ln.Close()
		p.ln = nil
		p.resetLocked()
	case !f.Refuse && was.Refuse && !p.closed:
		ln, err := net.Listen("tcp", p.addr)
		if err != nil {
			p.faults.Refuse = true // still refusing: a later Set tries again
			return fmt.Errorf("proxy: listen again on %s: %w", p.addr, err)
		}
		p.serveListener(ln)
	}
	return nil
}

// serveListener makes ln the listener and accepts on it; with p.mu held
// or before the proxy is shared.
func (p *Proxy) serveListener(ln net.Listener) {
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
}

// Reset closes every open connection with a TCP reset.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resetLocked()
}

func (p *Proxy) resetLocked() int {
	n := len(p.conns)
	for c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	return n
}

// Close stops accepting, closes every connection and waits for the
// forwarding goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	if p.faults.Blackhole {
		p.faults.Blackhole = false
		close(p.healed)
	}
	var err error
	if p.ln != nil {
		err = p.ln.Close()
		p.ln = nil
	}
	p.resetLocked()
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		down, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(down)
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.faults.Refuse {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *Proxy) serve(down net.Conn) {
	defer p.wg.Done()
	if !p.track(down) {
		_ = down.Close()
		return
	}
	defer p.untrack(down)
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return // the client sees its connection close, as with a refused upstream
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { p.pump(up, down); done <- struct{}{} }()
	go func() { p.pump(down, up); done <- struct{}{} }()
	<-done
	// One direction ended: close both so the other pump ends too.
	_ = down.Close()
	_ = up.Close()
	<-done
}

// pump forwards src to dst chunk by chunk, applying the faults in force
// when each chunk was read.
func (p *Proxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.hold() {
				return
			}
			if werr := p.writeAll(dst, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
	}
}

// hold waits out a blackhole and the latency; false when the proxy closed.
func (p *Proxy) hold() bool {
	p.mu.Lock()
	f, healed := p.faults, p.healed
	p.mu.Unlock()
	if f.Blackhole {
		<-healed
		p.mu.Lock()
		closed := p.closed
		f = p.faults
		p.mu.Unlock()
		if closed {
			return false
		}
	}
	if f.Latency > 0 {
		time.Sleep(f.Latency)
	}
	return true
}

func (p *Proxy) bandwidth() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.faults.Bandwidth
}

// writeAll writes b, in tenths of a second's worth at a time under a
// bandwidth limit.
func (p *Proxy) writeAll(dst net.Conn, b []byte) error {
	for len(b) > 0 {
		chunk := b
		if bw := p.bandwidth(); bw > 0 {
			if max := bw / 10; len(chunk) > max && max > 0 {
				chunk = chunk[:max]
			}
		}
		n, err := dst.Write(chunk)
		if err != nil {
			return fmt.Errorf("proxy: %w", err)
		}
		if bw := p.bandwidth(); bw > 0 {
			time.Sleep(time.Duration(n) * time.Second / time.Duration(bw))
		}
		b = b[n:]
	}
	return nil
}
