package engine

// CloseWaiters is how many callers wait on this engine for workflow id to
// close: tests of another node closing it wait until one is registered.
func (e *Engine) CloseWaiters(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.closeSubs[id])
}

// SetCatchUpBudget sets what the catch-up log of watchers whose snapshot
// streams may cost (catchUpBudget): tests of a log over budget make it
// small.
func (e *Engine) SetCatchUpBudget(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.catchUp.budget = n
}

// ParkedPolls is how many polls are parked on the activity queue queue.
func (e *Engine) ParkedPolls(queue string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.waiters[queueKey{ActivityTask, queue}])
}
