// Package pgserver runs a throwaway PostgreSQL server: initdb in a new
// temporary directory, a server listening only on a unix socket in a
// directory of its own (no TCP, so it never collides with another server),
// fsync on like a real deployment, and everything stopped and removed by
// Stop. The tests use it through internal/testpg; the demo starts one for
// its nodes to share.
//
// The binaries come from Debian's postgresql package
// (/usr/lib/postgresql/*/bin, the newest version first) or from PATH;
// without them Start fails with an error wrapping ErrNotInstalled, which
// names the package to install. initdb and postgres refuse to run as root:
// as root, the server runs as the unprivileged postgres user the package
// creates.
package pgserver

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
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNotInstalled is wrapped by the error of FindBinaries and Start when
// PostgreSQL's server programs are not on this machine.
var ErrNotInstalled = errors.New("PostgreSQL server binaries (initdb, postgres) not found in " + debianBinDirs +
	" or PATH; install Debian's postgresql package (apt-get install postgresql)")

// debianBinDirs is where Debian's postgresql packages put the server's
// programs, one directory per major version.
const debianBinDirs = "/usr/lib/postgresql/*/bin"

// readyWithin bounds the wait for a started server to accept connections.
const readyWithin = 30 * time.Second

// Binaries are the two programs a server needs.
type Binaries struct {
	Initdb, Postgres string
}

// FindBinaries looks for initdb and postgres in Debian's directories, the
// newest version first, then on PATH.
func FindBinaries() (Binaries, error) { return findBinaries(debianBinDirs) }

// findBinaries is FindBinaries over the directories binDirs matches.
func findBinaries(binDirs string) (Binaries, error) {
	dirs, _ := filepath.Glob(binDirs)
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		b := Binaries{Initdb: filepath.Join(d, "initdb"), Postgres: filepath.Join(d, "postgres")}
		if executable(b.Initdb) && executable(b.Postgres) {
			return b, nil
		}
	}
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 != nil || err2 != nil {
		return Binaries{}, ErrNotInstalled
	}
	return Binaries{Initdb: initdb, Postgres: postgres}, nil
}

func versionOf(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Options say how to start a server. The zero value is usable.
type Options struct {
	// Binaries are the programs to run; zero means FindBinaries.
	Binaries Binaries
	// MaxConnections is the server's max_connections; default 200.
	MaxConnections int
	// Settings are name=value settings passed to postgres with -c after
	// the package's own, so they override them
	// (shared_preload_libraries=pg_stat_statements, say).
	Settings []string
}

// Server is a running throwaway PostgreSQL.
type Server struct {
	dir      string // the temporary directory: data/ and sock/
	data     string
	sockDir  string
	port     int
	user     string // the database superuser: the OS user postgres runs as
	program  string // the postgres binary
	maxConns int
	settings []string
	cred     *syscall.Credential
	log      *syncBuffer
	once     sync.Once

	mu     sync.Mutex
	cmd    *exec.Cmd     // the running postmaster
	exited chan struct{} // closed when it has exited
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

// Start runs initdb in a new temporary directory and starts postgres on it,
// returning once it accepts connections. Stop it on every path out.
func Start(opts Options) (*Server, error) {
	b := opts.Binaries
	if b == (Binaries{}) {
		var err error
		if b, err = FindBinaries(); err != nil {
			return nil, err
		}
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = 200
	}
	who, err := whoRuns()
	if err != nil {
		return nil, err
	}
	// The directory must be reachable by the user the server runs as, and
	// socket paths are limited to about 100 bytes, so it stays short.
	dir, err := os.MkdirTemp(tempBase(who), "pgserver-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, data: filepath.Join(dir, "data"), sockDir: filepath.Join(dir, "sock"), user: who.name,
		program: b.Postgres, maxConns: opts.MaxConnections, settings: opts.Settings, cred: who.cred, log: &syncBuffer{}}
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
	// --no-sync skips flushing initdb's own files: a crash during the run
	// loses the whole directory anyway. The server itself runs with fsync on.
	initdb := exec.Command(b.Initdb, "--pgdata", s.data, "--username", who.name, "--auth", "trust",
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
	cmd := exec.Command(s.program, "-D", s.data, "-k", s.sockDir, "-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=",
		"-c", "fsync=on",
		"-c", "max_connections="+strconv.Itoa(s.maxConns),
		"-c", "shared_buffers=32MB",
		"-c", "log_min_messages=warning",
	)
	for _, kv := range s.settings {
		cmd.Args = append(cmd.Args, "-c", kv)
	}
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
	return s.waitReady(readyWithin)
}

// Kill SIGKILLs the server and every process of it at once, as a crash or
// a power cut would end it: what it had not flushed is lost, and Restart
// runs crash recovery.
func (s *Server) Kill() error {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	// The server runs in a process group of its own (sysProcAttr): its
	// backends die with it, and no orphan holds its shared memory.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if !s.waitExit(30 * time.Second) {
		return errors.New("pgserver: the server outlived SIGKILL by 30s")
	}
	return nil
}

// Restart starts the server again on the same data directory, socket and
// port, after Kill or a shutdown.
func (s *Server) Restart() error {
	if err := s.run(); err != nil {
		return fmt.Errorf("pgserver: restart: %w", err)
	}
	return nil
}

// Stop shuts the server down (fast shutdown: connections are ended) and
// removes its directory. It escalates to an immediate shutdown, then to
// SIGKILL, when the server does not exit in time. Later calls do nothing.
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

// Pid returns the process id of the running postmaster, 0 when none runs.
// The backends are its children (each in a session of its own).
func (s *Server) Pid() int {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil || s.waitExit(0) {
		return 0
	}
	return cmd.Process.Pid
}

// Exited reports whether the server's current process has exited (true
// when none was started).
func (s *Server) Exited() bool { return s.waitExit(0) }

// Dir is the server's temporary directory (data/ and sock/), removed by
// Stop.
func (s *Server) Dir() string { return s.dir }

// Logs returns what the server wrote so far.
func (s *Server) Logs() string { return s.log.String() }

// DSN returns the DSN of database db on s, as the superuser, for
// github.com/jackc/pgx/v5 (pgx.Connect, pgxpool.New) and durabled's
// --postgres-dsn.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.sockDir, s.port, s.user, db)
}

// CreateDatabase creates the empty database name and returns its DSN. The
// name is used as an SQL identifier as it is: letters, digits and
// underscores only.
func (s *Server) CreateDatabase(ctx context.Context, name string) (dsn string, err error) {
	if err := s.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", err
	}
	return s.DSN(name), nil
}

// DropDatabase drops database name, ending the connections still open to
// it.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
}

// Exec runs one statement in the postgres database.
func (s *Server) Exec(ctx context.Context, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
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
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-exited:
		return true
	case <-t.C:
		return false
	}
}

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
