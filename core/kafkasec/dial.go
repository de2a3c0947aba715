package kafkasec

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/prosody-events/prosody-go/core/tlsconf"
)

// The dialer below lets Explain tell a listener that speaks the other
// protocol from a broker that is down or restarting. Without it both look
// the same to sarama, an EOF, which it retries for ever: a TLS client at a
// plaintext listener sees the broker hang up on its ClientHello (a Kafka
// broker reads the record header as a request size far over its limit), and
// a plaintext client at a TLS listener gets a TLS alert record back where
// the response size should be, then EOF.

// mismatchError is a connection to a listener that does not speak the
// protocol security_protocol chose. Explain turns it into an *AuthError.
type mismatchError struct {
	addr string
	// clientTLS is whether the client spoke TLS (and the listener did not).
	clientTLS bool
	err       error
}

func (e *mismatchError) Error() string {
	if e.clientTLS {
		return fmt.Sprintf("the broker at %s did not answer a TLS handshake: %v", e.addr, e.err)
	}
	return fmt.Sprintf("the broker at %s answered with TLS", e.addr)
}

// Unwrap gives sarama an error it closes the connection for.
func (e *mismatchError) Unwrap() error { return e.err }

// dialer is the sarama dialer (Net.Proxy) of every configuration Apply
// sets. cfg is read at each dial, so timeouts set after Apply still count.
type dialer struct {
	cfg *sarama.Config
	// tls, when not nil, gives the handshake configuration: the dialer
	// does the handshake itself, so that an EOF is known to come from it,
	// with the CA bundle and client certificate as the files hold them now.
	tls *tlsconf.Source
}

func (d *dialer) Dial(network, addr string) (net.Conn, error) {
	nd := &net.Dialer{Timeout: d.cfg.Net.DialTimeout, KeepAlive: d.cfg.Net.KeepAlive, LocalAddr: d.cfg.Net.LocalAddr}
	if d.tls == nil {
		conn, err := nd.Dial(network, addr)
		if err != nil {
			return nil, err
		}
		return &plaintextConn{Conn: conn, addr: addr}, nil
	}
	// tls.Dialer sets ServerName to the host dialled when it is empty, as
	// sarama does, and bounds connection and handshake by the timeout.
	conn, err := (&tls.Dialer{NetDialer: nd, Config: d.tls.Config()}).Dial(network, addr)
	if err == nil {
		return conn, nil
	}
	var header tls.RecordHeaderError
	switch {
	case errors.As(err, &header):
		// The listener answered with bytes that are not TLS.
		return nil, &mismatchError{addr: addr, clientTLS: true, err: err}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		// A plaintext listener hangs up on a ClientHello, but so does a
		// broker shutting down, over its connection limit, or behind a
		// balancer whose backend is not up: only a listener that answers a
		// plaintext Kafka request is a mismatch. Anything else stays the
		// transient failure it was.
		if speaksPlaintextKafka(nd, network, addr, d.cfg.Net.DialTimeout) {
			return nil, &mismatchError{addr: addr, clientTLS: true, err: err}
		}
	}
	return nil, err
}

// speaksPlaintextKafka reports whether addr answers an ApiVersions request
// (version 0) sent in plaintext with a Kafka response to it, within
// timeout (at most 5 s). It runs only after a TLS handshake failed.
func speaksPlaintextKafka(nd *net.Dialer, network, addr string, timeout time.Duration) bool {
	if timeout <= 0 || timeout > 5*time.Second {
		timeout = 5 * time.Second
	}
	probe := *nd
	probe.Timeout = timeout
	conn, err := probe.Dial(network, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	// size, api key 18 (ApiVersions), version 0, correlation id, client
	// id (an int16-prefixed string).
	const correlation = 0x70726f73
	clientID := "prosody-probe"
	req := binary.BigEndian.AppendUint32(nil, uint32(2+2+4+2+len(clientID)))
	req = binary.BigEndian.AppendUint16(req, 18)
	req = binary.BigEndian.AppendUint16(req, 0)
	req = binary.BigEndian.AppendUint32(req, correlation)
	req = binary.BigEndian.AppendUint16(req, uint16(len(clientID)))
	req = append(req, clientID...)
	if _, err := conn.Write(req); err != nil {
		return false
	}
	var head [8]byte
	if _, err := io.ReadFull(conn, head[:]); err != nil {
		return false
	}
	size := binary.BigEndian.Uint32(head[0:4])
	return size >= 6 && size < 1<<20 && binary.BigEndian.Uint32(head[4:8]) == correlation
}

// plaintextConn looks at the first byte a plaintext connection receives.
// A Kafka response starts with its size, big-endian: a first byte of 0x15
// or 0x16 would be a size over 350 MB, while it is the content type of a
// TLS alert or handshake record, so the listener speaks TLS.
//
// The wrapper hides the *net.TCPConn from sarama's check of idle sockets
// on metadata updates (SO_ERROR); a dead connection is then found at its
// next use instead, which sarama retries.
type plaintextConn struct {
	net.Conn
	addr  string
	state atomic.Int32 // unchecked, then checkedFine or checkedTLS for good
}

const (
	unchecked int32 = iota
	checkedFine
	checkedTLS
)

func (c *plaintextConn) Read(p []byte) (int, error) {
	switch c.state.Load() {
	case checkedFine:
		return c.Conn.Read(p)
	case checkedTLS:
		return 0, c.mismatch()
	}
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	if p[0] == 0x15 || p[0] == 0x16 {
		c.state.Store(checkedTLS)
		return 0, c.mismatch()
	}
	c.state.Store(checkedFine)
	return n, err
}

// mismatch wraps io.ErrUnexpectedEOF, on which sarama closes the
// connection.
func (c *plaintextConn) mismatch() error {
	return &mismatchError{addr: c.addr, err: io.ErrUnexpectedEOF}
}
