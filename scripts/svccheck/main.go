// Command svccheck tells whether a test service answers real requests.
//
// The service scripts use it for readiness: an open TCP port is not enough,
// because both Kafka and Cassandra accept connections well before they can
// serve them. Kafka counts as ready when a metadata request lists a broker
// and a controller; Cassandra when a CQL query returns a row; Jaeger when
// its query API lists services as JSON, its OTLP/HTTP receiver accepts an
// (empty) export and its OTLP/gRPC port takes connections.
//
//	svccheck [-wait 90s] [-pid N] kafka localhost:9094
//	svccheck [-wait 90s] [-pid N] cassandra localhost:9042
//	svccheck -ca ca.pem -user U -password P cassandra localhost:9043
//	svccheck -otlp-http localhost:4318 -otlp-grpc localhost:4317 jaeger localhost:16686
//
// -ca connects to Cassandra over TLS, trusting that CA; -user and -password
// log in (PasswordAuthenticator). For jaeger the address is the query
// API's; -otlp-http and -otlp-grpc name the receivers.
// With -wait it retries until the deadline; with -pid it gives up as soon as
// that process has exited (a crashed server will never become ready).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/gocql/gocql"
)

func main() {
	wait := flag.Duration("wait", 0, "keep retrying for this long (0 = one attempt)")
	pid := flag.Int("pid", 0, "stop waiting when this process has exited")
	flag.StringVar(&cassandraCA, "ca", "", "Cassandra: connect over TLS, trusting this CA (PEM)")
	flag.StringVar(&cassandraUser, "user", "", "Cassandra: log in as this user")
	flag.StringVar(&cassandraPassword, "password", "", "Cassandra: with this password")
	flag.StringVar(&jaegerOTLPHTTP, "otlp-http", "localhost:4318", "Jaeger: the OTLP/HTTP receiver")
	flag.StringVar(&jaegerOTLPGRPC, "otlp-grpc", "localhost:4317", "Jaeger: the OTLP/gRPC receiver")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: svccheck [-wait D] [-pid N] kafka|cassandra|jaeger host:port")
		os.Exit(2)
	}
	kind, addr := flag.Arg(0), flag.Arg(1)

	var probe func(context.Context, string) (string, error)
	switch kind {
	case "kafka":
		probe = probeKafka
	case "cassandra":
		probe = probeCassandra
	case "jaeger":
		probe = probeJaeger
	default:
		fmt.Fprintf(os.Stderr, "svccheck: unknown service %q (want kafka, cassandra or jaeger)\n", kind)
		os.Exit(2)
	}

	// Both client libraries log connection failures loudly while the server
	// is still starting; those are expected here.
	sarama.Logger = log.New(io.Discard, "", 0)
	gocql.Logger = log.New(io.Discard, "", 0)

	deadline := time.Now().Add(*wait)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		detail, err := probe(ctx, addr)
		cancel()
		if err == nil {
			fmt.Printf("%s on %s is ready: %s\n", kind, addr, detail)
			return
		}
		if *pid > 0 && !alive(*pid) {
			fmt.Fprintf(os.Stderr, "svccheck: %s process %d exited before it was ready (last error: %v)\n", kind, *pid, err)
			os.Exit(1)
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "svccheck: %s on %s is not ready: %v\n", kind, addr, err)
			os.Exit(1)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// alive reports whether a process exists; signal 0 checks without sending.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func probeKafka(ctx context.Context, addr string) (string, error) {
	cfg := sarama.NewConfig()
	cfg.Version = sarama.V3_6_0_0
	cfg.Net.DialTimeout = 2 * time.Second
	cfg.Net.ReadTimeout = 3 * time.Second
	cfg.Metadata.Retry.Max = 0
	client, err := sarama.NewClient([]string{addr}, cfg)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer client.Close()
	if err := client.RefreshMetadata(); err != nil {
		return "", fmt.Errorf("metadata: %w", err)
	}
	brokers := client.Brokers()
	if len(brokers) == 0 {
		return "", errors.New("metadata lists no broker")
	}
	controller, err := client.Controller()
	if err != nil {
		return "", fmt.Errorf("controller: %w", err)
	}
	return fmt.Sprintf("%d broker(s), controller %d", len(brokers), controller.ID()), ctx.Err()
}

// The Cassandra login and TLS flags.
var cassandraCA, cassandraUser, cassandraPassword string

func probeCassandra(ctx context.Context, addr string) (string, error) {
	cluster := gocql.NewCluster(addr)
	cluster.Timeout = 3 * time.Second
	cluster.ConnectTimeout = 2 * time.Second
	cluster.DisableInitialHostLookup = true
	cluster.NumConns = 1
	if cassandraCA != "" {
		cluster.SslOpts = &gocql.SslOptions{CaPath: cassandraCA, EnableHostVerification: true}
	}
	if cassandraUser != "" {
		cluster.Authenticator = gocql.PasswordAuthenticator{Username: cassandraUser, Password: cassandraPassword}
	}
	session, err := cluster.CreateSession()
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer session.Close()
	var version string
	err = session.Query(`SELECT release_version FROM system.local`).WithContext(ctx).Scan(&version)
	if err != nil {
		return "", fmt.Errorf("query: %w", err)
	}
	return "release_version " + version, nil
}

// The Jaeger receivers' addresses.
var jaegerOTLPHTTP, jaegerOTLPGRPC string

// probeJaeger asks the query API for its services (a JSON object with a
// "data" list), posts an empty OTLP/JSON export to the HTTP receiver (a
// receiver that is up answers 200) and connects to the gRPC receiver.
func probeJaeger(ctx context.Context, addr string) (string, error) {
	client := &http.Client{Timeout: 3 * time.Second}

	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/api/services", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("query API: %w", err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return "", fmt.Errorf("query API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("query API: GET /api/services: %s", resp.Status)
	}
	var services struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal(body, &services); err != nil {
		return "", fmt.Errorf("query API: GET /api/services is not the JSON Jaeger answers: %w", err)
	}

	req, err = http.NewRequestWithContext(ctx, http.MethodPost, "http://"+jaegerOTLPHTTP+"/v1/traces",
		strings.NewReader(`{"resourceSpans":[]}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err = client.Do(req)
	if err != nil {
		return "", fmt.Errorf("OTLP/HTTP: %w", err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("OTLP/HTTP: POST /v1/traces: %s", resp.Status)
	}

	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", jaegerOTLPGRPC)
	if err != nil {
		return "", fmt.Errorf("OTLP/gRPC: %w", err)
	}
	conn.Close()
	return fmt.Sprintf("query API lists %d service(s); OTLP/HTTP on %s accepts exports; OTLP/gRPC on %s takes connections",
		len(services.Data), jaegerOTLPHTTP, jaegerOTLPGRPC), nil
}
