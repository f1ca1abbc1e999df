package engine

import (
	"errors"
	"math"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Attempt durations are counted in log-scale buckets: bucket i holds
// durations in [2^(i/4) µs, 2^((i+1)/4) µs), so a percentile is exact to
// within 19 % and the record stays small whatever the traffic.
const latencyBuckets = 4 * 42 // up to 2^42 µs, about 51 days

func latencyBucket(d time.Duration) int {
	us := float64(d) / float64(time.Microsecond)
	if us < 1 {
		return 0
	}
	i := int(math.Floor(4 * math.Log2(us)))
	return min(max(i, 0), latencyBuckets-1)
}

// bucketUpper is the upper bound of bucket i.
func bucketUpper(i int) time.Duration {
	return time.Duration(math.Pow(2, float64(i+1)/4) * float64(time.Microsecond))
}

// Attempt durations are kept per activity type and per hour the attempt
// ended in, so that stats can be asked for a window (the last 7 days, say)
// and one write per attempt still does it. Hours older than the stats
// retention are folded into the type's all-time record by a janitor; the
// all-time figures are that record plus the hours kept.

// DefaultStatsRetention is how long hourly latency records are kept unless
// Options.StatsRetention says otherwise.
const DefaultStatsRetention = 30 * 24 * time.Hour

const (
	// statsPurgeEvery is how often the janitor folds expired hours.
	statsPurgeEvery = time.Hour
	// statsPurgeBatch bounds the hourly records one fold transaction takes.
	statsPurgeBatch = 256
)

// hourOf is the start of the hour t falls in, in UTC.
func hourOf(t time.Time) time.Time { return t.UTC().Truncate(time.Hour) }

// latencySample is an attempt that ended at a time after d, as a
// transition notes it (change.latency) for the batch to count.
type latencySample struct {
	activityType string
	at           time.Time
	d            time.Duration
	failed       bool
}

// latencyKey is the record a sample is counted in: its type's, of the hour
// it ended in.
type latencyKey struct {
	activityType string
	hour         time.Time
}

// countLatency adds the batch's attempts to their types' hourly records: one
// read and one write per type and hour, not per attempt (a batch of 32
// completions of one type read, decoded, encoded and wrote a 1.4 KB record 32
// times; about 3 % of the daemon's CPU at full throughput). The samples come
// from the batch's changes, so a batch that aborts, and is retried in parts,
// counts each attempt once, in the part that commits. Stats are best effort:
// a record that cannot be read or written is skipped, as before.
func countLatency(tx Tx, changes []*change) {
	var sums map[latencyKey]*durablev1.LatencyRecord
	var order []latencyKey
	for _, c := range changes {
		for _, s := range c.latency {
			k := latencyKey{s.activityType, hourOf(s.at)}
			l, ok := sums[k]
			if !ok {
				if sums == nil {
					sums = map[latencyKey]*durablev1.LatencyRecord{}
				}
				l = &durablev1.LatencyRecord{Buckets: make([]int64, latencyBuckets)}
				sums[k] = l
				order = append(order, k)
			}
			addSample(l, s.d, s.failed)
		}
	}
	for _, k := range order {
		l, err := tx.GetLatencyHour(k.activityType, k.hour)
		if errors.Is(err, ErrNotFound) {
			l, err = &durablev1.LatencyRecord{ActivityType: k.activityType, Hour: ts(k.hour)}, nil
		}
		if err != nil {
			continue
		}
		mergeLatency(l, sums[k])
		_ = tx.PutLatencyHour(l)
	}
}

// addSample counts one attempt of d in l.
func addSample(l *durablev1.LatencyRecord, d time.Duration, failed bool) {
	if len(l.Buckets) < latencyBuckets {
		l.Buckets = append(l.Buckets, make([]int64, latencyBuckets-len(l.Buckets))...)
	}
	l.Buckets[latencyBucket(d)]++
	l.Attempts++
	if failed {
		l.Failures++
	}
	l.MaxNs = max(l.MaxNs, int64(d))
}

// mergeLatency adds the counts of src to dst.
func mergeLatency(dst, src *durablev1.LatencyRecord) {
	if n := len(src.GetBuckets()); len(dst.Buckets) < n {
		dst.Buckets = append(dst.Buckets, make([]int64, n-len(dst.Buckets))...)
	}
	for i, n := range src.GetBuckets() {
		dst.Buckets[i] += n
	}
	dst.Attempts += src.GetAttempts()
	dst.Failures += src.GetFailures()
	dst.MaxNs = max(dst.MaxNs, src.GetMaxNs())
}

// rememberOptions keeps the options of the type's newest activity in its
// all-time record, written only when they differ from the ones there, so
// that scheduling the same options again costs one read.
func rememberOptions(tx Tx, in *durablev1.PendingActivity) error {
	l, err := tx.GetLatency(in.GetActivityType())
	if errors.Is(err, ErrNotFound) {
		l, err = &durablev1.LatencyRecord{ActivityType: in.GetActivityType()}, nil
	}
	if err != nil {
		return err
	}
	if proto.Equal(l.GetLastOptions(), in.GetOptions()) {
		return nil
	}
	l.LastOptions = proto.CloneOf(in.GetOptions())
	return tx.PutLatency(l)
}

// statsJanitor folds hourly records past their retention into the all-time
// records, at start and then every statsPurgeEvery.
func (e *Engine) statsJanitor() {
	defer close(e.statsDone)
	for {
		if !e.waitWritable() {
			return
		}
		if err := e.foldExpiredHours(); err != nil && !errors.Is(err, ErrClosed) && !refused(err) {
			e.opts.Logger.Error("folding expired latency hours", "err", err)
		}
		select {
		case <-e.closeCh:
			return
		case <-e.clock.After(statsPurgeEvery):
		}
	}
}

// foldExpiredHours moves every hourly record older than the retention into
// its type's all-time record, a bounded batch per transaction: each hour is
// added and deleted in the same transaction, so no attempt is counted twice
// or lost. Not synced: a crash only means the next run folds them.
func (e *Engine) foldExpiredHours() error {
	cutoff := hourOf(e.now()).Add(-e.opts.StatsRetention)
	for {
		var n int
		err := e.update(func(tx Tx, c *change) error {
			old, err := tx.LatencyHoursBefore(cutoff, statsPurgeBatch)
			if err != nil {
				return err
			}
			n = len(old)
			for _, h := range old {
				l, err := tx.GetLatency(h.GetActivityType())
				if errors.Is(err, ErrNotFound) {
					l, err = &durablev1.LatencyRecord{ActivityType: h.GetActivityType()}, nil
				}
				if err != nil {
					return err
				}
				mergeLatency(l, h)
				if err := tx.PutLatency(l); err != nil {
					return err
				}
				if err := tx.DeleteLatencyHour(h.GetActivityType(), h.GetHour().AsTime()); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil || n < statsPurgeBatch {
			return err
		}
	}
}

// Percentile returns the duration below which a fraction q of the recorded
// attempts fell, as the upper bound of its bucket, capped at the maximum seen.
func Percentile(l *durablev1.LatencyRecord, q float64) time.Duration {
	if l.GetAttempts() == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(l.GetAttempts())))
	var seen int64
	for i, n := range l.GetBuckets() {
		seen += n
		if seen >= rank {
			return min(bucketUpper(i), time.Duration(l.GetMaxNs()))
		}
	}
	return time.Duration(l.GetMaxNs())
}

func statsOf(l *durablev1.LatencyRecord) *durablev1.ActivityTypeStats {
	return &durablev1.ActivityTypeStats{
		ActivityType: l.GetActivityType(),
		Attempts:     l.GetAttempts(),
		Failures:     l.GetFailures(),
		P50:          durationpb.New(Percentile(l, 0.50)),
		P95:          durationpb.New(Percentile(l, 0.95)),
		P99:          durationpb.New(Percentile(l, 0.99)),
		Max:          durationpb.New(time.Duration(l.GetMaxNs())),
	}
}
