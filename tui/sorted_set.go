package tui

import "sort"

// sortedSet keeps records by id in a map plus a slice ordered by less, so that
// an upsert or removal costs a binary search and one slice move, and a window
// of rows is a slice expression. less must be a strict total order (break ties
// on the id) so that the position of a stored record can be found again.
type sortedSet[T any] struct {
	byID  map[string]T
	order []T
	less  func(a, b T) bool
}

func newSortedSet[T any](less func(a, b T) bool) *sortedSet[T] {
	return &sortedSet[T]{byID: make(map[string]T), less: less}
}

// Len is the number of records.
func (s *sortedSet[T]) Len() int { return len(s.order) }

// Get returns the record stored under id.
func (s *sortedSet[T]) Get(id string) (T, bool) {
	v, ok := s.byID[id]
	return v, ok
}

// At returns the i-th record in order.
func (s *sortedSet[T]) At(i int) T { return s.order[i] }

// Window returns the records in [from, from+n), clamped to the set.
func (s *sortedSet[T]) Window(from, n int) []T {
	if from < 0 {
		from = 0
	}
	if from > len(s.order) {
		from = len(s.order)
	}
	to := min(from+n, len(s.order))
	return s.order[from:to]
}

// Upsert stores v under id, replacing (and re-positioning) an earlier record.
func (s *sortedSet[T]) Upsert(id string, v T) {
	if old, ok := s.byID[id]; ok {
		s.removeAt(s.search(old))
	}
	s.byID[id] = v
	i := s.search(v)
	var zero T
	s.order = append(s.order, zero)
	copy(s.order[i+1:], s.order[i:])
	s.order[i] = v
}

// Remove drops the record stored under id and reports whether there was one.
func (s *sortedSet[T]) Remove(id string) (T, bool) {
	old, ok := s.byID[id]
	if !ok {
		return old, false
	}
	delete(s.byID, id)
	s.removeAt(s.search(old))
	return old, true
}

// Index returns the position of the record stored under id, or -1.
func (s *sortedSet[T]) Index(id string) int {
	v, ok := s.byID[id]
	if !ok {
		return -1
	}
	return s.search(v)
}

func (s *sortedSet[T]) search(v T) int {
	return sort.Search(len(s.order), func(i int) bool { return !s.less(s.order[i], v) })
}

func (s *sortedSet[T]) removeAt(i int) {
	if i >= len(s.order) {
		return
	}
	copy(s.order[i:], s.order[i+1:])
	var zero T
	s.order[len(s.order)-1] = zero
	s.order = s.order[:len(s.order)-1]
}

// load replaces the contents with items in one sort, for snapshots and
// filter changes where inserting one by one would be quadratic.
func (s *sortedSet[T]) load(ids []string, items []T) {
	s.byID = make(map[string]T, len(items))
	for i, id := range ids {
		s.byID[id] = items[i]
	}
	s.order = append(s.order[:0], items...)
	sort.Slice(s.order, func(i, j int) bool { return s.less(s.order[i], s.order[j]) })
}
