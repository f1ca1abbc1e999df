package testpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running throwaway PostgreSQL.
type Server struct {
	dir     string // the temporary directory: data/ and sock/
	data    string
	sockDir string
	port    int
	user    string // the database superuser: the OS user postgres runs as
	program string // the postgres binary
	cred    *syscall.Credential
	extra   []string // name=value settings given to Start
	log     *syncBuffer
	once    sync.Once

	mu     sync.Mutex
	cmd    *exec.Cmd     // the running postmaster
	exited chan struct{} // closed when it has exited
}

// bins are the two programs a server needs.
type bins struct {
	initdb, postgres string
}

// binaries finds initdb and postgres, or skips t (fails it when RequireEnv
// is "require").
func binaries(t testing.TB) bins {
	t.Helper()
	b, err := findBinaries(debianBinDirs)
	if err != nil {
		msg := missingMessage(err)
		if os.Getenv(RequireEnv) == "require" {
			t.Fatal(msg + " (" + RequireEnv + "=require)")
		}
		t.Skip(msg)
	}
	return b
}

// debianBinDirs is where Debian's postgresql packages put the server's
// programs, one directory per major version.
const debianBinDirs = "/usr/lib/postgresql/*/bin"

// missingMessage says what to do when the programs are missing.
func missingMessage(err error) string {
	return "testpg: " + err.Error() + "; install Debian's postgresql package (apt-get install postgresql) to run this test"
}

// findBinaries looks in the directories binDirs matches, newest version
// first, then on PATH.
func findBinaries(binDirs string) (bins, error) {
	dirs, _ := filepath.Glob(binDirs)
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		b := bins{initdb: filepath.Join(d, "initdb"), postgres: filepath.Join(d, "postgres")}
		if executable(b.initdb) && executable(b.postgres) {
			return b, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 != nil || err2 != nil {
		return bins{}, errors.New("PostgreSQL server binaries (initdb, postgres) not found in /usr/lib/postgresql/*/bin or PATH")
	}
	return bins{initdb: initdb, postgres: postgres}, nil
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// runAs is who the server runs as: the postgres user when this process is
// root (initdb and postgres refuse root), else this process's own user.
type runAs struct {
	name     string
	uid, gid int
	cred     *syscall.Credential // nil: as this process
}

func whoRuns() (runAs, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return runAs{}, err
		}
		return runAs{name: u.Username, uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return runAs{}, fmt.Errorf("running as root, and PostgreSQL refuses root; the unprivileged user postgres (created by Debian's postgresql package) is missing: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return runAs{name: "postgres", uid: uid, gid: gid,
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}}, nil
}

// start runs initdb in a new temporary directory and starts postgres on it
// with the extra settings.
func start(b bins, extra ...string) (*Server, error) {
	who, err := whoRuns()
	if err != nil {
		return nil, err
	}
	// Not t.TempDir: its parents are private to this user, and the server
	// may run as another one. Socket paths are limited to about 100 bytes,
	// so the directory stays short.
	dir, err := os.MkdirTemp(tempBase(who), "testpg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), sockDir: filepath.Join(dir, "sock"), user: who.name,
		program: b.postgres, cred: who.cred, extra: extra, log: &syncBuffer{}}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Mkdir(s.sockDir, 0o700); err != nil {
		return fail(err)
	}
	for _, p := range []string{dir, s.sockDir} {
		if err := os.Chown(p, who.uid, who.gid); err != nil {
			return fail(err)
		}
	}
	// --no-sync skips flushing initdb's own files: a crash during a test
	// loses the whole directory anyway. The server itself runs with fsync on.
	initdb := exec.Command(b.initdb, "--pgdata", s.data, "--username", who.name, "--auth", "trust",
		"--encoding", "UTF8", "--locale", "C", "--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: who.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("initdb: %v\n%s", err, out))
	}
	if s.port, err = freePort(); err != nil {
		return fail(err)
	}
	if err := s.run(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// run starts postgres on the data directory and waits until it accepts
// connections.
func (s *Server) run() error {
	args := []string{"-D", s.data, "-k", s.sockDir, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=",
		"-c", "fsync=on",
		"-c", "max_connections=200",
		"-c", "shared_buffers=32MB",
		"-c", "log_min_messages=warning",
	}
	for _, kv := range s.extra {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(s.program, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.SysProcAttr = sysProcAttr(s.cred)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return s.waitReady(30 * time.Second)
}

// Kill SIGKILLs the server and every process of it at once, as a crash or
// a power cut would end it: what it had not flushed is lost, and Restart
// runs crash recovery.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	// The server runs in a process group of its own (sysProcAttr): its
	// backends die with it, and no orphan holds its shared memory.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if !s.waitExit(30 * time.Second) {
		t.Fatal("testpg: the server outlived SIGKILL by 30s")
	}
}

// Restart starts the server again on the same data directory, socket and
// port, after Kill or a shutdown.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.run(); err != nil {
		t.Fatalf("testpg: restart: %v", err)
	}
}

// tempBase is where the server's directory goes: the usual temporary
// directory, unless the server runs as another user who could not reach it
// (TMPDIR under root's home, say); then /tmp.
func tempBase(who runAs) string {
	base := os.TempDir()
	if who.cred == nil {
		return base
	}
	for d := base; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return base
		}
	}
}

// waitReady connects until the server answers, it exits, or the deadline
// passes.
func (s *Server) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN("postgres"))
		cancel()
		if err == nil {
			conn.Close(context.Background())
			return nil
		}
		if s.waitExit(0) {
			return fmt.Errorf("postgres exited at start: %s", s.log.String())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %v: %v\n%s", within, err, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Pid returns the process id of the running postmaster, 0 when none runs:
// its backends and background workers are its children, for a benchmark
// that reads their CPU time from /proc.
func (s *Server) Pid() int {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil || s.waitExit(0) {
		return 0
	}
	return cmd.Process.Pid
}

// Stop shuts the server down (fast shutdown: connections are ended) and
// removes its directory. It escalates to an immediate shutdown, then to
// SIGKILL, when the server does not exit in time. Only the first call does
// anything.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.mu.Lock()
		cmd := s.cmd
		s.mu.Unlock()
		if cmd != nil && cmd.Process != nil {
			for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGQUIT, syscall.SIGKILL} {
				cmd.Process.Signal(sig)
				if s.waitExit(10 * time.Second) {
					break
				}
			}
		}
		os.RemoveAll(s.dir)
	})
}

// waitExit reports whether the server's current process exited within d
// (at once, for 0); true when none was started.
func (s *Server) waitExit(d time.Duration) bool {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	if exited == nil {
		return true
	}
	if d == 0 {
		select {
		case <-exited:
			return true
		default:
			return false
		}
	}
	select {
	case <-exited:
		return true
	case <-time.After(d):
		return false
	}
}

// Logs returns what the server wrote so far.
func (s *Server) Logs() string { return s.log.String() }

// freePort returns a port no one listens on now. The server listens only on
// its socket, whose name holds the port; the port keeps the lock file of the
// socket apart from another server's all the same.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a log that is safe to read while the server writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.b.String())
}
