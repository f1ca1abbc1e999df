package engine

import (
	"github.com/tinyllm/durable/activity"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// An activity's last failure is stored with its fingerprint
// (activity.Fingerprint), so that lists can select and group failures that
// are the same problem without normalising every message they read.

// setLastFailure records the failure an activity's next decision (or an
// operator) sees, with its fingerprint.
func setLastFailure(in *durablev1.PendingActivity, f *durablev1.Failure) {
	in.LastFailure = f
	in.FailureFingerprint = activity.Fingerprint(f)
}

// fingerprintOf is the fingerprint of an activity's last failure: the one
// recorded with it, or for a record written before fingerprints were, the
// one its failure has.
func fingerprintOf(in *durablev1.PendingActivity) string {
	if fp := in.GetFailureFingerprint(); fp != "" || in.GetLastFailure() == nil {
		return fp
	}
	return activity.Fingerprint(in.GetLastFailure())
}
