package postgres

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tinyllm/durable/engine"
)

// A transaction's writes wait for its next statement (pipe.go), and when
// they go they are merged: one statement per table and kind of write (a
// multi-row upsert or insert from unnest of one array per column, or one
// delete joined to such arrays), not one per row. A batch of transitions
// that writes sixteen activities sends one upsert of sixteen rows: the
// database's cost of a statement (its protocol messages, bind, plan and
// executor start) is paid once for the batch, not once per row.
//
// The merged statements have the effect of the writes run one by one, in
// order:
//
//   - A table with a key (activities, workflows, history, ...) holds one
//     row per key, and each write of a key replaces the row whole (an
//     upsert sets every column) or deletes it: so only the last write of
//     each key counts. The upsert never names a key twice, which
//     PostgreSQL refuses ("ON CONFLICT DO UPDATE command cannot affect row
//     a second time"), and a delete after an upsert is a delete.
//   - The queue and timers tables have no key of their own: a record owns
//     its rows there, and rewriting the record deletes every row it owns
//     (of some kinds) and inserts the new ones. For each owner, the writes
//     that count are its last delete, if any, and the inserts after it;
//     the merged delete runs before the merged insert.
//   - Writes of different keys or owners touch different rows, and no
//     table's rows depend on another's (no triggers, no foreign keys), so
//     their order across tables does not matter.
//
// A table's lone row is written by a single-row statement, as before the
// merging. A statement the database refuses fails the transaction with the
// names of the writes it carried.

// colType is the type of a column, which its values have in Go.
type colType uint8

const (
	colBytes     colType = iota // []byte, bytea
	colInt64                    // int64, bigint
	colNullInt64                // *int64, bigint or NULL
	colInt16                    // int16, smallint
	colText                     // string, text
	colBool                     // bool, boolean
)

func (c colType) sqlType() string {
	switch c {
	case colBytes:
		return "bytea"
	case colInt64, colNullInt64:
		return "bigint"
	case colInt16:
		return "smallint"
	case colText:
		return "text"
	case colBool:
		return "boolean"
	}
	panic(fmt.Sprintf("column type %d", c))
}

type column struct {
	name string
	typ  colType
}

// table is how the writes of one table are merged and sent.
type table struct {
	name string
	cols []column // the columns a put writes, its key first
	key  int      // how many of cols are the key (owned tables: none)
	// conflict is the upsert's conflict target ("" for an owned table,
	// whose rows are inserted).
	conflict string
	// nothing: a row already there stays (ON CONFLICT DO NOTHING), rather
	// than being replaced.
	nothing bool
	// Owned tables: owner returns the owner of a put's row, and expand the
	// rows a delete of one owner removes, in delCols.
	owner   func(row []any) []any
	expand  func(owner []any) [][]any
	delCols []column
}

func (tb *table) owned() bool { return tb.owner != nil }

// keyCols are the columns a delete matches on.
func (tb *table) keyCols() []column {
	if tb.owned() {
		return tb.delCols
	}
	return tb.cols[:tb.key]
}

var (
	workflowsTable = &table{name: "workflows", key: 1, conflict: "(workflow_id)", cols: []column{
		{"workflow_id", colBytes}, {"record", colBytes}, {"running", colBool}, {"closed_at", colNullInt64}}}
	historyTable = &table{name: "history", key: 2, conflict: "(workflow_id, event_id)", cols: []column{
		{"workflow_id", colBytes}, {"event_id", colInt64}, {"event", colBytes}}}
	activitiesTable = &table{name: "activities", key: 2, conflict: "(workflow_id, activity_id)", cols: []column{
		{"workflow_id", colBytes}, {"activity_id", colBytes}, {"record", colBytes}, {"state", colInt16},
		{"activity_type", colBytes}, {"task_queue", colBytes}, {"dead_lettered_at", colNullInt64}}}
	activityIDsTable = &table{name: "activity_ids", key: 2, conflict: "(workflow_id, activity_id)", nothing: true, cols: []column{
		{"workflow_id", colBytes}, {"activity_id", colBytes}}}
	finishedTable = &table{name: "finished_activities", key: 2, conflict: "(workflow_id, activity_id)", cols: []column{
		{"workflow_id", colBytes}, {"activity_id", colBytes}, {"finished_at", colInt64}, {"record", colBytes}}}
	userTimersTable = &table{name: "user_timers", key: 2, conflict: "(workflow_id, timer_id)", cols: []column{
		{"workflow_id", colBytes}, {"timer_id", colBytes}, {"record", colBytes}}}
	latencyTable = &table{name: "latency", key: 1, conflict: "(activity_type)", cols: []column{
		{"activity_type", colBytes}, {"record", colBytes}}}
	latencyHoursTable = &table{name: "latency_hours", key: 3, conflict: "(length(activity_type), activity_type, hour, node)", cols: []column{
		{"activity_type", colBytes}, {"hour", colInt64}, {"node", colText}, {"record", colBytes}}}
	// A queue entry's owner is its record and kind: (workflow_id,
	// activity_id, kind).
	queueTable = &table{name: "queue",
		cols: []column{{"kind", colInt16}, {"task_queue", colBytes}, {"due", colInt64}, {"seq", colInt64},
			{"workflow_id", colBytes}, {"activity_id", colBytes}},
		owner:   func(row []any) []any { return []any{row[4], row[5], row[0]} },
		expand:  func(owner []any) [][]any { return [][]any{owner} },
		delCols: []column{{"workflow_id", colBytes}, {"activity_id", colBytes}, {"kind", colInt16}},
	}
	// A timer's owner is its record and the group of its kind (timerGroup):
	// (workflow_id, id, the group's first kind).
	timersTable = &table{name: "timers",
		cols: []column{{"due", colInt64}, {"kind", colInt16}, {"workflow_id", colBytes}, {"id", colBytes}},
		owner: func(row []any) []any {
			return []any{row[2], row[3], int16(timerGroup(engine.TimerKind(row[1].(int16)))[0])}
		},
		expand: func(owner []any) [][]any {
			g := timerGroup(engine.TimerKind(owner[2].(int16)))
			rows := make([][]any, len(g))
			for i, k := range g {
				rows[i] = []any{owner[0], owner[1], int16(k)}
			}
			return rows
		},
		delCols: []column{{"workflow_id", colBytes}, {"id", colBytes}, {"kind", colInt16}},
	}
)

// mergeOrder is the order the merged statements go in, one table after
// another (any order would do; a fixed one keeps them comparable).
var mergeOrder = []*table{workflowsTable, historyTable, activitiesTable, activityIDsTable, finishedTable,
	userTimersTable, latencyTable, latencyHoursTable, queueTable, timersTable}

// timerGroups are the kinds of timers a record owns, each group deleted
// together when the record is rewritten: an activity's, a workflow
// task's lease, a user timer.
var timerGroups = [][]engine.TimerKind{
	{engine.ActivityLeaseTimer, engine.ScheduleToStartTimer, engine.ScheduleToCloseTimer},
	{engine.WorkflowTaskLeaseTimer},
	{engine.UserTimer},
}

// timerGroup returns the group of k (a kind of no group is one alone).
func timerGroup(k engine.TimerKind) []engine.TimerKind {
	for _, g := range timerGroups {
		for _, x := range g {
			if x == k {
				return g
			}
		}
	}
	return []engine.TimerKind{k}
}

// queuedWrite is one row a transaction puts or deletes, waiting to go to
// the database.
type queuedWrite struct {
	what  string // the store call it is part of, for an error
	table *table
	del   bool
	// row: a put's every column, in table.cols order; a delete's key, or
	// an owned table's owner.
	row []any
}

// writeSet collects the writes of one store call.
type writeSet struct {
	what string
	ws   []queuedWrite
}

func (s *writeSet) put(tb *table, row ...any) {
	s.ws = append(s.ws, queuedWrite{what: s.what, table: tb, row: row})
}

func (s *writeSet) del(tb *table, key ...any) {
	s.ws = append(s.ws, queuedWrite{what: s.what, table: tb, del: true, row: key})
}

func (s *writeSet) insertEntry(e engine.QueueEntry) {
	s.put(queueTable, int16(e.Kind), b(e.Queue), nanos(e.Due), e.Seq, b(e.WorkflowID), b(e.ActivityID))
}

func (s *writeSet) deleteEntries(wf, id string, kind engine.TaskKind) {
	s.del(queueTable, b(wf), b(id), int16(kind))
}

func (s *writeSet) insertTimer(tm engine.Timer) {
	s.put(timersTable, nanos(tm.Due), int16(tm.Kind), b(tm.WorkflowID), b(tm.ID))
}

// deleteTimers deletes the timers of wf/id whose kinds are in the group of
// kind.
func (s *writeSet) deleteTimers(wf, id string, kind engine.TimerKind) {
	s.del(timersTable, b(wf), b(id), int16(timerGroup(kind)[0]))
}

// mergedWrite is what one merged statement writes: rows of one table,
// put or deleted (an owned table's deletes expanded to the rows of
// delCols they match), and the writes they came from.
type mergedWrite struct {
	table *table
	del   bool
	rows  [][]any
	whats []string // distinct, in order
}

// mergeWrites merges ws, in the order they were made, into the writes of
// the fewest statements that have the same effect (see above): for each
// table of mergeOrder with writes, its deletes, then its puts.
func mergeWrites(ws []queuedWrite) []mergedWrite {
	type owned struct {
		del     int   // the last delete, -1: none
		inserts []int // the puts after it
	}
	type tableWrites struct {
		keys  []string       // keys or owners, in order of their first write
		last  map[string]int // keyed: the key's last write
		owned map[string]*owned
	}
	byTable := map[*table]*tableWrites{}
	for i, w := range ws {
		tw := byTable[w.table]
		if tw == nil {
			tw = &tableWrites{last: map[string]int{}, owned: map[string]*owned{}}
			byTable[w.table] = tw
		}
		if !w.table.owned() {
			k := keyOf(w.row[:w.table.key])
			if _, seen := tw.last[k]; !seen {
				tw.keys = append(tw.keys, k)
			}
			tw.last[k] = i
			continue
		}
		owner := w.row
		if !w.del {
			owner = w.table.owner(w.row)
		}
		k := keyOf(owner)
		o := tw.owned[k]
		if o == nil {
			o = &owned{del: -1}
			tw.owned[k] = o
			tw.keys = append(tw.keys, k)
		}
		if w.del {
			o.del, o.inserts = i, nil
		} else {
			o.inserts = append(o.inserts, i)
		}
	}
	var out []mergedWrite
	for _, tb := range mergeOrder {
		tw := byTable[tb]
		if tw == nil {
			continue
		}
		dels, puts := &mergedWrite{table: tb, del: true}, &mergedWrite{table: tb}
		for _, k := range tw.keys {
			if !tb.owned() {
				w := ws[tw.last[k]]
				m := puts
				if w.del {
					m = dels
				}
				m.add(w.what, w.row)
				continue
			}
			o := tw.owned[k]
			if o.del >= 0 {
				w := ws[o.del]
				for _, row := range tb.expand(w.row) {
					dels.add(w.what, row)
				}
			}
			for _, i := range o.inserts {
				puts.add(ws[i].what, ws[i].row)
			}
		}
		for _, m := range []*mergedWrite{dels, puts} {
			if len(m.rows) > 0 {
				out = append(out, *m)
			}
		}
	}
	return out
}

func (m *mergedWrite) add(what string, row []any) {
	m.rows = append(m.rows, row)
	if n := len(m.whats); n == 0 || m.whats[n-1] != what {
		for _, w := range m.whats {
			if w == what {
				return
			}
		}
		m.whats = append(m.whats, what)
	}
}

// keyOf encodes the values of a key or owner so that two are equal
// exactly when their values are.
func keyOf(vals []any) string {
	var k []byte
	for _, v := range vals {
		switch v := v.(type) {
		case []byte:
			k = binary.AppendUvarint(k, uint64(len(v)))
			k = append(k, v...)
		case string:
			k = binary.AppendUvarint(k, uint64(len(v)))
			k = append(k, v...)
		case int64:
			k = binary.BigEndian.AppendUint64(k, uint64(v))
		case int16:
			k = binary.BigEndian.AppendUint16(k, uint16(v))
		default:
			panic(fmt.Sprintf("key value of type %T", v))
		}
	}
	return string(k)
}

// what names the writes m carries, for an error: the first few, and how
// many more.
func (m *mergedWrite) what() string {
	const named = 3
	if len(m.whats) <= named {
		return strings.Join(m.whats, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(m.whats[:named], ", "), len(m.whats)-named)
}

// statement returns the SQL of m and its arguments: for one row, a
// single-row statement with a parameter per column; for more, one array
// per column, unnested.
func (m *mergedWrite) statement() (string, []any) {
	tb := m.table
	cols := tb.cols
	if m.del {
		cols = tb.keyCols()
	}
	if len(m.rows) == 1 {
		if m.del {
			return tb.sqls().deleteOne, m.rows[0]
		}
		return tb.sqls().putOne, m.rows[0]
	}
	args := make([]any, len(cols))
	for i, c := range cols {
		args[i] = columnArray(c.typ, m.rows, i)
	}
	if m.del {
		return tb.sqls().deleteMany, args
	}
	return tb.sqls().putMany, args
}

// columnArray returns column i of rows as a slice of its Go type, one
// array parameter.
func columnArray(typ colType, rows [][]any, i int) any {
	switch typ {
	case colBytes:
		return columnOf[[]byte](rows, i)
	case colInt64:
		return columnOf[int64](rows, i)
	case colNullInt64:
		return columnOf[*int64](rows, i)
	case colInt16:
		return columnOf[int16](rows, i)
	case colText:
		return columnOf[string](rows, i)
	case colBool:
		return columnOf[bool](rows, i)
	}
	panic(fmt.Sprintf("column type %d", typ))
}

func columnOf[T any](rows [][]any, i int) []T {
	out := make([]T, len(rows))
	for j, row := range rows {
		out[j] = row[i].(T)
	}
	return out
}

// tableSQL are the statements of one table.
type tableSQL struct {
	putOne, putMany, deleteOne, deleteMany string
}

var tableSQLs = func() map[*table]*tableSQL {
	m := map[*table]*tableSQL{}
	for _, tb := range mergeOrder {
		m[tb] = tb.buildSQL()
	}
	return m
}()

func (tb *table) sqls() *tableSQL { return tableSQLs[tb] }

func (tb *table) buildSQL() *tableSQL {
	names := func(cols []column) string {
		ns := make([]string, len(cols))
		for i, c := range cols {
			ns[i] = c.name
		}
		return strings.Join(ns, ", ")
	}
	params := func(cols []column, array bool) string {
		ps := make([]string, len(cols))
		for i, c := range cols {
			ps[i] = fmt.Sprintf("$%d", i+1)
			if array {
				ps[i] += "::" + c.typ.sqlType() + "[]"
			}
		}
		return strings.Join(ps, ", ")
	}
	var onConflict string
	switch {
	case tb.conflict == "":
	case tb.nothing:
		onConflict = " ON CONFLICT " + tb.conflict + " DO NOTHING"
	default:
		sets := make([]string, 0, len(tb.cols)-tb.key)
		for _, c := range tb.cols[tb.key:] {
			sets = append(sets, c.name+" = excluded."+c.name)
		}
		onConflict = " ON CONFLICT " + tb.conflict + " DO UPDATE SET " + strings.Join(sets, ", ")
	}
	s := &tableSQL{
		putOne:  fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)%s", tb.name, names(tb.cols), params(tb.cols, false), onConflict),
		putMany: fmt.Sprintf("INSERT INTO %s (%s) SELECT * FROM unnest(%s)%s", tb.name, names(tb.cols), params(tb.cols, true), onConflict),
	}
	key := tb.keyCols()
	if len(key) > 0 {
		eq, join := make([]string, len(key)), make([]string, len(key))
		for i, c := range key {
			eq[i] = fmt.Sprintf("%s = $%d", c.name, i+1)
			join[i] = fmt.Sprintf("%s = d.%s", c.name, c.name)
		}
		s.deleteOne = fmt.Sprintf("DELETE FROM %s WHERE %s", tb.name, strings.Join(eq, " AND "))
		// The rows are found one index probe per key (the subquery kept
		// apart by OFFSET 0) and deleted by their row ids: a join of the
		// table to the arrays is planned as a sequential scan and a hash
		// while the table is small, and scans every dead row it holds.
		s.deleteMany = fmt.Sprintf("DELETE FROM %s t USING (SELECT x.ctid FROM unnest(%s) AS d (%s), "+
			"LATERAL (SELECT ctid FROM %s WHERE %s OFFSET 0) x) k WHERE t.ctid = k.ctid",
			tb.name, params(key, true), names(key), tb.name, strings.Join(join, " AND "))
	}
	return s
}

// queueMerged appends to batch the statements of ws merged, each failing
// with the names of the writes it carries.
func queueMerged(batch *pgx.Batch, ws []queuedWrite) {
	for _, m := range mergeWrites(ws) {
		sql, args := m.statement()
		what := m.what()
		batch.Queue(sql, args...).Fn = func(br pgx.BatchResults) error {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		}
	}
}
