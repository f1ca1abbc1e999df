package engine

// A transition reads the records it changes, each with its own read: on a
// store whose reads cost a round trip (PostgreSQL), a batch of completions
// spent one per completion. A request may say up front which records it
// will read (request.reads); before the batch's transitions run, a store
// that implements Prefetcher reads them all at once into its transaction,
// and the transitions' own reads find them there. What a transition reads,
// and what it finds, is the same either way: a prefetch only moves the
// reads earlier within the one transaction, which sees one snapshot.

// RecordKey names a record a transition will read: an activity, or with
// ActivityID empty, a workflow.
type RecordKey struct {
	WorkflowID, ActivityID string
}

// Prefetcher is a Tx that reads many records in one go. Prefetch reads the
// records keys name and keeps them, and the absence of those that do not
// exist, for the transaction's later reads, which then answer exactly what
// they would have read themselves. A key it cannot read (an id the store
// refuses) it leaves to the read that would refuse it. An error leaves the
// transaction unusable, as a failed read does.
type Prefetcher interface {
	Prefetch(keys []RecordKey) error
}

// tokenReads returns the records a transition on an activity task token
// reads: the activity, and its workflow when withWorkflow. A token that does
// not decode reads nothing (the transition refuses it).
func tokenReads(token []byte, withWorkflow bool) []RecordKey {
	t, err := DecodeToken(token)
	if err != nil || t.GetActivityId() == "" {
		return nil
	}
	keys := []RecordKey{{WorkflowID: t.GetWorkflowId(), ActivityID: t.GetActivityId()}}
	if withWorkflow {
		keys = append(keys, RecordKey{WorkflowID: t.GetWorkflowId()})
	}
	return keys
}

// batchReads returns the records the requests of a batch said they read.
func batchReads(batch []*request) []RecordKey {
	n := 0
	for _, r := range batch {
		n += len(r.reads)
	}
	if n == 0 {
		return nil
	}
	keys := make([]RecordKey, 0, n)
	for _, r := range batch {
		keys = append(keys, r.reads...)
	}
	return keys
}
