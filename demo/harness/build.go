package harness

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
)

// DurabledPackage is the import path of the daemon's main package.
const DurabledPackage = "github.com/tinyllm/durable/cmd/durabled"

// Build compiles pkg (an import path or a ./relative package) into dir/name
// with the go command on PATH and returns the binary's path. Run it from
// inside the module; the go command's cache makes rebuilds cheap.
func Build(ctx context.Context, dir, name, pkg string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}

// nodeFlag finds durabled's --node flag in its --help output.
var nodeFlag = regexp.MustCompile(`(?m)^\s+-node\b`)

// SupportsNodes reports whether the durabled binary runs as one of several
// nodes on one database: whether it has a --node flag.
func SupportsNodes(ctx context.Context, durabled string) (bool, error) {
	out, err := exec.CommandContext(ctx, durabled, "--help").CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return false, fmt.Errorf("%s --help: %w", durabled, err)
	}
	return nodeFlag.Match(out), nil
}
