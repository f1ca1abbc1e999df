// Package sink is the demo's effects sink: a durable record, of its own and
// apart from the engine's data, of which effects were applied and how many
// times each was delivered.
//
// An activity applies its effect by calling Apply with its idempotency key.
// The first delivery of a key applies the effect; every later one is counted
// and suppressed. A delivery is acknowledged only once it is on disk, so a
// crash of the process that holds the Store never loses an acknowledged
// delivery, and a crash of a worker after Apply returned shows up as a
// duplicate delivery on the next attempt rather than as a second effect.
//
// Workers in other processes reach a Store through Server and Client; a
// worker run on its own may open a Store directly.
package sink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Sink applies effects keyed by idempotency key. Store and Client implement it.
type Sink interface {
	// Apply delivers the effect keyed by key: it is applied on the first
	// delivery only. It returns once the delivery is durable.
	Apply(ctx context.Context, key string) (Delivery, error)
}

// Delivery is the outcome of one Apply.
type Delivery struct {
	// Key is the idempotency key delivered.
	Key string `json:"key"`
	// Applied is true on the first delivery of Key, the one that applied the
	// effect; false for a duplicate that was suppressed.
	Applied bool `json:"applied"`
	// Count is how many times Key has been delivered, this delivery included.
	Count int `json:"count"`
}

// Stats sums up a Store.
type Stats struct {
	// Applied is the number of distinct keys, each applied exactly once.
	Applied int `json:"applied"`
	// Deliveries counts every Apply, duplicates included.
	Deliveries int `json:"deliveries"`
	// Duplicates counts the deliveries that were suppressed.
	Duplicates int `json:"duplicates"`
}

// ErrClosed is returned by Apply on a closed Store.
var ErrClosed = errors.New("sink: closed")

// logName is the append-only file of a Store: one strconv-quoted key per
// line, one line per delivery, fsynced before the delivery is acknowledged.
const logName = "effects.log"

// Store is a Sink backed by an append-only, fsynced file in a directory of its
// own. Concurrent Applies share fsyncs (group commit). Only one process may
// hold a directory at a time; Open takes a lock where the platform has one.
type Store struct {
	f      *os.File
	unlock func()
	reqs   chan *applyReq
	quit   chan struct{}
	done   chan struct{}

	mu         sync.Mutex
	counts     map[string]int
	deliveries int
	changed    chan struct{}
	closed     bool
}

type applyReq struct {
	key   string
	reply chan applyReply
}

type applyReply struct {
	d   Delivery
	err error
}

// Open opens (creating if needed) the Store in dir and replays its log. A
// torn last line, left by a crash in the middle of a write that was never
// acknowledged, is cut off.
func Open(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sink: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, logName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("sink: %w", err)
	}
	s := &Store{
		f: f, unlock: unlock, counts: map[string]int{},
		reqs: make(chan *applyReq, 256), quit: make(chan struct{}), done: make(chan struct{}),
		changed: make(chan struct{}),
	}
	if err := s.replay(); err != nil {
		f.Close()
		unlock()
		return nil, err
	}
	go s.writeLoop()
	return s, nil
}

func (s *Store) replay() error {
	r := bufio.NewReader(s.f)
	var good int64
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break // a torn tail (no newline) is dropped below
		}
		if err != nil {
			return fmt.Errorf("sink: read log: %w", err)
		}
		key, qerr := strconv.Unquote(strings.TrimSuffix(line, "\n"))
		if qerr != nil {
			break
		}
		good += int64(len(line))
		s.counts[key]++
		s.deliveries++
	}
	if err := s.f.Truncate(good); err != nil {
		return fmt.Errorf("sink: truncate torn tail: %w", err)
	}
	if _, err := s.f.Seek(good, io.SeekStart); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	return nil
}

// Apply implements Sink.
func (s *Store) Apply(ctx context.Context, key string) (Delivery, error) {
	req := &applyReq{key: key, reply: make(chan applyReply, 1)}
	select {
	case s.reqs <- req:
	case <-s.quit:
		return Delivery{}, ErrClosed
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	}
	// Once queued, the delivery is written whatever ctx does, so wait for it:
	// answering early would hide a delivery that did happen.
	r := <-req.reply
	return r.d, r.err
}

// writeLoop is the only writer of the file: it takes every request waiting,
// appends them, fsyncs once and only then counts and answers them.
func (s *Store) writeLoop() {
	defer close(s.done)
	for {
		var batch []*applyReq
		select {
		case r := <-s.reqs:
			batch = append(batch, r)
		case <-s.quit:
			s.failPending()
			return
		}
	drain:
		for len(batch) < cap(s.reqs) {
			select {
			case r := <-s.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		var buf []byte
		for _, r := range batch {
			buf = strconv.AppendQuote(buf, r.key)
			buf = append(buf, '\n')
		}
		_, err := s.f.Write(buf)
		if err == nil {
			err = s.f.Sync()
		}
		if err != nil {
			for _, r := range batch {
				r.reply <- applyReply{err: fmt.Errorf("sink: write log: %w", err)}
			}
			continue
		}
		s.mu.Lock()
		for _, r := range batch {
			s.counts[r.key]++
			s.deliveries++
			n := s.counts[r.key]
			r.reply <- applyReply{d: Delivery{Key: r.key, Applied: n == 1, Count: n}}
		}
		close(s.changed)
		s.changed = make(chan struct{})
		s.mu.Unlock()
	}
}

func (s *Store) failPending() {
	for {
		select {
		case r := <-s.reqs:
			r.reply <- applyReply{err: ErrClosed}
		default:
			return
		}
	}
}

// Changed returns a channel that is closed at the next delivery, so a caller
// can wait for progress without polling:
//
//	for s.Stats().Deliveries < n { <-s.Changed() }
//
// Take the channel before reading the state it guards.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Stats returns the totals over every key.
func (s *Store) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Applied: len(s.counts), Deliveries: s.deliveries, Duplicates: s.deliveries - len(s.counts)}
}

// Counts returns the delivery count of every key that starts with prefix
// ("" for all).
func (s *Store) Counts(prefix string) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, n := range s.counts {
		if strings.HasPrefix(k, prefix) {
			out[k] = n
		}
	}
	return out
}

// Count returns how many times key was delivered; 0 means never applied.
func (s *Store) Count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[key]
}

// Duplicates lists, sorted, the keys delivered more than once.
func (s *Store) Duplicates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, n := range s.counts {
		if n > 1 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Close stops accepting deliveries, waits for the ones being written and
// closes the file. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	<-s.done
	err := s.f.Close()
	s.unlock()
	return err
}
