// Package activity is what an activity author needs: the attempt's identity
// (IdempotencyKey, Attempt), its checkpoint from earlier attempts
// (HeartbeatDetails), a way to keep the lease and save progress
// (RecordHeartbeat), and typed errors that decide whether a failure is retried
// (NewError, NewNonRetryable).
//
// It is also where failures get their names: the Type constants list every
// failure type the system itself reports (timeouts, PayloadTooLarge,
// CommandsRefused, …), and FailureFromError and ErrorFromFailure are the one
// conversion between a Go error and the wire's Failure, used by the worker,
// the workflow side, the client and the daemon alike. Fingerprint groups
// failures that are the same problem: their type and their message with
// numbers, ids, addresses, hex and quoted values replaced by placeholders
// (NormalizeMessage), hashed to a short hex string.
//
// CheckID is the rule every id follows (workflow and activity ids, types,
// task queues, failure types, worker identities, principal names): plain text
// of any script, without control, format, private-use or unassigned
// characters, no spaces but U+0020 and none at either end, at most
// MaxIDLen bytes. EscapeID is how wf and wfui show an id that breaks it.
//
// It also holds the pure retry arithmetic the daemon applies, Backoff and
// Jitter, so that a policy can be checked without running anything:
//
//	d_n   = min(initial * backoff^(n-1), max_interval)   the backoff after attempt n failed
//	delay = u * d_n, u uniform in [0, 1)                  full jitter
package activity
