package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
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
