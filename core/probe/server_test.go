package probe

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// quiet keeps server logs out of test output.
var quiet = slog.New(slog.DiscardHandler)

func startTest(t *testing.T, status Status) *Server {
	t.Helper()
	s, err := Start(0, Handler(status, nil), quiet)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return s
}

// client does not follow redirects and closes its idle connections when the
// test ends, so they neither hide a redirect nor count as leaked goroutines.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       5 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func get(t *testing.T, c *http.Client, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(b), resp.Header
}

func TestServerRoutes(t *testing.T) {
	status := newStatus(0, false)
	s := startTest(t, status)
	if !strings.HasPrefix(s.Addr(), "0.0.0.0:") || strings.HasSuffix(s.Addr(), ":0") {
		t.Fatalf("Addr() = %q, want 0.0.0.0 with a chosen port", s.Addr())
	}
	base := "http://" + s.Addr()
	c := client(t)

	steps := []struct {
		name       string
		partitions int
		stalled    bool
		path       string
		code       int
		body       string
		location   string
	}{
		{name: "starts unready", path: "/readyz", code: 503, body: "no partitions assigned"},
		{name: "ready after assignment", partitions: 1, path: "/readyz", code: 200, body: "1 partitions assigned"},
		{name: "live", partitions: 1, path: "/livez", code: 200, body: "No stalled components."},
		{name: "stall", partitions: 1, stalled: true, path: "/livez", code: 503,
			body: "Consumer-level actor or one or more partitions have stalled. See logs for more details."},
		{name: "recovered", partitions: 3, path: "/livez", code: 200, body: "No stalled components."},
		{name: "readyz redirect", path: "/readyz/", code: 308, location: "/readyz"},
		{name: "livez redirect", path: "/livez/", code: 308, location: "/livez"},
		{name: "not found", path: "/metrics", code: 404, body: "404 page not found\n"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			status.partitions.Store(int64(st.partitions))
			status.stalled.Store(st.stalled)
			code, body, h := get(t, c, base+st.path)
			if code != st.code {
				t.Fatalf("GET %s: status %d, want %d", st.path, code, st.code)
			}
			if st.location == "" && body != st.body {
				t.Errorf("GET %s: body %q, want %q", st.path, body, st.body)
			}
			if st.location != "" && h.Get("Location") != st.location {
				t.Errorf("GET %s: Location %q, want %q", st.path, h.Get("Location"), st.location)
			}
		})
	}

	// A client that follows the redirect lands on the real route.
	resp, err := (&http.Client{Transport: c.Transport, Timeout: 5 * time.Second}).Get(base + "/livez/")
	if err != nil {
		t.Fatalf("GET /livez/ following redirects: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "No stalled components." || resp.Request.URL.Path != "/livez" {
		t.Errorf("followed redirect: %d %q at %s", resp.StatusCode, b, resp.Request.URL.Path)
	}
}

func TestServerStop(t *testing.T) {
	s, err := Start(0, Handler(newStatus(1, false), nil), quiet)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	addr := s.Addr()
	c := client(t)
	// Leave a keep-alive connection open: Stop must close it rather than wait.
	if code, _, _ := get(t, c, "http://"+addr+"/readyz"); code != 200 {
		t.Fatalf("GET /readyz: status %d", code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("server still accepts connections after Stop")
	}
}

// TestServerStopForcesSlowRequest checks that a request still in flight when
// the stop deadline passes is cut off, so Stop cannot hang on a client.
func TestServerStopForcesSlowRequest(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{})
	s, err := Start(0, Handler(blockingStatus{entered: entered, release: release}, nil), quiet)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	c := client(t)
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		resp, err := c.Get("http://" + s.Addr() + "/livez")
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = s.Stop(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want DeadlineExceeded", err)
	}
	close(release) // let the handler goroutine finish
	<-reqDone
}

type blockingStatus struct{ entered, release chan struct{} }

func (blockingStatus) AssignedPartitions() int { return 0 }
func (b blockingStatus) Stalled() bool {
	close(b.entered)
	<-b.release
	return false
}

func TestStartErrors(t *testing.T) {
	for _, port := range []int{-1, 65536} {
		if s, err := Start(port, Handler(newStatus(0, false), nil), quiet); err == nil {
			_ = s.Stop(context.Background())
			t.Errorf("Start(%d) succeeded, want error", port)
		}
	}

	s := startTest(t, newStatus(0, false))
	_, portStr, _ := net.SplitHostPort(s.Addr())
	var port int
	for _, c := range portStr {
		port = port*10 + int(c-'0')
	}
	if s2, err := Start(port, Handler(newStatus(0, false), nil), quiet); err == nil {
		_ = s2.Stop(context.Background())
		t.Fatal("Start on a port in use succeeded")
	} else if !strings.Contains(err.Error(), "probe server: listen") {
		t.Errorf("error %q does not say what failed", err)
	}
}
