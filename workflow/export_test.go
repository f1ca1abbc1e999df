package workflow

import "time"

// SetBlockedLimit shortens the blocked-coroutine limit for a test and
// returns a function restoring it.
func SetBlockedLimit(d time.Duration) func() {
	old := blockedLimit
	blockedLimit = d
	return func() { blockedLimit = old }
}
