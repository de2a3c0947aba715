package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Lang is a member's language.
type Lang string

const (
	Go     Lang = "go"
	Python Lang = "python"
	Node   Lang = "node"
)

// Launcher starts members: each a process with the environment env, its
// log in dir/NAME.log and its stderr in dir/NAME.stderr.
type Launcher struct {
	Repo string   // the repository, for the Python and Node members
	Self string   // this program, whose "member" command is the Go member
	Dir  string   // the scenario's directory
	Env  []string // PROSODY_* and the harness's settings
}

// Proc is a running member.
type Proc struct {
	Name string
	Lang Lang
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts member name in lang.
func (l *Launcher) Start(name string, lang Lang) (*Proc, error) {
	var cmd *exec.Cmd
	switch lang {
	case Go:
		cmd = exec.Command(l.Self, "member")
	case Python:
		cmd = exec.Command(filepath.Join(l.Repo, "build", "python-venv", "bin", "python"), filepath.Join(l.Repo, "scripts", "chaos", "member.py"))
	case Node:
		cmd = exec.Command("node", filepath.Join(l.Repo, "scripts", "chaos", "member.js"))
	default:
		return nil, fmt.Errorf("cluster: no member in %q", lang)
	}
	stderr, err := os.OpenFile(filepath.Join(l.Dir, name+".stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cmd.Env = append(append([]string{}, l.Env...),
		"CHAOS_LOG="+filepath.Join(l.Dir, name+".log"), "CHAOS_MEMBER="+name, "PYTHONUNBUFFERED=1")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	// Its own process group, so a terminal's ^C reaches the harness only
	// and the harness decides how each member ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = stderr.Close()
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	p := &Proc{Name: name, Lang: lang, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = stderr.Close()
		close(p.done)
	}()
	return p, nil
}

// Signal sends sig to the member.
func (p *Proc) Signal(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("cluster: signal %s: %w", p.Name, err)
	}
	return nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait waits for the exit; an exit by a signal the harness sent is not an
// error of the member, so the caller reads ExitErr.
func (p *Proc) Wait(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: %s did not exit: %w", p.Name, ctx.Err())
	}
}

// ExitErr is how the process ended (nil for exit status 0).
func (p *Proc) ExitErr() error { return p.err }

// Stop ends the member with SIGTERM (a clean shutdown), or SIGKILL if it
// has not exited when ctx ends.
func (p *Proc) Stop(ctx context.Context) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	if err := p.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	if err := p.Wait(ctx); err != nil {
		_ = p.Signal(syscall.SIGKILL)
		<-p.done
		return err
	}
	return nil
}
