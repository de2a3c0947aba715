package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Server is a running probe server.
type Server struct {
	http *http.Server
	ln   net.Listener
	done chan struct{} // closed when Serve has returned

	stopOnce sync.Once
	stopErr  error
}

// Start listens on 0.0.0.0:port (0 lets the OS pick; see Addr) and serves
// h (the routes of Handler) until Stop. A nil logger means slog.Default().
func Start(port int, h http.Handler, logger *slog.Logger) (*Server, error) {
	if port < 0 || port > 65535 {
		return nil, fmt.Errorf("probe server: port %d out of range 0-65535", port)
	}
	if logger == nil {
		logger = slog.Default()
	}
	addr := net.JoinHostPort("0.0.0.0", strconv.Itoa(port))
	ln, err := listen(addr)
	if err != nil {
		return nil, fmt.Errorf("probe server: listen on %s: %w", addr, err)
	}
	s := &Server{
		http: &http.Server{
			Handler: h,
			// Probes are tiny; bound slow or idle clients so they cannot
			// hold connections (and goroutines) open indefinitely.
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       10 * time.Second,
			WriteTimeout:      10 * time.Second,
			IdleTimeout:       60 * time.Second,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("probe server stopped unexpectedly", "addr", ln.Addr().String(), "error", err)
		}
	}()
	logger.Info("probe server started", "addr", ln.Addr().String())
	return s, nil
}

// Addr is the address the server listens on, e.g. "0.0.0.0:8000".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Stop shuts the server down gracefully: it stops accepting, closes idle
// connections and waits for in-flight requests until ctx ends, after which
// it closes the remaining connections. It returns once the serving goroutine
// has exited. Calling Stop again returns the first result.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		if err := s.http.Shutdown(ctx); err != nil {
			s.stopErr = fmt.Errorf("probe server: graceful shutdown: %w", err)
			if cerr := s.http.Close(); cerr != nil {
				s.stopErr = errors.Join(s.stopErr, fmt.Errorf("probe server: close: %w", cerr))
			}
		}
		<-s.done
	})
	return s.stopErr
}

// listen opens the TCP listener. Accepted connections get TCP_NODELAY (spec
// §3.11). Go's net package already enables it on every TCP connection,
// accepted ones included (net.newTCPConn); noDelayListener sets it
// explicitly so the requirement does not rest on that default.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp4", addr)
	if err != nil {
		return nil, err
	}
	return noDelayListener{ln.(*net.TCPListener)}, nil
}

type noDelayListener struct{ *net.TCPListener }

func (l noDelayListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	// A failure here leaves Nagle on, which only costs latency.
	_ = c.SetNoDelay(true)
	return c, nil
}
