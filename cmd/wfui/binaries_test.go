package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  string
)

// binaries returns the directory of the durabled, wf, wfui and demo
// binaries the end-to-end tests run: DURABLE_BIN_DIR when set, else a build
// made once for every test of the package.
func binaries(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("DURABLE_BIN_DIR"); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "wfui-e2e-bin-")
		if err != nil {
			buildErr = err.Error()
			return
		}
		buildDir = dir
		build := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
			"github.com/tinyllm/durable/cmd/durabled", "github.com/tinyllm/durable/cmd/wf",
			"github.com/tinyllm/durable/cmd/wfui", "github.com/tinyllm/durable/demo")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = "go build: " + err.Error() + "\n" + string(out)
		}
	})
	if buildErr != "" {
		t.Fatal(buildErr)
	}
	return buildDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// e2e is one end-to-end run: the binaries, a directory, the daemon's
// address, the processes it started and the console in tmux. A failing
// test prints the end of each process's log and the console's last screen.
type e2e struct {
	t        *testing.T
	bin, dir string
	addr     string
	env      []string
	session  string
	last     string // the screen as last captured
}

// newE2E skips without tmux or with -short, and finds or builds the
// binaries; name tells its tmux session from those of other tests.
func newE2E(t *testing.T, name string) *e2e {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	if testing.Short() {
		t.Skip("builds and runs the binaries; skipped with -short")
	}
	e := &e2e{t: t, bin: binaries(t), dir: t.TempDir(), addr: freeAddr(t)}
	e.env = append(os.Environ(), "DURABLE_ADDR="+e.addr)
	e.session = fmt.Sprintf("wfui-%s-%d", name, os.Getpid())
	return e
}

// start runs binary name with args, its output in a log of its own; it is
// killed when the test ends.
func (e *e2e) start(name string, args ...string) *exec.Cmd {
	t := e.t
	t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, name), args...)
	cmd.Env = e.env
	log, err := os.Create(filepath.Join(e.dir, fmt.Sprintf("%s-%d.log", name, time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("%s (the end of its log):\n%s", name, b)
		}
	})
	return cmd
}

// daemon starts durabled on the run's address and directory.
func (e *e2e) daemon() *exec.Cmd {
	return e.start("durabled", "--listen", e.addr, "--data", filepath.Join(e.dir, "data"))
}

// wf runs wf against the daemon and returns what it printed.
func (e *e2e) wf(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(e.bin, "wf"), args...)
	cmd.Env = e.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// console opens wfui with flags in a tmux session of 132×43.
func (e *e2e) console(flags ...string) {
	cmd := strings.Join(append([]string{filepath.Join(e.bin, "wfui"), "--addr", e.addr}, flags...), " ")
	e.tmux("new-session", "-d", "-s", e.session, "-x", "132", "-y", "43", cmd)
	e.t.Cleanup(func() {
		if e.t.Failed() {
			if out, err := exec.Command("tmux", "capture-pane", "-p", "-t", e.session).Output(); err == nil {
				e.last = string(out)
			}
			e.t.Logf("last screen:\n%s", e.last)
		}
		_ = exec.Command("tmux", "kill-session", "-t", e.session).Run()
	})
}

func (e *e2e) tmux(args ...string) string {
	out, err := exec.Command("tmux", args...).CombinedOutput()
	if err != nil {
		e.t.Fatalf("tmux %v: %v: %s", args, err, out)
	}
	return string(out)
}

// keys types k into the console.
func (e *e2e) keys(k ...string) { e.tmux(append([]string{"send-keys", "-t", e.session}, k...)...) }

// screen is the console's screen now.
func (e *e2e) screen() string {
	e.last = e.tmux("capture-pane", "-p", "-t", e.session)
	return e.last
}

// shows waits for the screen to match re.
func (e *e2e) shows(what string, d time.Duration, re *regexp.Regexp) {
	e.t.Helper()
	waitUntil(e.t, d, what, func() bool { return re.MatchString(e.screen()) })
}

// quit sends q and waits for the console to end.
func (e *e2e) quit() {
	e.keys("q")
	waitUntil(e.t, 10*time.Second, "the console quitting", func() bool {
		return exec.Command("tmux", "has-session", "-t", e.session).Run() != nil
	})
}
