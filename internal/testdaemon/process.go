package testdaemon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The durabled binary, built once per test binary by Exec and removed by
// Cleanup.
var (
	buildMu  sync.Mutex
	buildDir string
	binPath  string
)

// Binary builds cmd/durabled (once per test binary) and returns its path.
// Packages that use it call Cleanup from TestMain.
func Binary(t testing.TB) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if binPath != "" {
		return binPath
	}
	dir, err := os.MkdirTemp("", "durabled-bin-")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "durabled")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/tinyllm/durable/cmd/durabled").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("build durabled: %v\n%s", err, out)
	}
	buildDir, binPath = dir, bin
	return bin
}

// Cleanup removes the binary Binary built, if any.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
		buildDir, binPath = "", ""
	}
}

// Process is a running durabled started by Exec.
type Process struct {
	// Addr is where it listens (127.0.0.1 and the port it picked).
	Addr string
	// MetricsAddr is where it serves /metrics, if it was given
	// --metrics-listen.
	MetricsAddr string

	t       testing.TB
	dataDir string
	args    []string
	cmd     *exec.Cmd
	logs    *lines
	done    chan struct{} // closed when its stderr ends
}

// lines is a log that is safe to read while it is written.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(s + "\n")
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Exec runs durabled on dataDir (no --data when it is empty, for a store
// given in args) with --listen 127.0.0.1:0 and args, and
// returns once its "listening" log line names its address. The process is
// killed when the test ends.
func Exec(t testing.TB, dataDir string, args ...string) *Process {
	t.Helper()
	p := &Process{t: t, dataDir: dataDir, args: args}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Run runs durabled with exactly args (no --listen or --data of its own) to
// the end and returns its exit code and what it wrote to stderr.
func Run(t testing.TB, args ...string) (code int, stderr string) {
	t.Helper()
	cmd := exec.Command(Binary(t), args...)
	var b bytes.Buffer
	cmd.Stderr = &b
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), b.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, b.String()
}

func (p *Process) start() error {
	args := []string{"--listen", "127.0.0.1:0"}
	if p.dataDir != "" {
		args = append(args, "--data", p.dataDir)
	}
	args = append(args, p.args...)
	cmd := exec.Command(Binary(p.t), args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	p.cmd, p.logs, p.done = cmd, &lines{}, make(chan struct{})
	p.t.Cleanup(p.Kill)
	addrs, metrics := make(chan string, 1), make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			switch {
			case strings.Contains(line, "msg=listening"):
				addrs <- field(line, "addr")
			case strings.Contains(line, `msg="serving metrics"`):
				metrics <- field(line, "addr")
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	deadline := time.After(60 * time.Second)
	for p.Addr == "" {
		select {
		case p.MetricsAddr = <-metrics:
		case p.Addr = <-addrs:
		case <-p.done:
			return fmt.Errorf("durabled exited before listening:\n%s", p.logs)
		case <-deadline:
			return fmt.Errorf("durabled did not report listening within 60s:\n%s", p.logs)
		}
	}
	if strings.Contains(strings.Join(p.args, " "), "--metrics-listen") && p.MetricsAddr == "" {
		select {
		case p.MetricsAddr = <-metrics:
		case <-deadline:
			return fmt.Errorf("durabled did not report serving metrics:\n%s", p.logs)
		}
	}
	return nil
}

// field returns the value of key=value in a log line.
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// Pid returns the process id of the running durabled, for tests that read
// its /proc entry.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Logs returns what the process has written to stderr so far.
func (p *Process) Logs() string { return p.logs.String() }

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Process) Kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd.Wait()
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits for the process to exit and returns its exit code.
func (p *Process) Wait() int {
	<-p.done
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// Restart starts durabled again on the same data directory with the same
// arguments (after a Kill, say); Addr changes to the new port.
func (p *Process) Restart() {
	p.t.Helper()
	p.Addr, p.MetricsAddr = "", ""
	if err := p.start(); err != nil {
		p.t.Fatal(err)
	}
}
