package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgCounters are PostgreSQL's cumulative statistics a run reads before and
// after: the database's transactions and rows written, and the server's
// WAL (pg_stat_wal is one row for the whole server; the benchmark's
// database is the only one at work).
type pgCounters struct {
	commits, rollbacks      int64
	inserted, updated, gone int64 // tup_inserted, tup_updated, tup_deleted
	walRecords, walBytes    int64
	walWrites, walSyncs     int64
	walWriteMs, walSyncMs   float64 // with track_wal_io_timing only
}

// counters reads them. A backend sends its counts to the statistics when it
// goes idle, at most once a second, and when it exits: read after the
// daemons have closed their connections, they are complete.
func (p *pgDatabase) counters(tb testing.TB) pgCounters {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.server.DSN("postgres"))
	if err != nil {
		tb.Fatalf("statistics: %v", err)
	}
	defer conn.Close(context.Background())
	var c pgCounters
	err = conn.QueryRow(ctx, `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted
		FROM pg_stat_database WHERE datname = $1`, p.dbName()).
		Scan(&c.commits, &c.rollbacks, &c.inserted, &c.updated, &c.gone)
	if err != nil {
		tb.Fatalf("pg_stat_database: %v", err)
	}
	err = conn.QueryRow(ctx, `SELECT wal_records, wal_bytes::bigint, wal_write, wal_sync, wal_write_time, wal_sync_time FROM pg_stat_wal`).
		Scan(&c.walRecords, &c.walBytes, &c.walWrites, &c.walSyncs, &c.walWriteMs, &c.walSyncMs)
	if err != nil {
		tb.Fatalf("pg_stat_wal: %v", err)
	}
	return c
}

// report reports what a run of n activities cost the database, from the
// counters before and after it.
func (c pgCounters) report(b *testing.B, before pgCounters, n int) {
	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(c.commits-before.commits+c.rollbacks-before.rollbacks), "db-xacts/activity")
	b.ReportMetric(per(c.walSyncs-before.walSyncs), "wal-syncs/activity")
	b.ReportMetric(per(c.walBytes-before.walBytes), "wal-B/activity")
	if b.N == 1 {
		return // the first run of one activity, which the migrations' statistics swamp
	}
	b.Logf("database per activity: %.2f commits, %.3f rollbacks; rows %.2f inserted, %.2f updated, %.2f deleted; "+
		"WAL %.1f records, %.0f bytes, %.3f writes, %.3f syncs",
		per(c.commits-before.commits), per(c.rollbacks-before.rollbacks),
		per(c.inserted-before.inserted), per(c.updated-before.updated), per(c.gone-before.gone),
		per(c.walRecords-before.walRecords), per(c.walBytes-before.walBytes),
		per(c.walWrites-before.walWrites), per(c.walSyncs-before.walSyncs))
	if syncs := c.walSyncs - before.walSyncs; syncs > 0 && c.walSyncMs > before.walSyncMs {
		b.Logf("WAL: %.3f ms per sync, %.1f µs of sync per activity; %.1f µs of write per activity",
			(c.walSyncMs-before.walSyncMs)/float64(syncs), 1000*(c.walSyncMs-before.walSyncMs)/float64(n),
			1000*(c.walWriteMs-before.walWriteMs)/float64(n))
	}
}

// pgProfile is what -bench.pgprofile collects during a run: the
// statements (pg_stat_statements) and the backends' wait events, sampled.
type pgProfile struct {
	db   *pgDatabase
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	samples int
	waits   map[string]int // "state wait_event_type:wait_event" → samples

	backends []int32 // the client backends connected at the end
}

// startPGProfile resets pg_stat_statements and starts sampling the wait
// events of the database's client backends every 5 ms.
func startPGProfile(b *testing.B, db *pgDatabase) *pgProfile {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db.server.DSN("postgres"))
	if err != nil {
		b.Fatalf("profile: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		conn.Close(ctx)
		b.Fatalf("pg_stat_statements (-bench.pgprofile): %v", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_stat_statements_reset()"); err != nil {
		conn.Close(ctx)
		b.Fatalf("pg_stat_statements_reset: %v", err)
	}
	p := &pgProfile{db: db, stop: make(chan struct{}), done: make(chan struct{}), waits: map[string]int{}}
	go func() {
		defer close(p.done)
		defer conn.Close(context.Background())
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			rows, err := conn.Query(ctx, `SELECT coalesce(state, ''), coalesce(wait_event_type, ''), coalesce(wait_event, '')
				FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' AND pid <> pg_backend_pid()`, db.dbName())
			if err != nil {
				return
			}
			p.mu.Lock()
			p.samples++
			for rows.Next() {
				var state, typ, ev string
				if rows.Scan(&state, &typ, &ev) == nil {
					key := state
					if typ != "" {
						key += " " + typ + ":" + ev
					}
					p.waits[key]++
				}
			}
			p.mu.Unlock()
			rows.Close()
		}
	}()
	return p
}

// end stops sampling and notes the database's client backends still
// connected, for a reader who counts their system calls with perf.
func (p *pgProfile) end(b *testing.B) {
	close(p.stop)
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.db.server.DSN("postgres"))
	if err != nil {
		b.Fatalf("profile: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' ORDER BY pid`, p.db.dbName())
	if err != nil {
		b.Fatalf("pg_stat_activity: %v", err)
	}
	if p.backends, err = pgx.CollectRows(rows, pgx.RowTo[int32]); err != nil {
		b.Fatalf("pg_stat_activity: %v", err)
	}
}

// report prints the statements by total time, with calls and time per
// activity, and the backends' states and waits as shares of the samples.
func (p *pgProfile) report(b *testing.B, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.db.server.DSN("postgres"))
	if err != nil {
		b.Fatalf("profile: %v", err)
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT calls, total_exec_time, rows, regexp_replace(query, '\s+', ' ', 'g')
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = $1)
		ORDER BY total_exec_time DESC`, p.db.dbName())
	if err != nil {
		b.Fatalf("pg_stat_statements: %v", err)
	}
	type stmt struct {
		calls, rows int64
		ms          float64
		query       string
	}
	var stmts []stmt
	var calls int64
	var ms float64
	for rows.Next() {
		var s stmt
		if err := rows.Scan(&s.calls, &s.ms, &s.rows, &s.query); err != nil {
			b.Fatal(err)
		}
		stmts = append(stmts, s)
		calls += s.calls
		ms += s.ms
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	var out strings.Builder
	fmt.Fprintf(&out, "statements: %.2f per activity, %.1f µs of execution per activity (pg_stat_statements)\n", float64(calls)/float64(n), 1000*ms/float64(n))
	fmt.Fprintf(&out, "client backends at the end: %v\n", p.backends)
	fmt.Fprintf(&out, "%8s %9s %8s %7s  %s\n", "calls/a", "µs/call", "µs/a", "rows/c", "statement")
	for i, s := range stmts {
		if i == 25 {
			fmt.Fprintf(&out, "… %d more\n", len(stmts)-i)
			break
		}
		q := s.query
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		fmt.Fprintf(&out, "%8.3f %9.1f %8.1f %7.1f  %s\n", float64(s.calls)/float64(n), 1000*s.ms/float64(s.calls),
			1000*s.ms/float64(n), float64(s.rows)/float64(s.calls), q)
	}
	p.mu.Lock()
	waits, samples := maps.Clone(p.waits), p.samples
	p.mu.Unlock()
	var total int
	for _, v := range waits {
		total += v
	}
	keys := slices.SortedFunc(maps.Keys(waits), func(a, b string) int { return cmp.Compare(waits[b], waits[a]) })
	fmt.Fprintf(&out, "client backends, %d samples every 5ms, %.1f backends on average; share of backend-samples:\n",
		samples, float64(total)/float64(max(samples, 1)))
	for _, k := range keys {
		fmt.Fprintf(&out, "%6.1f%%  %s\n", 100*float64(waits[k])/float64(total), k)
	}
	// Longer than the ten lines a benchmark's log keeps.
	fmt.Printf("--- pgprofile %s, %d activities\n%s", b.Name(), n, out.String())
}
