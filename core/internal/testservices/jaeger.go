package testservices

import (
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
)

// JaegerOTLPEndpoint returns the base URL of the test Jaeger's OTLP/HTTP
// receiver (PROSODY_TEST_JAEGER_OTLP; default http://localhost:4318).
// Traces are posted to its /v1/traces.
func JaegerOTLPEndpoint() string {
	return urlFromEnv("PROSODY_TEST_JAEGER_OTLP", "http://localhost:4318")
}

// JaegerOTLPGRPCEndpoint returns the URL of the test Jaeger's OTLP/gRPC
// receiver (PROSODY_TEST_JAEGER_OTLP_GRPC; default http://localhost:4317),
// in the form OTEL_EXPORTER_OTLP_ENDPOINT takes for the grpc protocol
// (http: plaintext).
func JaegerOTLPGRPCEndpoint() string {
	return urlFromEnv("PROSODY_TEST_JAEGER_OTLP_GRPC", "http://localhost:4317")
}

// JaegerQueryURL returns the base URL of the test Jaeger's query API
// (PROSODY_TEST_JAEGER_QUERY; default http://localhost:16686), where tests
// read spans back from /api/traces?service=NAME.
func JaegerQueryURL() string {
	return urlFromEnv("PROSODY_TEST_JAEGER_QUERY", "http://localhost:16686")
}

func urlFromEnv(env, def string) string {
	v := strings.TrimSpace(os.Getenv(env))
	if v == "" {
		v = def
	}
	return strings.TrimRight(v, "/")
}

// RequireJaeger fails the test at once when the Jaeger query API or one of
// its OTLP receivers does not listen, as RequireKafka does for the broker.
func RequireJaeger(t testing.TB) {
	t.Helper()
	requireListening(t, "Jaeger's query API", []string{hostPort(t, JaegerQueryURL())})
	requireListening(t, "Jaeger's OTLP/HTTP receiver", []string{hostPort(t, JaegerOTLPEndpoint())})
	requireListening(t, "Jaeger's OTLP/gRPC receiver", []string{hostPort(t, JaegerOTLPGRPCEndpoint())})
}

// hostPort is the host:port an http(s) URL connects to.
func hostPort(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Fatalf("%q is not a URL such as http://localhost:16686", raw)
	}
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}
