// Command prosody-chaos is the fault harness: it starts its own Kafka and
// Cassandra (on ports of its own, never the shared services'), runs
// consumer members in Go, Python and Node as real processes, injects one
// kind of fault per scenario under a seed, and checks the invariants of
// docs/reliability.md after each.
//
//	prosody-chaos run -profile short|long [-seed N] [-duration 32m]
//	prosody-chaos run -scenario sigkill -seed N [-duration 30s]
//	prosody-chaos check DIR...       # the checker alone, on scenarios' directories
//	prosody-chaos member             # a Go member (started by run)
//
// scripts/chaos/run builds what the members need and runs it.
package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prosody-events/prosody-go/internal/chaos/check"
	"github.com/prosody-events/prosody-go/internal/chaos/cluster"
	"github.com/prosody-events/prosody-go/internal/chaos/member"
	"github.com/prosody-events/prosody-go/internal/chaos/scenario"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: prosody-chaos run|check|member ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "member":
		err = member.Run()
	case "check":
		err = checkCmd(os.Args[2:])
	case "run":
		err = runCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "prosody-chaos:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("%s [chaos] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func checkCmd(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: prosody-chaos check DIR... (a scenario's directory each; several get a summary)")
	}
	var reports []*check.Report
	failed := 0
	for _, dir := range args {
		rep, err := check.Dir(dir)
		if err != nil {
			return err
		}
		printReport(rep)
		reports = append(reports, rep)
		if !rep.OK() {
			failed++
		}
	}
	if len(reports) > 1 {
		b, _ := json.MarshalIndent(summarize(reports, 0), "", "  ")
		fmt.Println(string(b))
	}
	if failed > 0 {
		return fmt.Errorf("violations found in %d of %d scenarios", failed, len(reports))
	}
	return nil
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	profile := fs.String("profile", "short", "short or long")
	one := fs.String("scenario", "", "run only this fault kind ("+strings.Join(scenario.Kinds, ", ")+")")
	seed := fs.Uint64("seed", 0, "the run's seed (0: a random one, printed)")
	duration := fs.Duration("duration", 32*time.Minute, "the long profile's length; a single scenario's fault time when -scenario is given")
	out := fs.String("out", "", "where the scenarios' directories go (default build/chaos/<profile>-<seed>)")
	langs := fs.String("langs", "go,python,node", "the core members' languages")
	repo := fs.String("repo", ".", "the repository")
	debug := fs.Bool("debug", false, "the members log at debug level (to NAME.stderr)")
	portOffset := fs.Int("port-offset", 0, "moves every port of the harness's services by this much (two harnesses at once)")
	_ = fs.Parse(args)
	if *seed == 0 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		*seed = binary.LittleEndian.Uint64(b[:]) >> 1
	}
	var p scenario.Profile
	switch {
	case *one != "":
		d := *duration
		if d == 32*time.Minute {
			d = 30 * time.Second
		}
		p = scenario.One(*one, *seed, d)
	case *profile == "short":
		p = scenario.Short(*seed)
	case *profile == "long":
		p = scenario.Long(*seed, *duration)
	default:
		return fmt.Errorf("unknown profile %q", *profile)
	}
	root, err := filepath.Abs(*repo)
	if err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	if *out == "" {
		*out = filepath.Join(root, "build", "chaos", fmt.Sprintf("%s-%d", p.Name, *seed))
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("self: %w", err)
	}
	var ls []cluster.Lang
	for _, l := range strings.Split(*langs, ",") {
		ls = append(ls, cluster.Lang(l))
	}
	logf("profile %s, seed %d (replay: -seed %d), %d scenarios, output in %s", p.Name, *seed, *seed, len(p.Specs), *out)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	runDir, err := os.MkdirTemp("", "prosody-chaos-services-")
	if err != nil {
		return fmt.Errorf("run dir: %w", err)
	}
	defer os.RemoveAll(runDir)
	h, err := scenario.Start(ctx, scenario.Options{Repo: root, Self: self, Out: *out, Run: runDir,
		Ports: cluster.DefaultPorts.Offset(*portOffset), Langs: ls, Debug: *debug, Log: logf})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := h.Close(); cerr != nil {
			logf("stopping the services: %v", cerr)
		}
	}()
	start := time.Now()
	var reports []*check.Report
	failed := 0
	for i, s := range p.Specs {
		logf("scenario %d/%d: %s, seed %d (replay: -scenario %s -seed %d -duration %v)", i+1, len(p.Specs), s.Kind, s.Seed, s.Kind, s.Seed, s.Duration)
		rep, err := h.Run(ctx, i+1, s)
		if err != nil {
			return fmt.Errorf("scenario %s (seed %d): %w", s.Kind, s.Seed, err)
		}
		printReport(rep)
		reports = append(reports, rep)
		if !rep.OK() {
			failed++
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	sum := summarize(reports, time.Since(start))
	b, _ := json.MarshalIndent(sum, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "summary.json"), b, 0o644); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	fmt.Println(string(b))
	if failed > 0 {
		return fmt.Errorf("%d of %d scenarios broke an invariant (seed %d)", failed, len(reports), *seed)
	}
	logf("%d scenarios, no violation (seed %d)", len(reports), *seed)
	return nil
}

func printReport(r *check.Report) {
	verdict := "ok"
	if !r.OK() {
		verdict = "VIOLATIONS"
	}
	logf("  %s: %s — %d events, %d handled (%d duplicates, %d topic duplicates), %d failed attempts, %d/%d timer fires, faults %v, recoveries %v s",
		r.Meta.Name, verdict, r.Events, r.Handled, r.Duplicates, r.TopicDuplicates, r.Failed, r.TimerFires, r.Timers, r.Faults, round(r.Recoveries))
	if r.OK() {
		return
	}
	logf("  seed %d: replay with -scenario %s -seed %d", r.Meta.Seed, r.Meta.Kind, r.Meta.Seed)
	for inv, n := range r.Counts {
		logf("  %s: %d", inv, n)
	}
	for _, v := range r.Violations {
		logf("  first %s: %s", v.Invariant, v.Detail)
		for _, rec := range v.Records {
			logf("    %s", rec)
		}
	}
}

func round(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(int(x*10)) / 10
	}
	return out
}
