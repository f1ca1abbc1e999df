package engine

import (
	"errors"
	"math"
	"time"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
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

func recordLatency(tx Tx, activityType string, d time.Duration, failed bool) error {
	l, err := tx.GetLatency(activityType)
	if errors.Is(err, ErrNotFound) {
		l, err = &durablev1.LatencyRecord{ActivityType: activityType}, nil
	}
	if err != nil {
		return err
	}
	if len(l.Buckets) < latencyBuckets {
		l.Buckets = append(l.Buckets, make([]int64, latencyBuckets-len(l.Buckets))...)
	}
	l.Buckets[latencyBucket(d)]++
	l.Attempts++
	if failed {
		l.Failures++
	}
	l.MaxNs = max(l.MaxNs, int64(d))
	return tx.PutLatency(l)
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
