package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Proc is one child process whose output goes to a log file.
type Proc struct {
	// Name is how logs and errors refer to the process ("durabled",
	// "worker-3").
	Name string
	// LogPath is the file that holds its stdout and stderr.
	LogPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // the Wait error, set before done is closed

	mu    sync.Mutex
	lines []func(string) // line watchers, see watchLines
}

// startProc starts argv with its output appended to logPath. Every output
// line is also offered to watch, from the first, and to the watchers
// registered later with watchLines.
func startProc(name, logPath string, argv []string, watch ...func(string)) (*Proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: name, LogPath: logPath, done: make(chan struct{}), lines: watch}
	pr, pw := io.Pipe()
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			p.mu.Lock()
			watchers := p.lines
			p.mu.Unlock()
			for _, w := range watchers {
				w(line)
			}
		}
		_, _ = io.Copy(logf, pr) // a line too long for the scanner
	}()
	go func() {
		p.err = p.cmd.Wait()
		pw.Close()
		<-copied
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// watchLines calls fn for every later output line until the process exits.
func (p *Proc) watchLines(fn func(string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, fn)
}

// PID is the process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Stop asks the process to exit (os.Interrupt), then kills it if it is still
// there after grace.
func (p *Proc) Stop(grace time.Duration) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.Kill()
	}
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Tail returns the last n lines of the process's log, for error messages.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
