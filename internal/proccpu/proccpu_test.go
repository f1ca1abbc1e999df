package proccpu

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

const envBurn = "PROCCPU_TEST_BURN" // set: the test binary burns CPU and exits

func TestMain(m *testing.M) {
	if os.Getenv(envBurn) != "" {
		burn(200 * time.Millisecond)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// burn spins until this process has used d more CPU time.
func burn(d time.Duration) {
	until := Self() + d
	for x := 0; Self() < until; x++ {
		_ = x * x
	}
}

func TestOf_ReadsTheCPUTimeOfAProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	before := Of(os.Getpid())
	burn(100 * time.Millisecond)
	// /proc counts in ticks of 10ms.
	if got := Of(os.Getpid()) - before; got < 80*time.Millisecond {
		t.Fatalf("after 100ms of CPU, /proc says %v more", got)
	}
	if got := Of(0x7fffffff); got != 0 {
		t.Fatalf("a process that does not exist used %v", got)
	}
}

func TestTree_CountsTheChildrenAProcessHasReaped(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	before := Tree(os.Getpid()) - Of(os.Getpid())
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), envBurn+"=1")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	if got := Tree(os.Getpid()) - Of(os.Getpid()) - before; got < 180*time.Millisecond {
		t.Fatalf("a child that used 200ms of CPU adds %v to its parent's tree", got)
	}
}
