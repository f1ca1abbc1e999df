// Package tui is wfui, the on-call console: a Bubble Tea program that follows
// the daemon's Watch stream and shows pending activities with live countdowns,
// dead letters (redriven from the keyboard, one or in bulk, with a reason for
// the audit log), workflows with their history as a timeline, the audit log
// of operator actions, the daemon's operations, and its task queues with
// their pollers and leases.
//
// Each screen is a component (component.go): a value with Update, View,
// Help and SetSize that keeps its own place (cursor, scroll, what it has
// open) and receives the console for what all screens share. The console
// handles the keys every screen has (views, quit, help, reconnect, the
// filter bar, dialogs) and forwards the rest to the active screen; the
// header's tabs, the help bar, the filter and the clock's pace ask the
// active screen rather than switching on which one it is.
//
// The console talks to the daemon only through Backend (NewBackend adapts a
// client.Client), and only from the commands in commands.go, so tests drive
// it with a fake. A bulk redrive is one call that starts a redrive operation:
// the daemon paces the letters and writes one audit record, pushes the
// operation's progress on Watch, and goes on with it if the console quits.
// The console shows that progress under the header until the operation
// finishes (operations.go keeps what Watch said of each, only ever moving a
// record forward), lists every operation on its own screen
// (operations_view.go), and cancels one after a confirmation (opcancel.go).
//
// The home view is sorted by urgency (urgency.go: overdue, dead-lettered,
// retrying by attempt, running, scheduled, as a pure order with the rank each
// row was placed with; home_order.go re-places a row when the clock makes it
// overdue). A workflow whose task waits past the same grace on a queue nobody
// polls is a row of its own there, ranked overdue (queues.go derives those
// rows when a workflow, the queue list or the clock changes, through
// client.WorkflowWait). Tables give width by priority (table.go's allocate: the failure
// and the heartbeat before ids, ids cut in their middle). State is kept in maps plus sorted slices
// updated by binary search, and only the visible rows are rendered, so an
// update costs in proportion to what changed even with tens of thousands of
// activities.
//
// What the console shows is meant to be true when it is drawn: countdowns
// run from the moment each event arrived, on the daemon's clock (clock.go);
// offline, the rows stand still as of the break and every key that would
// change state says why it cannot (offline.go); outcomes expire (flash.go);
// and a redrive is reported by what came of it, not by the call's answer
// (letter.go, and the operation's counts at its measured pace).
//
// From any activity, letter or workflow, w opens the workflow's timeline,
// which is read again as the stream says that workflow changed, at most
// every half second (timeline.go); y copies the id under the cursor with an
// OSC 52 sequence to the terminal, which works over SSH (clipboard.go).
package tui
