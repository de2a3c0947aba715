package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/prosody-events/prosody-go/core/config"
	"github.com/prosody-events/prosody-go/core/internal/testservices"
	"github.com/prosody-events/prosody-go/core/tracing"
)

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(key string) string {
	for _, t := range s.Tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// jaegerSpans reads back every span Jaeger holds for service.
func jaegerSpans(t *testing.T, service string) map[string]jaegerSpan {
	t.Helper()
	resp, err := http.Get(testservices.JaegerQueryURL() + "/api/traces?limit=100&service=" + url.QueryEscape(service))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := map[string]jaegerSpan{}
	for _, tr := range body.Data {
		for _, s := range tr.Spans {
			out[s.OperationName] = s
		}
	}
	return out
}

// TestSpansInJaeger exports the spans of produce → consume → schedule →
// timer fire on real Kafka and Cassandra over OTLP to Jaeger, in both
// relations (over http/protobuf and grpc), and reads them back from
// Jaeger's query API: names, parents, follows-from references, attributes.
func TestSpansInJaeger(t *testing.T) {
	testservices.RequireKafka(t)
	testservices.RequireCassandra(t)
	testservices.RequireJaeger(t)
	t.Cleanup(http.DefaultClient.CloseIdleConnections) // the query API's
	for _, tc := range []struct {
		rel      config.SpanLinking
		protocol string
	}{{config.SpanChild, "http/protobuf"}, {config.SpanFollowsFrom, "grpc"}, {config.SpanChild, "http/json"}} {
		t.Run(string(tc.rel)+"/"+tc.protocol, func(t *testing.T) {
			service := testservices.UniqueName("prosody-go")
			endpoint := testservices.JaegerOTLPEndpoint()
			if tc.protocol == "grpc" {
				endpoint = testservices.JaegerOTLPGRPCEndpoint()
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", tc.protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
			t.Setenv("OTEL_SERVICE_NAME", service)
			tp, err := tracing.NewProvider(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tracing.SetProvider(tp)
			defer func() {
				tracing.SetProvider(nil)
				_ = tp.Shutdown(context.Background())
			}()
			spanChain(t, target{name: "kafka"}, tp, tc.rel, false)
			if err := tp.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			var spans map[string]jaegerSpan
			want := []string{"request", "send", "receive", "handle message", "trigger", "handle timer"}
			waitFor(t, 60*time.Second, "the chain's spans in Jaeger", func() bool {
				spans = jaegerSpans(t, service)
				for _, name := range want {
					if _, ok := spans[name]; !ok {
						return false
					}
				}
				return true
			})
			checkJaegerTree(t, tc.rel, spans)
		})
	}
}

// ref is the reference of s to other, of refType, if any.
func ref(s, other jaegerSpan, refType string) bool {
	for _, r := range s.References {
		if r.RefType == refType && r.SpanID == other.SpanID && r.TraceID == other.TraceID {
			return true
		}
	}
	return false
}

func checkJaegerTree(t *testing.T, rel config.SpanLinking, spans map[string]jaegerSpan) {
	t.Helper()
	parentOf := func(child, parent string) {
		t.Helper()
		if !ref(spans[child], spans[parent], "CHILD_OF") {
			t.Errorf("%s is not a child of %s: %+v", child, parent, spans[child].References)
		}
	}
	relatedTo := func(child, parent string) {
		t.Helper()
		c, p := spans[child], spans[parent]
		if rel == config.SpanChild {
			parentOf(child, parent)
			return
		}
		if c.TraceID == p.TraceID || !ref(c, p, "FOLLOWS_FROM") {
			t.Errorf("%s is not a new trace following from %s: %+v", child, parent, c.References)
		}
		if c.tag("otel.kind") != "" && c.tag("span.kind") != "consumer" {
			t.Errorf("%s kind %q", child, c.tag("span.kind"))
		}
	}
	parentOf("send", "request")
	relatedTo("receive", "send")
	parentOf("handle message", "receive")
	relatedTo("trigger", "receive")
	parentOf("handle timer", "trigger")
	r := spans["receive"]
	if r.tag("key") != "k1" || r.tag("offset") != "0" || r.tag("partition") != "0" || r.tag("topic") == "" {
		t.Errorf("receive tags %+v", r.Tags)
	}
	if s := spans["send"]; s.tag("payload_size") != "11" || s.tag("topic") == "" || s.tag("offset") != "0" {
		t.Errorf("send tags %+v", s.Tags)
	}
	if tr := spans["trigger"]; tr.tag("key") != "k1" || tr.tag("timer_type") != "application" || tr.tag("time") == "" {
		t.Errorf("trigger tags %+v", tr.Tags)
	}
}
