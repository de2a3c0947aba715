// Command benchrun runs every benchmark of the repository, one after the
// other, each writing its figures as JSON (-json), and gathers them with
// the facts of the machine into one result file (docs/bench/results.json
// by default). scripts/bench prepares what the benchmarks need (the
// services, the built programs, the Python and Node environments) and
// then runs this; scripts/bench-report.py draws the plots and tables of
// docs/benchmarks.md from the result file.
//
//	go run ./scripts/benchrun -size full -out docs/bench/results.json
//	go run ./scripts/benchrun -size quick -only engine,bench-c
//
// Each benchmark's output goes to build/bench/<id>.log as well as to
// stdout. A benchmark that fails is recorded as failed, with the end of
// its log, and the others still run: the result file says which figures
// are missing rather than the run stopping an hour in.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// benchmark is one entry of the result file: a program run with its
// arguments for the quick and the full size.
type benchmark struct {
	ID      string
	Title   string
	Program []string // the command, before the sized arguments
	Quick   []string
	Full    []string
	Targets []target
	// JSONFlag is how the program is told where to write its report.
	JSONFlag string
}

// target is a figure the project aims for: a metric of a reader (its
// median, or with Ratio its median over the baseline's) at least Min or at
// most Max.
type target struct {
	Reader string   `json:"reader"`
	Metric string   `json:"metric"`
	Ratio  bool     `json:"ratio,omitempty"`
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
	Value  *float64 `json:"value,omitempty"`
	Met    *bool    `json:"met,omitempty"`
	What   string   `json:"what"`
}

func atLeast(reader, metric string, ratio bool, v float64, what string) target {
	return target{Reader: reader, Metric: metric, Ratio: ratio, Min: &v, What: what}
}

func atMost(reader, metric string, v float64, what string) target {
	return target{Reader: reader, Metric: metric, Max: &v, What: what}
}

func atMostRatio(reader, metric string, v float64, what string) target {
	return target{Reader: reader, Metric: metric, Ratio: true, Max: &v, What: what}
}

// benchmarks are every benchmark the repository has, in the order they
// run. The full sizes keep the whole run to about half an hour on the
// project's 2-core machine (within the hour a run may take), the quick ones
// to about five; building what they need adds a few minutes to either.
func benchmarks(bin string) []benchmark {
	py := "build/bench-venv/bin/python"
	return []benchmark{
		{
			ID: "engine", Title: "Go engine against a raw sarama consumer group",
			Program: []string{bin + "/prosody-bench", "-readers", "sarama,prosody,nodedup,bare,traced,observed"},
			Quick:   []string{"-messages", "200000", "-rounds", "1"},
			Full:    []string{"-messages", "1000000", "-rounds", "7"},
			Targets: []target{
				atLeast("nodedup", "rate", true, 0.8, "the engine at its default configuration, deduplication off: ≥ 0.8× raw sarama"),
				atLeast("prosody", "rate", true, 0.75, "the default configuration with deduplication (ids in memory): ≥ 0.75× raw sarama"),
				atLeast("traced", "rate", true, 0.75, "spans recorded (no-op exporter): ≥ 0.75× raw sarama"),
			},
		},
		{
			ID: "deferral", Title: "Healthy keys while 1 % of the keys fail (pipeline deferral)",
			Program: []string{bin + "/prosody-bench", "-readers", "prosody,failing"},
			Quick:   []string{"-messages", "200000", "-rounds", "1", "-fail-for", "10s"},
			Full:    []string{"-messages", "1000000", "-rounds", "2", "-fail-for", "30s"},
		},
		{
			ID: "dedup-cassandra", Title: "Deduplication with its ids in Cassandra",
			Program: []string{bin + "/prosody-bench", "-readers", "nodedup,prosody", "-cassandra", "localhost:9042"},
			Quick:   []string{"-messages", "20000", "-rounds", "1"},
			Full:    []string{"-messages", "200000", "-rounds", "3"},
		},
		{
			ID: "bench-c", Title: "The C ABI (polling and on_event) against the Go engine",
			// Deduplication off: with it the Cassandra table bounds every
			// reader alike, and the figure would not be the ABI's.
			Program: []string{bin + "/benchgo", "-cbench", "build/c/prosody_bench_c", "-config", `"idempotence_cache_size":0`},
			Quick:   []string{"-messages", "200000", "-rounds", "1"},
			Full:    []string{"-messages", "1000000", "-rounds", "7"},
			Targets: []target{
				atLeast("c-abi", "rate", true, 0.8, "the polling path the Python and Node packages use: ≥ 0.8× the Go engine"),
				atLeast("c-direct", "rate", true, 0.8, "a C handler called on the library's threads (on_event): ≥ 0.8× the Go engine"),
			},
		},
		{
			ID: "python", Title: "Python package against confluent-kafka, aiokafka and the original prosody-events 0.4.0",
			Program: []string{py, "bindings/python/bench/bench.py", "--only", "confluent", "--only", "aiokafka",
				"--only", "prosody-nodedup", "--only", "prosody", "--only", "original"},
			Quick:    []string{"--messages", "50000", "--rounds", "1", "--original-messages", "500"},
			Full:     []string{"--messages", "400000", "--rounds", "3", "--original-messages", "2000"},
			JSONFlag: "--json",
			Targets: []target{
				atLeast("prosody", "rate", true, 1.2, "no-op async handler at the default configuration: ≥ 1.2× confluent-kafka's consume loop"),
				atLeast("prosody-nodedup", "rate", true, 1.0, "no-op async handler, default configuration less deduplication: ≥ 1.0× confluent-kafka's consume loop"),
			},
		},
		{
			ID: "python-state", Title: "Python: a keyed-state count per message (Cassandra) against a no-op handler",
			Program:  []string{py, "bindings/python/bench/state_bench.py"},
			Quick:    []string{"--messages", "2000", "--rounds", "1"},
			Full:     []string{"--messages", "20000", "--rounds", "3"},
			JSONFlag: "--json",
		},
		{
			ID: "python-ordered", Title: "Python: 5 ms handlers, max_concurrency 32, against the bound",
			Program:  []string{py, "bindings/python/bench/ordered_bench.py"},
			Quick:    []string{"--messages", "5000", "--rounds", "1"},
			Full:     []string{"--messages", "50000", "--rounds", "3"},
			JSONFlag: "--json",
			Targets: []target{
				atLeast("prosody", "of_bound", false, 0.95, "≥ 0.95 of the nominal bound (max_concurrency / handler time)"),
			},
		},
		{
			ID: "python-rss", Title: "Python: peak memory under a 1,000,000-message backlog, against the original",
			Program:  []string{py, "bindings/python/bench/rss_bench.py"},
			Quick:    []string{"--messages", "100000", "--seconds", "10", "--rounds", "1"},
			Full:     []string{"--messages", "1000000", "--seconds", "30", "--rounds", "3"},
			JSONFlag: "--json",
			Targets: []target{
				atMostRatio("prosody", "peak_rss_mib", 1.0, "peak RSS under the backlog at the default configuration ≤ the original's (1.0×)"),
			},
		},
		{
			ID: "python-rss-lz4", Title: "Python: peak memory under a 1,000,000-message backlog of LZ4 batches, against the original",
			Program:  []string{py, "bindings/python/bench/rss_bench.py", "--compression", "lz4"},
			Quick:    []string{"--messages", "100000", "--seconds", "10", "--rounds", "1"},
			Full:     []string{"--messages", "1000000", "--seconds", "30", "--rounds", "3"},
			JSONFlag: "--json",
			Targets: []target{
				atMostRatio("prosody", "peak_rss_mib", 1.0, "peak RSS under the backlog at the default configuration ≤ the original's (1.0×)"),
			},
		},
		{
			ID: "node", Title: "Node package against kafkajs and @confluentinc/kafka-javascript",
			Program:  []string{"node", "bindings/node/bench/bench.js", "--only", "kafkajs,prosody-besteffort,prosody,confluent"},
			Quick:    []string{"--messages", "50000", "--rounds", "1"},
			Full:     []string{"--messages", "200000", "--rounds", "3"},
			JSONFlag: "--json",
			Targets: []target{
				atLeast("prosody", "rate", true, 3.0, "no-op async handler at the default configuration: ≥ 3× kafkajs"),
				atLeast("prosody-besteffort", "rate", true, 1.5, "no-op async handler, best-effort mode (no deduplication): ≥ 1.5× kafkajs"),
			},
		},
		{
			ID: "node-read", Title: "Node package against kafkajs, every handler reading the key and the parsed payload",
			Program:  []string{"node", "bindings/node/bench/bench.js", "--only", "kafkajs,prosody-besteffort,prosody", "--handler", "read"},
			Quick:    []string{"--messages", "50000", "--rounds", "1"},
			Full:     []string{"--messages", "200000", "--rounds", "3"},
			JSONFlag: "--json",
			Targets: []target{
				atLeast("prosody", "rate", true, 2.5, "handlers that parse the payload, default configuration: ≥ 2.5× kafkajs"),
			},
		},
		{
			ID: "node-ordered", Title: "Node: 5 ms handlers, max_concurrency 32, against the bound",
			Program:  []string{"node", "bindings/node/bench/bench.js", "--only", "sleeps-alone,prosody,prosody-besteffort", "--handler", "sleep5"},
			Quick:    []string{"--messages", "5000", "--rounds", "1"},
			Full:     []string{"--messages", "50000", "--rounds", "3"},
			JSONFlag: "--json",
			Targets: []target{
				atLeast("prosody", "of_bound", false, 0.95, "≥ 0.95 of the nominal bound (max_concurrency / handler time)"),
			},
		},
		{
			ID: "node-state", Title: "Node: a keyed-state count per message (Cassandra) against a no-op handler",
			Program:  []string{"node", "bindings/node/bench/bench.js", "--only", "prosody,prosody-state"},
			Quick:    []string{"--messages", "2000", "--rounds", "1"},
			Full:     []string{"--messages", "20000", "--rounds", "3"},
			JSONFlag: "--json",
		},
		{
			ID: "timers", Title: "Durable timers on Cassandra: the timer managers alone",
			Program: []string{bin + "/prosody-timer-bench", "-cassandra", "localhost:9042", "-keys", "1000"},
			Quick:   []string{"-timers", "2000", "-lead", "5s", "-spread", "5s"},
			Full:    []string{"-timers", "10000", "-lead", "30s", "-spread", "30s"},
			Targets: []target{
				atMost("managers", "late_p99_ms", 1000, "lateness p99 ≤ 1 s"),
			},
		},
		{
			ID: "timers-mixed", Title: "Timers while messages flow: Go, Python, Node and the original 0.4.0",
			Program: []string{bin + "/prosody-timer-bench", "mixed", "-readers", "go,python,node,python-original",
				"-python", py, "-keys", "1000", "-rate", "100"},
			Quick: []string{"-messages", "500", "-rounds", "1"},
			Full:  []string{"-messages", "3000", "-rounds", "3"},
			Targets: []target{
				atMost("go", "late_p99_ms", 200, "Go: lateness p99 ≤ 200 ms at 100 messages/s"),
				atMost("python", "late_p99_ms", 200, "Python: lateness p99 ≤ 200 ms at 100 messages/s"),
				atMost("node", "late_p99_ms", 200, "Node: lateness p99 ≤ 200 ms at 100 messages/s"),
				atMost("go", "schedule_p99_ms", 20, "Go: schedule p99 ≤ 20 ms"),
				atMost("python", "schedule_p99_ms", 30, "Python: schedule p99 ≤ 30 ms"),
			},
		},
		{
			ID: "sched-fairness", Title: "Scheduler fairness: fresh keys while half the keys retry",
			Program: []string{bin + "/prosody-sched-bench", "-workload", "fairness"},
			Quick:   []string{"-rounds", "1", "-duration", "5s"},
			Full:    []string{"-rounds", "3", "-duration", "20s"},
		},
		{
			ID: "sched-ordered", Title: "Scheduler: 5 ms handlers, max_concurrency 32, against the bound",
			Program: []string{bin + "/prosody-sched-bench", "-workload", "ordered", "-readers", "fair,fifo,fair-precise"},
			Quick:   []string{"-rounds", "1", "-messages", "5000"},
			Full:    []string{"-rounds", "3", "-messages", "50000"},
			Targets: []target{
				atLeast("fair", "of_bound", false, 0.9, "≥ 0.9 of the nominal bound (max_concurrency / handler time)"),
				atLeast("fair-precise", "of_bound", false, 0.95, "with client.WithPreciseTimers (tuned: a 200 µs waker): ≥ 0.95 of the nominal bound"),
			},
		},
		{
			ID: "tls", Title: "Throughput over SASL_SSL (SCRAM-SHA-512) and mutual TLS against plaintext",
			Program: []string{bin + "/prosody-tls-bench"},
			Quick:   []string{"-messages", "100000", "-produce", "50000", "-rounds", "1"},
			Full:    []string{"-messages", "1000000", "-produce", "300000", "-rounds", "5"},
		},
	}
}

// entry is a benchmark's part of the result file.
type entry struct {
	ID      string          `json:"id"`
	Title   string          `json:"title"`
	Command string          `json:"command"`
	Status  string          `json:"status"` // ok or failed
	Error   string          `json:"error,omitempty"`
	Started time.Time       `json:"started"`
	Seconds float64         `json:"seconds"`
	CPU     cpuShare        `json:"cpu"`
	Load    [2]float64      `json:"load_average"` // 1-minute, when it started and when it ended
	Report  json.RawMessage `json:"report,omitempty"`
	Targets []target        `json:"targets,omitempty"`
	LogTail string          `json:"log_tail,omitempty"`
}

// report is the part of a benchkit.Report the targets read.
type report struct {
	Baseline string `json:"baseline"`
	Readers  []struct {
		Name    string `json:"name"`
		Metrics map[string]struct {
			Median float64 `json:"median"`
		} `json:"metrics"`
		Ratios map[string]float64 `json:"ratios"`
	} `json:"readers"`
}

type results struct {
	Generated  time.Time         `json:"generated"`
	Size       string            `json:"size"`
	Commit     string            `json:"commit"`
	Dirty      bool              `json:"dirty"`
	Machine    machine           `json:"machine"`
	Services   map[string]string `json:"services"`
	Seconds    float64           `json:"seconds"`
	CPU        cpuShare          `json:"cpu"`
	Benchmarks []*entry          `json:"benchmarks"`
}

func main() {
	size := flag.String("size", "full", "quick or full")
	out := flag.String("out", "docs/bench/results.json", "the result file")
	only := flag.String("only", "", "run only these benchmarks (comma-separated ids)")
	skip := flag.String("skip", "", "leave out these benchmarks (comma-separated ids)")
	bin := flag.String("bin", "build/bench/bin", "where scripts/bench built the Go benchmark programs")
	list := flag.Bool("list", false, "list the benchmarks and exit")
	flag.Parse()
	if *size != "quick" && *size != "full" {
		fail(fmt.Errorf("-size must be quick or full, not %q", *size))
	}
	all := benchmarks(*bin)
	if *list {
		for _, b := range all {
			fmt.Printf("%-16s %s\n", b.ID, b.Title)
		}
		return
	}
	chosen := all[:0:0]
	for _, b := range all {
		if (*only == "" || slices.Contains(strings.Split(*only, ","), b.ID)) && !slices.Contains(strings.Split(*skip, ","), b.ID) {
			chosen = append(chosen, b)
		}
	}
	logDir := "build/bench"
	fail(os.MkdirAll(logDir, 0o755))

	res := results{Generated: time.Now().UTC().Truncate(time.Second), Size: *size, Machine: facts(), Services: services()}
	res.Commit, res.Dirty = commit()
	start := time.Now()
	cpu0 := readCPU()
	for _, b := range chosen {
		res.Benchmarks = append(res.Benchmarks, run(b, *size, logDir))
	}
	res.Seconds = time.Since(start).Round(time.Second).Seconds()
	res.CPU = readCPU().since(cpu0)

	// A partial run (-only, -skip) keeps the other benchmarks' figures of
	// the file it updates, so one can be rerun alone.
	if *only != "" || *skip != "" {
		res.Benchmarks = merge(*out, res.Benchmarks, all)
	}
	data, err := json.MarshalIndent(res, "", "  ")
	fail(err)
	fail(os.MkdirAll(filepath.Dir(*out), 0o755))
	fail(os.WriteFile(*out, append(data, '\n'), 0o644))
	failed := 0
	for _, e := range res.Benchmarks {
		if e.Status != "ok" {
			failed++
		}
	}
	fmt.Printf("benchrun: %d benchmarks in %v, %d failed; results in %s\n", len(chosen), time.Since(start).Round(time.Second), failed, *out)
	if failed > 0 {
		os.Exit(1)
	}
}

// run runs one benchmark and reads its report.
func run(b benchmark, size, logDir string) *entry {
	args := append(slices.Clone(b.Program), b.Full...)
	if size == "quick" {
		args = append(slices.Clone(b.Program), b.Quick...)
	}
	jsonPath := filepath.Join(logDir, b.ID+".json")
	_ = os.Remove(jsonPath)
	flagName := b.JSONFlag
	if flagName == "" {
		flagName = "-json"
	}
	args = append(args, flagName, jsonPath)
	e := &entry{ID: b.ID, Title: b.Title, Command: strings.Join(args, " "), Started: time.Now().UTC().Truncate(time.Second)}
	fmt.Printf("\n=== %s: %s\n=== %s\n", b.ID, b.Title, e.Command)

	logFile, err := os.Create(filepath.Join(logDir, b.ID+".log"))
	fail(err)
	defer logFile.Close()
	var tail tailBuffer
	w := io.MultiWriter(os.Stdout, logFile, &tail)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env = benchEnv()
	t0, cpu0 := time.Now(), readCPU()
	e.Load[0] = loadAverage()
	err = cmd.Run()
	e.Seconds = time.Since(t0).Round(time.Second).Seconds()
	e.CPU = readCPU().since(cpu0)
	e.Load[1] = loadAverage()
	data, rerr := os.ReadFile(jsonPath)
	if err == nil && rerr != nil {
		err = fmt.Errorf("no report: %w", rerr)
	}
	if err != nil {
		e.Status, e.Error, e.LogTail = "failed", err.Error(), tail.String()
		fmt.Printf("=== %s FAILED: %v\n", b.ID, err)
		return e
	}
	e.Status, e.Report = "ok", json.RawMessage(data)
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		e.Status, e.Error = "failed", "unreadable report: "+err.Error()
		return e
	}
	e.Targets = evaluate(b.Targets, &r)
	return e
}

// evaluate fills each target's value and whether it is met.
func evaluate(ts []target, r *report) []target {
	out := make([]target, 0, len(ts))
	for _, t := range ts {
		for _, rd := range r.Readers {
			if rd.Name != t.Reader {
				continue
			}
			var v float64
			var ok bool
			if t.Ratio {
				v, ok = rd.Ratios[t.Metric]
			} else {
				var m struct {
					Median float64 `json:"median"`
				}
				m, ok = rd.Metrics[t.Metric]
				v = m.Median
			}
			if !ok {
				continue
			}
			met := (t.Min == nil || v >= *t.Min) && (t.Max == nil || v <= *t.Max)
			t.Value, t.Met = &v, &met
		}
		out = append(out, t)
	}
	return out
}

// merge puts the entries just run into the result file's earlier ones,
// in the order of all.
func merge(path string, fresh []*entry, all []benchmark) []*entry {
	var old results
	if data, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(data, &old)
	}
	byID := map[string]*entry{}
	for _, e := range old.Benchmarks {
		byID[e.ID] = e
	}
	for _, e := range fresh {
		byID[e.ID] = e
	}
	var out []*entry
	for _, b := range all {
		if e := byID[b.ID]; e != nil {
			out = append(out, e)
		}
	}
	return out
}

// benchEnv is the environment of a benchmark: this one, without the
// variables that would change what is measured (an OTLP endpoint makes
// the traced reader export for real; PROSODY_* options would change the
// clients' configuration).
func benchEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OTEL_") || (strings.HasPrefix(kv, "PROSODY_") && !strings.HasPrefix(kv, "PROSODY_TEST_") &&
			!strings.HasPrefix(kv, "PROSODY_SERVICES_")) || strings.HasPrefix(kv, "GOMAXPROCS=") || strings.HasPrefix(kv, "GOGC=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PROSODY_LOG=warn")
}

// machine is what the figures depend on.
type machine struct {
	CPUModel  string  `json:"cpu_model"`
	Cores     int     `json:"cores"`
	MemoryGiB float64 `json:"memory_gib"`
	Kernel    string  `json:"kernel"`
	OS        string  `json:"os"`
	Go        string  `json:"go"`
	Python    string  `json:"python"`
	Node      string  `json:"node"`
}

func facts() machine {
	m := machine{Cores: runtime.NumCPU(), Go: firstLine("go", "version")}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %f kB", &kb); err == nil {
			m.MemoryGiB = float64(int(kb/1024/1024*10+0.5)) / 10
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if data, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	m.Python = firstLine("build/bench-venv/bin/python", "--version")
	m.Node = firstLine("node", "--version")
	return m
}

// services are the test services' versions: Kafka's as scripts/services
// starts it (KAFKA_VERSION, or the script's default), Cassandra's as the
// running node reports it.
func services() map[string]string {
	out := map[string]string{}
	if v := os.Getenv("KAFKA_VERSION"); v != "" {
		out["kafka"] = v
	} else if data, err := os.ReadFile("scripts/services"); err == nil {
		if m := regexp.MustCompile(`KAFKA_VERSION=\$\{KAFKA_VERSION:-([^}]+)\}`).FindSubmatch(data); m != nil {
			out["kafka"] = string(m[1])
		}
	}
	data, _ := exec.Command("scripts/services", "status", "cassandra").CombinedOutput()
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimPrefix(sc.Text(), "[services] ")
		if name, rest, ok := strings.Cut(line, ": "); ok && name == "cassandra" {
			if _, after, ok := strings.Cut(rest, "release_version "); ok {
				out[name] = strings.TrimSpace(after)
			}
		}
	}
	return out
}

func commit() (string, bool) {
	rev := firstLine("git", "rev-parse", "--short=12", "HEAD")
	status, _ := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	return rev, len(bytes.TrimSpace(status)) > 0
}

func firstLine(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// cpuShare is how the machine's CPU time was spent while something ran,
// from /proc/stat, in percent of all cores: the steal share is the time
// the hypervisor gave to other guests, the figure that says how noisy a
// run was.
type cpuShare struct {
	BusyPercent  float64 `json:"busy_percent"`
	StealPercent float64 `json:"steal_percent"`
	IdlePercent  float64 `json:"idle_percent"`
}

type cpuTimes struct{ busy, steal, idle, total float64 }

func readCPU() cpuTimes {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}
	}
	v := make([]float64, 8)
	for i := range v {
		v[i], _ = strconv.ParseFloat(f[i+1], 64)
	}
	// user nice system idle iowait irq softirq steal
	t := cpuTimes{idle: v[3] + v[4], steal: v[7]}
	for _, x := range v {
		t.total += x
	}
	t.busy = t.total - t.idle - t.steal
	return t
}

func (t cpuTimes) since(t0 cpuTimes) cpuShare {
	total := t.total - t0.total
	if total <= 0 {
		return cpuShare{}
	}
	pct := func(x float64) float64 { return float64(int(1000*x/total+0.5)) / 10 }
	return cpuShare{BusyPercent: pct(t.busy - t0.busy), StealPercent: pct(t.steal - t0.steal), IdlePercent: pct(t.idle - t0.idle)}
}

// loadAverage is the 1-minute load average: with the benchmark's own
// processes (and the services) it says how much else competed for the
// two cores.
func loadAverage() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var v float64
	_, _ = fmt.Sscanf(string(data), "%f", &v)
	return v
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

func fail(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchrun: %v\n", err)
		os.Exit(1)
	}
}
