package worker

import (
	"container/list"
	"sync"

	"github.com/tinyllm/durable/workflow"
)

// workflowCache keeps the executions of running workflows between their
// tasks, by workflow id, up to max of them, evicting the least recently
// used. A task takes its workflow's execution out while it runs and puts it
// back once the daemon accepted its commands; a second task of the same
// workflow (which the daemon hands out only after the first completed)
// waits for that instead of replaying from scratch.
type workflowCache struct {
	max int

	mu    sync.Mutex
	order *list.List               // of *cacheEntry, most recently used first
	items map[string]*list.Element // workflow id → its element in order
	busy  map[string]chan struct{} // workflow id → closed when its task ends
}

type cacheEntry struct {
	id string
	x  *workflow.Execution
}

func newWorkflowCache(max int) *workflowCache {
	return &workflowCache{max: max, order: list.New(), items: map[string]*list.Element{}, busy: map[string]chan struct{}{}}
}

// take waits until no other task of the workflow runs, marks it running and
// hands over its execution, or nil when none is cached. Every take is
// followed by one put or drop.
func (c *workflowCache) take(id string) *workflow.Execution {
	c.mu.Lock()
	for {
		ch, ok := c.busy[id]
		if !ok {
			break
		}
		c.mu.Unlock()
		<-ch
		c.mu.Lock()
	}
	c.busy[id] = make(chan struct{})
	var x *workflow.Execution
	if el, ok := c.items[id]; ok {
		x = el.Value.(*cacheEntry).x
		c.order.Remove(el)
		delete(c.items, id)
	}
	c.mu.Unlock()
	return x
}

// put ends the workflow's task and keeps x as its execution, evicting (and
// closing) the least recently used ones beyond max.
func (c *workflowCache) put(id string, x *workflow.Execution) {
	var evicted []*workflow.Execution
	c.mu.Lock()
	c.items[id] = c.order.PushFront(&cacheEntry{id: id, x: x})
	for c.order.Len() > c.max {
		el := c.order.Back()
		e := el.Value.(*cacheEntry)
		c.order.Remove(el)
		delete(c.items, e.id)
		evicted = append(evicted, e.x)
	}
	c.endTaskLocked(id)
	c.mu.Unlock()
	for _, x := range evicted {
		x.Close()
	}
}

// drop ends the workflow's task without keeping an execution.
func (c *workflowCache) drop(id string) {
	c.mu.Lock()
	c.endTaskLocked(id)
	c.mu.Unlock()
}

func (c *workflowCache) endTaskLocked(id string) {
	if ch, ok := c.busy[id]; ok {
		close(ch)
		delete(c.busy, id)
	}
}

// len is the number of executions kept.
func (c *workflowCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// clear closes and forgets every execution kept.
func (c *workflowCache) clear() {
	c.mu.Lock()
	var all []*workflow.Execution
	for el := c.order.Front(); el != nil; el = el.Next() {
		all = append(all, el.Value.(*cacheEntry).x)
	}
	c.order.Init()
	c.items = map[string]*list.Element{}
	c.mu.Unlock()
	for _, x := range all {
		x.Close()
	}
}
