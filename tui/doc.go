// Package tui is wfui, the on-call console: a Bubble Tea program that follows
// the daemon's Watch stream and shows pending activities with live countdowns,
// dead letters (redriven from the keyboard, one or in bulk, with a reason for
// the audit log), workflows with their history as a timeline, and the audit
// log of operator actions.
//
// The console talks to the daemon only through Backend (NewBackend adapts a
// client.Client), and only from the commands in commands.go, so tests drive
// it with a fake. A bulk redrive is one call that starts a redrive operation:
// the daemon paces the letters and writes one audit record, and the operation
// goes on if the console quits. State is kept in maps plus sorted slices
// updated by binary search, and only the visible rows are rendered, so an
// update costs in proportion to what changed even with tens of thousands of
// activities.
package tui
