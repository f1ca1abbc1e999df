package tui

import (
	"fmt"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// outageBackend is the tour's outage as the home view meets it: dated order
// ids long enough to be cut, work overdue because nobody polls its queue, a
// lease run past its deadline, a backfill checkpointing, a retry climbing
// and dead letters of a gateway that answers 504.
func outageBackend() *fakeBackend {
	f := fixtureBackend()
	f.scripts = []script{{events: snapshot(outageActivities(), nil)}}
	return f
}

func outageActivities() []*durablev1.PendingActivity {
	var out []*durablev1.PendingActivity
	for i, late := range []time.Duration{42 * time.Second, 3*time.Minute + 5*time.Second, 5 * time.Second} {
		a := act(fmt.Sprintf("order-2026-11-30-%04d", 1200+i), "1", "ChargeCard", stScheduled, 1, 5)
		a.TaskQueue = "payments-eu"
		a.NextAttemptTime = at(-late)
		out = append(out, a)
	}
	stale := act("backfill-2026-11-30-customers", "7", "CopyChunk", stStarted, 2, 8)
	stale.LeaseDeadline = at(-8 * time.Second)
	stale.LastHeartbeatTime = at(-38 * time.Second)
	stale.HeartbeatDetails = []byte(`{"next_index": 5600, "items": [5598, 5599], "file": "s3://exports/customers/2026-11-30/part-0007.csv"}`)
	stale.LastFailure = fail("HeartbeatTimeout", "no heartbeat for 30s from worker backfill-3")
	out = append(out, stale)

	retry := act("order-2026-11-30-0977", "2", "ReserveStock", stRetrying, 4, 5)
	retry.NextAttemptTime = at(6 * time.Second)
	retry.LastFailure = fail("InventoryLocked", "row lock held by txn 88123 for 12.4s; retry after backoff")
	out = append(out, retry)

	running := act("backfill-2026-11-30-orders", "3", "CopyChunk", stStarted, 1, 8)
	running.LeaseDeadline = at(24 * time.Second)
	running.LastHeartbeatTime = at(-2 * time.Second)
	running.HeartbeatDetails = []byte(`{"next_index": 12800, "items": [12797, 12798, 12799, 12800], "rate": 410.5}`)
	out = append(out, running)

	for i := 0; i < 4; i++ {
		d := act(fmt.Sprintf("order-2026-11-30-%04d", 988+i), "1", "ChargeCard", stDead, 5, 5)
		d.DeadLetteredTime = at(-time.Duration(i+1) * time.Minute)
		d.LastFailure = fail("GatewayTimeout", "POST https://gateway.example/v2/charges answered 504 after 30s")
		out = append(out, d)
	}
	return out
}
