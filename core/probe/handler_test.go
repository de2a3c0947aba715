package probe

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// fakeStatus is a Status whose answers a test can change while a server runs.
type fakeStatus struct {
	partitions atomic.Int64
	stalled    atomic.Bool
}

func (f *fakeStatus) AssignedPartitions() int { return int(f.partitions.Load()) }
func (f *fakeStatus) Stalled() bool           { return f.stalled.Load() }

func newStatus(partitions int, stalled bool) *fakeStatus {
	f := &fakeStatus{}
	f.partitions.Store(int64(partitions))
	f.stalled.Store(stalled)
	return f
}

func TestHandler(t *testing.T) {
	const stalledBody = "Consumer-level actor or one or more partitions have stalled. See logs for more details."
	tests := []struct {
		name       string
		method     string
		path       string
		partitions int
		stalled    bool
		code       int
		body       string // checked when code is 200 or 503
		location   string // checked for redirects
	}{
		{name: "not ready", path: "/readyz", code: 503, body: "no partitions assigned"},
		{name: "ready one", path: "/readyz", partitions: 1, code: 200, body: "1 partitions assigned"},
		{name: "ready many", path: "/readyz", partitions: 12, code: 200, body: "12 partitions assigned"},
		{name: "negative count is not ready", path: "/readyz", partitions: -1, code: 503, body: "no partitions assigned"},
		{name: "readiness ignores stall", path: "/readyz", partitions: 2, stalled: true, code: 200, body: "2 partitions assigned"},
		{name: "live", path: "/livez", code: 200, body: "No stalled components."},
		{name: "stalled", path: "/livez", stalled: true, code: 503, body: stalledBody},
		{name: "liveness ignores readiness", path: "/livez", partitions: 0, code: 200, body: "No stalled components."},
		{name: "HEAD is GET without body", method: http.MethodHead, path: "/livez", code: 200},
		{name: "readyz slash redirects", path: "/readyz/", code: 308, location: "/readyz"},
		{name: "livez slash redirects", path: "/livez/", code: 308, location: "/livez"},
		{name: "redirect keeps query", path: "/livez/?verbose", code: 308, location: "/livez?verbose"},
		{name: "root", path: "/", code: 404},
		{name: "unknown", path: "/healthz", code: 404},
		{name: "below readyz", path: "/readyz/x", code: 404},
		{name: "prefix of route", path: "/ready", code: 404},
		{name: "route is case-sensitive", path: "/LIVEZ", code: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			rec := httptest.NewRecorder()
			Handler(newStatus(tt.partitions, tt.stalled), nil).ServeHTTP(rec, httptest.NewRequest(method, tt.path, nil))
			if rec.Code != tt.code {
				t.Fatalf("%s %s: status %d, want %d (body %q)", method, tt.path, rec.Code, tt.code, rec.Body)
			}
			if tt.code == 200 || tt.code == 503 {
				if method != http.MethodHead && rec.Body.String() != tt.body {
					t.Errorf("%s %s: body %q, want %q", method, tt.path, rec.Body, tt.body)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("Content-Type %q, want text/plain; charset=utf-8", ct)
				}
			}
			if tt.location != "" {
				if got := rec.Header().Get("Location"); got != tt.location {
					t.Errorf("Location %q, want %q", got, tt.location)
				}
			}
		})
	}
}

func TestHandlerMethods(t *testing.T) {
	tests := []struct {
		method, path string
		code         int
	}{
		{http.MethodPost, "/readyz", 405},
		{http.MethodPut, "/livez", 405},
		{http.MethodPost, "/livez/", 405},
		{http.MethodHead, "/readyz/", 308},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		Handler(newStatus(1, false), nil).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
		if rec.Code != tt.code {
			t.Errorf("%s %s: status %d, want %d", tt.method, tt.path, rec.Code, tt.code)
		}
	}
}
