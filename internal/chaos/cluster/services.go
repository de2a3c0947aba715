// Package cluster runs the processes a fault scenario acts on: the
// harness's own Kafka and Cassandra (started by scripts/services on ports
// and a run directory of their own, so killing them touches nothing
// shared) and the consumer group's members.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Ports are the harness's own service ports.
type Ports struct {
	Kafka, KafkaController, KafkaSASL, KafkaSSL int
	KafkaProxied, KafkaProxy                    int // the listener members reach through the proxy, and the proxy's port it advertises
	Cassandra, CassandraStorage, CassandraProxy int
}

// DefaultPorts keep clear of the shared services' ports.
var DefaultPorts = Ports{
	Kafka: 19194, KafkaController: 19195, KafkaSASL: 19196, KafkaSSL: 19197,
	KafkaProxied: 19198, KafkaProxy: 19199,
	Cassandra: 19142, CassandraStorage: 19100, CassandraProxy: 19143,
}

// Services is the harness's Kafka and Cassandra.
type Services struct {
	script string
	run    string
	ports  Ports
	log    *os.File
}

// StartServices starts Kafka and Cassandra from the repository's
// scripts/services with run as their run directory; what the script
// prints goes to run/services.log.
func StartServices(ctx context.Context, repo, run string, p Ports) (*Services, error) {
	if err := os.MkdirAll(run, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	log, err := os.OpenFile(filepath.Join(run, "services.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	s := &Services{script: filepath.Join(repo, "scripts", "services"), run: run, ports: p, log: log}
	// One after the other: the first start on a machine builds the
	// readiness checker, which two starts at once would race on.
	for _, name := range []string{"kafka", "cassandra"} {
		if err := s.script1(ctx, "start", name); err != nil {
			return nil, errors.Join(err, s.Stop())
		}
	}
	return s, nil
}

// KafkaAddr is the broker's own plaintext listener (the producer's, the
// checker's); MemberKafkaAddr and MemberCassandraAddr are the proxies'.
func (s *Services) KafkaAddr() string           { return addr(s.ports.Kafka) }
func (s *Services) CassandraAddr() string       { return addr(s.ports.Cassandra) }
func (s *Services) KafkaProxiedAddr() string    { return addr(s.ports.KafkaProxied) }
func (s *Services) MemberKafkaAddr() string     { return addr(s.ports.KafkaProxy) }
func (s *Services) MemberCassandraAddr() string { return addr(s.ports.CassandraProxy) }

// Offset is p with every port moved by n, for a second harness beside a
// first.
func (p Ports) Offset(n int) Ports {
	return Ports{Kafka: p.Kafka + n, KafkaController: p.KafkaController + n, KafkaSASL: p.KafkaSASL + n, KafkaSSL: p.KafkaSSL + n,
		KafkaProxied: p.KafkaProxied + n, KafkaProxy: p.KafkaProxy + n,
		Cassandra: p.Cassandra + n, CassandraStorage: p.CassandraStorage + n, CassandraProxy: p.CassandraProxy + n}
}

func addr(port int) string { return "localhost:" + strconv.Itoa(port) }

func (s *Services) env() []string {
	p := s.ports
	return append(os.Environ(),
		"PROSODY_SERVICES_RUN="+s.run,
		"KAFKA_PORT="+strconv.Itoa(p.Kafka),
		"KAFKA_CONTROLLER_PORT="+strconv.Itoa(p.KafkaController),
		"KAFKA_SASL_SSL_PORT="+strconv.Itoa(p.KafkaSASL),
		"KAFKA_SSL_PORT="+strconv.Itoa(p.KafkaSSL),
		"KAFKA_PROXIED_PORT="+strconv.Itoa(p.KafkaProxied),
		"KAFKA_PROXIED_ADVERTISED_PORT="+strconv.Itoa(p.KafkaProxy),
		"CASSANDRA_PORT="+strconv.Itoa(p.Cassandra),
		"CASSANDRA_STORAGE_PORT="+strconv.Itoa(p.CassandraStorage),
		// A single node is killed with SIGKILL: with the periodic
		// commitlog it would lose the writes of its last 10 s, which it had
		// acknowledged (a replicated cluster keeps them on the other
		// replicas), and the checker would blame the client for them.
		"CASSANDRA_COMMITLOG_SYNC=batch",
	)
}

func (s *Services) script1(ctx context.Context, action, name string) error {
	cmd := exec.CommandContext(ctx, s.script, action, name)
	cmd.Env = s.env()
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cluster: scripts/services %s %s (see %s): %w", action, name, s.log.Name(), err)
	}
	return nil
}

func (s *Services) pid(name string) (int, error) {
	b, err := os.ReadFile(filepath.Join(s.run, name, "pid"))
	if err != nil {
		return 0, fmt.Errorf("cluster: %s's pid: %w", name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("cluster: %s's pid: %w", name, err)
	}
	return pid, nil
}

// Kill sends SIGKILL to the service (kafka or cassandra) and returns once
// the process is gone.
func (s *Services) Kill(ctx context.Context, name string) error {
	pid, err := s.pid(name)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("cluster: kill %s (%d): %w", name, pid, err)
	}
	for syscall.Kill(pid, 0) == nil {
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster: %s (%d) outlived SIGKILL: %w", name, pid, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Resume starts a killed service again on its data and returns once it
// answers.
func (s *Services) Resume(ctx context.Context, name string) error {
	return s.script1(ctx, "resume", name)
}

// Stop stops both services and deletes their data.
func (s *Services) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := errors.Join(s.script1(ctx, "stop", "kafka"), s.script1(ctx, "stop", "cassandra"))
	return errors.Join(err, s.log.Close())
}
