package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The core's spans go to a tracer provider of its own, separate from
// whatever the host application registers: the core is a library inside
// a Python or Node process whose own SDK it cannot reach. Spans cross to
// the host as W3C trace context (the traceparent handed with each event),
// so a handler's own spans nest under the core's.

// InstrumentationName names the core's tracer.
const InstrumentationName = "prosody"

var (
	setupOnce sync.Once
	// provider is the SDK provider spans are recorded by, nil while the
	// tracer is a no-op (no OTLP endpoint, or Setup not called).
	provider atomic.Pointer[sdktrace.TracerProvider]
	tracer   atomic.Pointer[trace.Tracer]
)

var noopTracer trace.Tracer = noop.NewTracerProvider().Tracer(InstrumentationName)

// Tracer is the core's tracer: the SDK's once Setup found an OTLP
// endpoint (or a program set a provider), a no-op otherwise.
func Tracer() trace.Tracer {
	if t := tracer.Load(); t != nil {
		return *t
	}
	return noopTracer
}

// Recording reports whether the core's spans are recorded (a provider is
// set), so that the hot path can skip making spans nobody sees.
func Recording() bool { return provider.Load() != nil }

// SetProvider makes p the provider of the core's spans (nil: back to the
// no-op tracer). Setup calls it; programs and benchmarks may too.
func SetProvider(p *sdktrace.TracerProvider) {
	if p == nil {
		provider.Store(nil)
		tracer.Store(nil)
		return
	}
	t := p.Tracer(InstrumentationName)
	tracer.Store(&t)
	provider.Store(p)
}

// Setup configures the core's spans once per process from the standard
// OpenTelemetry variables: OTLP export when OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, over
// OTEL_EXPORTER_OTLP_PROTOCOL (or ..._TRACES_PROTOCOL): http/protobuf (the
// default), http/json or grpc; the exporters read the endpoint, headers,
// timeout, compression and TLS variables themselves. OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the service. Without an endpoint the
// tracer is a no-op. A failure to build the exporter is logged and leaves
// the no-op tracer: tracing never stops a client from starting.
func Setup(log *slog.Logger) {
	setupOnce.Do(func() {
		if provider.Load() != nil {
			return // a program set its own (SetProvider)
		}
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return
		}
		p, err := NewProvider(context.Background())
		if err != nil {
			log.Warn("tracing: the OTLP exporter could not be set up; spans are not exported", slog.Any("error", err))
			return
		}
		SetProvider(p)
		log.Info("tracing: spans are exported over OTLP", slog.String("protocol", protocol()))
	})
}

func protocol() string {
	if p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); p != "" {
		return p
	}
	if p := os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" {
		return p
	}
	return "http/protobuf"
}

// NewProvider builds the provider Setup installs, from the OTEL_*
// variables (see Setup), whether or not an endpoint is set.
func NewProvider(ctx context.Context) (*sdktrace.TracerProvider, error) {
	var exp sdktrace.SpanExporter
	var err error
	switch p := protocol(); p {
	case "http/protobuf":
		exp, err = newHTTPExporter(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	case "http/json":
		exp, err = otlptrace.New(ctx, newJSONClient())
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: %q is not one of http/protobuf, http/json, grpc", p)
	}
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(),
		resource.NewSchemaless(semconv.ServiceName(serviceName())))
	if err != nil {
		return nil, err
	}
	res, err = resource.Merge(res, envResource())
	if err != nil {
		return nil, err
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// newHTTPExporter is the OTLP/HTTP protobuf exporter. Unless TLS options
// make it build its own, it is given an HTTP client of ours, whose idle
// connections its shutdown then closes (the exporter's shared transport
// would keep them open after its provider is gone).
func newHTTPExporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	for _, v := range []string{"CERTIFICATE", "CLIENT_CERTIFICATE", "CLIENT_KEY"} {
		if os.Getenv("OTEL_EXPORTER_OTLP_"+v) != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_"+v) != "" {
			return otlptracehttp.New(ctx)
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		return nil, err
	}
	return closingExporter{exp, transport.CloseIdleConnections}, nil
}

type closingExporter struct {
	sdktrace.SpanExporter
	closeIdle func()
}

func (e closingExporter) Shutdown(ctx context.Context) error {
	err := e.SpanExporter.Shutdown(ctx)
	e.closeIdle()
	return err
}

// serviceName is OTEL_SERVICE_NAME, or "prosody" (the SDK's default,
// unknown_service, says nothing).
func serviceName() string {
	if s := strings.TrimSpace(os.Getenv("OTEL_SERVICE_NAME")); s != "" {
		return s
	}
	return "prosody"
}

func envResource() *resource.Resource {
	r, err := resource.New(context.Background(), resource.WithFromEnv())
	if err != nil {
		return resource.Empty()
	}
	return r
}

// Flush exports the spans recorded so far (the bindings' flushTelemetry).
func Flush(ctx context.Context) error {
	p := provider.Load()
	if p == nil {
		return nil
	}
	if err := p.ForceFlush(ctx); err != nil {
		return fmt.Errorf("tracing: flushing spans: %w", err)
	}
	return nil
}
