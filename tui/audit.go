package tui

import (
	"slices"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

const (
	// auditLoadLimit is how many of the newest audit records the console
	// reads when the stream (re)connects; later ones arrive on the stream.
	auditLoadLimit = 300
	// auditKeep bounds the records held, the oldest dropped first, so a
	// console left open for weeks does not grow without end.
	auditKeep = 1000
)

// auditLog is the audit screen's model: the newest records of operator
// actions, loaded when the stream (re)connects and kept live from the Watch
// stream, where a bulk redrive updates its record (same id) as it goes.
type auditLog struct {
	byID    map[int64]*durablev1.AuditRecord
	order   []*durablev1.AuditRecord // newest (largest id) first
	loaded  bool                     // a load answered at least once
	loading bool
	err     string // why the last load failed, if it did
}

func newAuditLog() *auditLog {
	return &auditLog{byID: make(map[int64]*durablev1.AuditRecord)}
}

// fresher picks the later version of one record. Records only move forward
// (the count grows, done is set once), so a load that answers after an
// update from the stream cannot take the record back.
func fresher(old, next *durablev1.AuditRecord) *durablev1.AuditRecord {
	if old == nil {
		return next
	}
	if old.GetDone() && !next.GetDone() || old.GetCount() > next.GetCount() {
		return old
	}
	return next
}

// upsert applies records from the stream; each costs a binary search and a
// slice move.
func (l *auditLog) upsert(recs []*durablev1.AuditRecord) {
	for _, r := range recs {
		old := l.byID[r.GetId()]
		r = fresher(old, r)
		l.byID[r.GetId()] = r
		i, found := l.index(r.GetId())
		if found {
			l.order[i] = r
			continue
		}
		l.order = slices.Insert(l.order, i, r)
	}
	l.trim()
}

// index is where id is, or would be, in order.
func (l *auditLog) index(id int64) (int, bool) {
	return slices.BinarySearchFunc(l.order, id, func(r *durablev1.AuditRecord, id int64) int {
		switch {
		case r.GetId() > id:
			return -1
		case r.GetId() < id:
			return 1
		}
		return 0
	})
}

// load replaces the log with what the daemon listed, newest first, keeping
// the records the stream brought that are newer than the listing.
func (l *auditLog) load(recs []*durablev1.AuditRecord) {
	newest := int64(-1)
	byID := make(map[int64]*durablev1.AuditRecord, len(recs))
	for _, r := range recs {
		byID[r.GetId()] = fresher(l.byID[r.GetId()], r)
		newest = max(newest, r.GetId())
	}
	for id, r := range l.byID {
		if id > newest {
			byID[id] = r
		}
	}
	l.byID = byID
	l.order = l.order[:0]
	for _, r := range byID {
		l.order = append(l.order, r)
	}
	slices.SortFunc(l.order, func(a, b *durablev1.AuditRecord) int {
		switch {
		case a.GetId() > b.GetId():
			return -1
		case a.GetId() < b.GetId():
			return 1
		}
		return 0
	})
	l.trim()
}

func (l *auditLog) trim() {
	for len(l.order) > auditKeep {
		last := l.order[len(l.order)-1]
		delete(l.byID, last.GetId())
		l.order = l.order[:len(l.order)-1]
	}
}
