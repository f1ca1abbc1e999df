//go:build soak

package soak

import (
	"testing"
	"time"
)

// TestSoakLosesNothingUnderKills is the long soak: -soak.duration of load
// (default 10 minutes) with a SIGKILL of durabled every -soak.kill-every on
// average (default 3 s), then the same checks as the short one.
//
//	go test -tags soak -timeout 0 -v ./internal/soak -soak.duration 30m
func TestSoakLosesNothingUnderKills(t *testing.T) {
	kills := max(1, int(*flagDuration / *flagKillEvery))
	soak(t, plan{load: *flagDuration, kills: kills, starters: *flagStarters, settle: 3 * time.Minute})
}
