package harness

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
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
