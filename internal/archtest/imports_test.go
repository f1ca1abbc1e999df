// Package archtest keeps the package arrows of the design pointing down: each
// package may import only the packages of ours listed for it.
package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tinyllm/durable/"

// allowed lists, per package (or package prefix ending in "/"), the packages
// of ours it may import. client, tui, server, store/postgres and the workflow SDK also use
// activity, the leaf package of error types, the backoff formula, the
// failure fingerprint and the rule for ids, as DESIGN.md's table allows.
var allowed = map[string][]string{
	"proto/durable/v1":    {},
	"activity":            {"proto/durable/v1"},
	"engine":              {"proto/durable/v1", "activity"},
	"store/badger":        {"engine", "proto/durable/v1"},
	"store/postgres":      {"engine", "proto/durable/v1", "activity"},
	"store/storetest":     {"engine", "proto/durable/v1"},
	"server":              {"engine", "proto/durable/v1", "activity"},
	"client":              {"proto/durable/v1", "activity", "internal/tlsfile"},
	"worker":              {"client", "activity", "proto/durable/v1", "workflow"},
	"workflow":            {"client", "activity", "proto/durable/v1"},
	"tui":                 {"client", "proto/durable/v1", "activity"},
	"demo":                {"activity", "client", "worker", "workflow", "proto/durable/v1", "demo/", "internal/pgserver"},
	"demo/":               {"activity", "client", "worker", "workflow", "proto/durable/v1", "demo/", "internal/pgserver"},
	"internal/protoc":     {},
	"internal/tlsfile":    {},
	"internal/testdaemon": {"engine", "server", "store/badger"},
	"internal/testcert":   {},
	"internal/testpg":     {"internal/pgserver"},
	"internal/pgserver":   {},
	"internal/proccpu":    {},
}

// testOnly are helper packages for tests; no package's own code may import
// them.
var testOnly = []string{"internal/testdaemon", "internal/testcert", "internal/testpg", "internal/proccpu", "store/storetest"}

func TestImportsPointDown(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		for _, imp := range fields[1:] {
			for _, helper := range testOnly {
				if imp == module+helper {
					t.Errorf("%s imports the test helper %s", pkg, helper)
				}
			}
		}
		if strings.HasPrefix(pkg, "cmd/") {
			continue
		}
		rules, ok := rulesFor(pkg)
		if !ok {
			if strings.HasPrefix(pkg, "internal/") {
				continue // test-only packages (benchmarks, fault tests, this one)
			}
			t.Errorf("package %s has no import rule; add it to the table", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			if !permitted(strings.TrimPrefix(imp, module), rules) {
				t.Errorf("%s imports %s, which the design does not allow", pkg, strings.TrimPrefix(imp, module))
			}
		}
	}
}

func rulesFor(pkg string) ([]string, bool) {
	if r, ok := allowed[pkg]; ok {
		return r, true
	}
	for prefix, r := range allowed {
		if strings.HasSuffix(prefix, "/") && strings.HasPrefix(pkg, prefix) {
			return r, true
		}
	}
	return nil, false
}

func permitted(imp string, rules []string) bool {
	for _, r := range rules {
		if imp == r || strings.HasSuffix(r, "/") && strings.HasPrefix(imp, r) {
			return true
		}
	}
	return false
}
