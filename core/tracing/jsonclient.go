package tracing

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

// jsonClient sends spans as OTLP/JSON over HTTP (protocol http/json),
// which the official Go exporter does not offer. OTLP/JSON is the
// protobuf JSON mapping except that trace and span ids are hex, not
// base64.
type jsonClient struct {
	endpoint string
	headers  map[string]string
	http     *http.Client
}

func newJSONClient() *jsonClient {
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		endpoint = strings.TrimRight(os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), "/") + "/v1/traces"
	}
	headers := parseHeaders(os.Getenv("OTEL_EXPORTER_OTLP_HEADERS"))
	for k, v := range parseHeaders(os.Getenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS")) {
		headers[k] = v
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	return &jsonClient{endpoint: endpoint, headers: headers, http: &http.Client{Timeout: 10 * time.Second, Transport: transport}}
}

// parseHeaders reads the OTEL_EXPORTER_OTLP_HEADERS form: comma-separated
// key=value pairs, values URL-encoded.
func parseHeaders(s string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || strings.TrimSpace(k) == "" {
			continue
		}
		if dv, err := url.QueryUnescape(strings.TrimSpace(v)); err == nil {
			v = dv
		}
		out[strings.TrimSpace(k)] = v
	}
	return out
}

func (c *jsonClient) Start(context.Context) error { return nil }
func (c *jsonClient) Stop(context.Context) error {
	c.http.CloseIdleConnections()
	return nil
}

func (c *jsonClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := marshalJSON(&coltracepb.ExportTraceServiceRequest{ResourceSpans: spans})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("otlp/json: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("otlp/json: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("otlp/json: %s answered %s", c.endpoint, resp.Status)
	}
	return nil
}

// marshalJSON is protojson with the ids in hex.
func marshalJSON(m *coltracepb.ExportTraceServiceRequest) ([]byte, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("otlp/json: %w", err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("otlp/json: %w", err)
	}
	hexIDs(doc)
	return json.Marshal(doc)
}

func hexIDs(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch k {
			case "traceId", "spanId", "parentSpanId":
				if s, ok := e.(string); ok {
					if b, err := base64.StdEncoding.DecodeString(s); err == nil {
						x[k] = hex.EncodeToString(b)
					}
				}
			default:
				hexIDs(e)
			}
		}
	case []any:
		for _, e := range x {
			hexIDs(e)
		}
	}
}
