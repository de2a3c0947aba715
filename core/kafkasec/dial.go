package kafkasec

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"syscall"

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
	if err != nil {
		var header tls.RecordHeaderError
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &header) {
			return nil, &mismatchError{addr: addr, clientTLS: true, err: err}
		}
		return nil, err
	}
	return conn, nil
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
