package probe

import (
	"net/http"
	"strconv"
)

// Status is what the probes ask of the consumer.
type Status interface {
	// AssignedPartitions is the number of partitions currently assigned.
	AssignedPartitions() int
	// Stalled reports whether any heartbeat or offset tracker has stalled.
	Stalled() bool
}

// Exact response bodies (spec §3.11). The readiness body for n ≥ 1 is
// "{n} partitions assigned", plural even for one partition.
const (
	BodyNotReady   = "no partitions assigned"
	BodyStalled    = "Consumer-level actor or one or more partitions have stalled. See logs for more details."
	BodyNotStalled = "No stalled components."
)

// Handler returns the probe routes:
//
//	GET /readyz   200 "{n} partitions assigned" | 503 "no partitions assigned"
//	GET /livez    200 "No stalled components."  | 503 BodyStalled
//	/readyz/, /livez/   308 redirect to the slash-less route
//	GET /metrics  metrics (the Prometheus text format), when metrics is not nil
//
// HEAD is answered like GET (without a body), other methods get 405, other
// paths 404. The redirect is permanent and keeps the method, as the
// original's trailing-slash redirect does.
func Handler(status Status, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if n := status.AssignedPartitions(); n > 0 {
			writeText(w, http.StatusOK, strconv.Itoa(n)+" partitions assigned")
			return
		}
		writeText(w, http.StatusServiceUnavailable, BodyNotReady)
	})
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		if status.Stalled() {
			writeText(w, http.StatusServiceUnavailable, BodyStalled)
			return
		}
		writeText(w, http.StatusOK, BodyNotStalled)
	})
	// "{$}" matches exactly the trailing-slash form, not the subtree. The
	// redirects are GET-only too, or ServeMux would answer other methods on
	// the slash-less route with a redirect to the slash form (a loop).
	mux.Handle("GET /readyz/{$}", trimSlash("/readyz"))
	mux.Handle("GET /livez/{$}", trimSlash("/livez"))
	return mux
}

func trimSlash(target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := target
		if r.URL.RawQuery != "" {
			u += "?" + r.URL.RawQuery
		}
		http.Redirect(w, r, u, http.StatusPermanentRedirect)
	})
}

func writeText(w http.ResponseWriter, code int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	_, _ = w.Write([]byte(body))
}
