package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tinyllm/durable/engine"
	"github.com/tinyllm/durable/internal/testpg"
	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"github.com/tinyllm/durable/store/storetest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testpg.Cleanup()
	os.Exit(code)
}

// open opens a store on dsn, closed when the test ends.
func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(dsn, Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestStoreConformance runs the store suite on a database of its own per
// case, reopened (a new connection pool on the same database) at the end
// of every write phase. After each case the rows derived from the records
// must be exactly what the records imply.
//
// postgres-pages-of-2 runs it again with lists read two rows per query, so
// that every list's query for the rows after a page is run (the suite's
// lists are shorter than a page of the default size).
func TestStoreConformance(t *testing.T) {
	t.Parallel()
	for name, size := range map[string]int{"postgres": defaultPageSize, "postgres-pages-of-2": 2} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			openPaged := func(t *testing.T, dsn string) *Store {
				s := open(t, dsn)
				s.pageSize = size
				return s
			}
			storetest.Run(t, func(t *testing.T) storetest.Opened {
				dsn := testpg.Database(t)
				return storetest.Opened{
					Store: openPaged(t, dsn),
					ReopenFunc: func(t *testing.T, s engine.Store) engine.Store {
						if err := s.Close(); err != nil {
							t.Fatalf("close: %v", err)
						}
						return openPaged(t, dsn)
					},
					CheckFunc: checkRows,
					MaxIDLen:  maxPartLen, MaxRecordSize: maxRecordSize,
				}
			})
		})
	}
}

func TestStore_UpdateRetriesConflicts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		conflicts int // how many attempts a concurrent writer spoils
		wantCalls int
		wantRetry bool // Update ends with the conflict
		wantCount int64
	}{
		{"OneConflict", 1, 2, false, 101},
		{"AlwaysConflicting", 1000, maxAttempts, true, maxAttempts * 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, testpg.Database(t))
			calls := 0
			err := s.Update(func(tx engine.Tx) error {
				calls++
				n, err := tx.Counter()
				if err != nil {
					return err
				}
				if calls <= tt.conflicts {
					// Another transaction commits a change to what this one read.
					if err := s.Update(func(tx engine.Tx) error { return tx.SetCounter(n + 100) }); err != nil {
						return err
					}
				}
				return tx.SetCounter(n + 1)
			})
			if retryable(err) != tt.wantRetry || !tt.wantRetry && err != nil {
				t.Fatalf("Update = %v, want a conflict: %v", err, tt.wantRetry)
			}
			if calls != tt.wantCalls {
				t.Errorf("fn ran %d times, want %d", calls, tt.wantCalls)
			}
			s.View(func(tx engine.Tx) error {
				if n, _ := tx.Counter(); n != tt.wantCount {
					t.Errorf("counter = %d, want %d", n, tt.wantCount)
				}
				return nil
			})
		})
	}
}

// TestStore_ConcurrentUpdatesLoseNothing runs writers that each commit
// their own records and bump the shared counter, as the engine does. No
// update may be lost: the counter equals the number of successful updates,
// read through a new pool.
func TestStore_ConcurrentUpdatesLoseNothing(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	s := open(t, dsn)
	const writers, each = 8, 25
	var (
		mu        sync.Mutex
		succeeded int64
		wg        sync.WaitGroup
	)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(func(tx engine.Tx) error {
					n, err := tx.Counter()
					if err != nil {
						return err
					}
					a := storetest.NewActivity(fmt.Sprintf("wf-%d", w), fmt.Sprint(i), durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, time.Duration(i)*time.Second, n)
					if err := tx.PutActivity(a); err != nil {
						return err
					}
					return tx.SetCounter(n + 1)
				})
				if retryable(err) {
					continue // bounded retries ran out under contention
				}
				if err != nil {
					t.Errorf("update: %v", err)
					return
				}
				mu.Lock()
				succeeded++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d of %d updates committed", succeeded, writers*each)
	s.Close()
	open(t, dsn).View(func(tx engine.Tx) error {
		n, err := tx.Counter()
		if err != nil || n != succeeded {
			t.Errorf("counter = %d, %v; want %d successful updates", n, err, succeeded)
		}
		count := 0
		tx.ScanActivities(func(*durablev1.ActivityRecord) bool { count++; return true })
		if int64(count) != succeeded {
			t.Errorf("%d activities, want %d", count, succeeded)
		}
		var queued int64
		tx.ActivityCounts(func(_ string, _ durablev1.ActivityState, n int64) bool { queued += n; return true })
		if queued != succeeded {
			t.Errorf("activity counts add up to %d, want %d", queued, succeeded)
		}
		return nil
	})
}

// TestOpen_MigratesOnceWhenNodesStartTogether opens one empty database from
// several stores at once, as nodes starting together do.
func TestOpen_MigratesOnceWhenNodesStartTogether(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(dsn, Options{MaxConns: 2})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, newest int
	if err := conn.QueryRow(context.Background(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&rows, &newest); err != nil {
		t.Fatal(err)
	}
	if rows != len(ms) || newest != len(ms) {
		t.Errorf("schema_migrations has %d rows up to version %d, want %d", rows, newest, len(ms))
	}
}

func TestOpen_RefusesASchemaNewerThanItKnows(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	open(t, dsn).Close()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "INSERT INTO schema_migrations (version) VALUES (999)"); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dsn, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of a database at schema version 999 succeeded")
	}
	if !strings.Contains(err.Error(), "version 999") {
		t.Errorf("Open = %v, want it to name the database's version", err)
	}
}

func TestMigrations_AreNumberedFromOneWithoutGaps(t *testing.T) {
	t.Parallel()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		t.Fatal("no migrations embedded")
	}
}

// TestStore_LosesNothingAcknowledgedWhenTheDatabaseCrashes commits
// updates one by one, SIGKILLs every process of the database, restarts it,
// and reads: every update Update acknowledged is there, with its derived
// rows. The store that was open through the crash works again once the
// database is back, without being reopened.
func TestStore_LosesNothingAcknowledgedWhenTheDatabaseCrashes(t *testing.T) {
	t.Parallel()
	srv := testpg.New(t)
	dsn := srv.CreateDatabase(t)
	s := open(t, dsn)
	const updates = 30
	for i := range updates {
		err := s.Update(func(tx engine.Tx) error {
			a := storetest.NewActivity("wf", fmt.Sprint(i), durablev1.ActivityState_ACTIVITY_STATE_SCHEDULED, time.Duration(i)*time.Second, int64(i))
			if err := tx.PutActivity(a); err != nil {
				return err
			}
			return tx.SetCounter(int64(i + 1))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	srv.Kill(t)
	srv.Restart(t)

	after := open(t, dsn)
	after.View(func(tx engine.Tx) error {
		if n, err := tx.Counter(); err != nil || n != updates {
			t.Errorf("counter = %d, %v; want %d", n, err, updates)
		}
		es, err := tx.Queued(engine.ActivityTask, "q", 100)
		if err != nil || len(es) != updates {
			t.Errorf("queue holds %d entries, %v; want %d", len(es), err, updates)
		}
		return nil
	})
	checkRows(t, after)

	// The pool drops the connections the crash broke and opens new ones.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.Update(func(tx engine.Tx) error { return tx.SetCounter(updates + 1) })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store open through the crash still fails 30s after the restart: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestStore_UpdateJudgesAnAttemptByItsFirstFailure: a statement that fails
// aborts the transaction, and the statements after it fail only with
// "transaction is aborted" (25P02). When fn goes on past the first failure,
// Update must still see that failure: run the transaction again for a
// serialization failure, report the failure itself otherwise.
func TestStore_UpdateJudgesAnAttemptByItsFirstFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		code      string // SQLSTATE of the failure fn swallows on its first run
		wantCalls int
		wantCode  string // of the error Update returns; "" for none
	}{
		{"SerializationFailureRunsAgain", "40001", 2, ""},
		{"OtherFailureIsReported", "22012", 1, "22012"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := open(t, testpg.Database(t))
			calls := 0
			err := s.Update(func(etx engine.Tx) error {
				calls++
				if calls == 1 {
					raise := fmt.Sprintf("DO $$ BEGIN RAISE EXCEPTION 'spoiled' USING ERRCODE = '%s'; END $$", tt.code)
					_, _ = etx.(*tx).q.Exec(context.Background(), raise) // swallowed, as a history append's is
				}
				return etx.SetCounter(7)
			})
			var pe *pgconn.PgError
			switch {
			case tt.wantCode == "" && err != nil:
				t.Fatalf("Update = %v, want it to succeed on a second run", err)
			case tt.wantCode != "" && (!errors.As(err, &pe) || pe.Code != tt.wantCode):
				t.Fatalf("Update = %v, want the swallowed failure %s", err, tt.wantCode)
			}
			if calls != tt.wantCalls {
				t.Errorf("fn ran %d times, want %d", calls, tt.wantCalls)
			}
		})
	}
}
