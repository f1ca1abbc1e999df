package tui

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// The console's sense of the present. Rows carry absolute times from the
// daemon's clock (a retry is due at, a lease runs out at); a countdown is one
// of them less m.now. Three things keep that difference true:
//
//   - m.now moves on every event as well as on the tick, to the moment the
//     event arrived (stamped when it was received, not when Update ran), so a
//     row drawn just after it came is not up to a tick old;
//   - m.now is the daemon's clock as near as the console can tell: its own
//     clock plus the offset the stream's server_time shows, so a console
//     whose clock runs a few seconds apart from the daemon's still counts
//     down to the daemon's moment;
//   - while offline m.now stands still at the moment the stream broke (the
//     "as of" of the header), so stale rows do not keep ageing and
//     countdowns do not run out on data nobody is receiving.

// clock is what m.now is computed from.
type clock struct {
	// local is the console's own clock as last read, by a tick or on the
	// arrival of an event; it never goes back.
	local time.Time
	// offset is the daemon's clock less the console's: the largest
	// server_time less arrival seen on this connection. Delivery delay only
	// ever makes the difference smaller, so the largest is the truest.
	offset      time.Duration
	offsetKnown bool
	// asOf is the daemon's time when the stream last broke: what m.now
	// shows while offline.
	asOf time.Time
}

// sawTime moves the console's clock to t if t is later. Readings taken with
// time.Now compare by the monotonic clock, so a wall-clock step back (NTP)
// neither freezes the console nor runs it backwards.
func (m Model) sawTime(t time.Time) Model {
	if t.IsZero() || !t.After(m.clk.local) {
		return m.settleNow()
	}
	m.clk.local = t
	return m.settleNow()
}

// sawEvent notes an event from the stream that arrived at the console's time
// at and left the daemon at its time sent (nil when the daemon did not say).
func (m Model) sawEvent(at time.Time, sent *timestamppb.Timestamp) Model {
	if at.IsZero() {
		return m
	}
	if sent != nil {
		if d := sent.AsTime().Sub(at.Round(0)); !m.clk.offsetKnown || d > m.clk.offset {
			m.clk.offset, m.clk.offsetKnown = d, true
		}
	}
	return m.sawTime(at)
}

// daemonNow is the daemon's clock as near as the console can tell.
func (m Model) daemonNow() time.Time {
	return m.clk.local.Add(m.clk.offset)
}

// stale reports whether the rows on screen are the last ones received from
// a stream that has since broken: they hold as of m.clk.asOf.
func (m Model) stale() bool {
	return m.conn.synced && !m.conn.live
}

// settleNow sets m.now from the clock and the connection: the daemon's time,
// or the as-of time while the rows are stale.
func (m Model) settleNow() Model {
	if m.stale() && !m.clk.asOf.IsZero() {
		m.now = m.clk.asOf
		return m
	}
	m.now = m.daemonNow()
	return m
}

// newConnection forgets the offset of the previous connection: the daemon
// behind the address may be another machine now.
func (m Model) newConnection() Model {
	m.clk.offset, m.clk.offsetKnown = 0, false
	return m
}
