// Package tui is wfui, the on-call console: a Bubble Tea program that follows
// the daemon's Watch stream and shows pending activities with live countdowns,
// dead letters (redriven from the keyboard, one or in bulk), and workflows with
// their history as a timeline.
//
// The console talks to the daemon only through Backend, and only from the
// commands in commands.go, so tests drive it with a fake. State is kept in maps
// plus sorted slices updated by binary search, and only the visible rows are
// rendered, so an update costs in proportion to what changed even with tens of
// thousands of activities.
package tui
