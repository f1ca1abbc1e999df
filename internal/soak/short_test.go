//go:build !soak

package soak

import (
	"testing"
	"time"
)

// TestShortSoakLosesNothingUnderTwentyKills is the soak of CI: a minute of
// workflows with retries, heartbeats, dead letters and redrives while
// durabled is SIGKILLed twenty times; then nothing acknowledged is lost,
// nothing is done twice, nothing is stuck and durabled stayed under its
// memory bound. -short skips it; -tags soak runs the long one instead.
func TestShortSoakLosesNothingUnderTwentyKills(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the soak takes about 80 s")
	}
	soak(t, plan{load: time.Minute, kills: 20, starters: 6, settle: 2 * time.Minute})
}
