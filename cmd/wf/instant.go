package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// parseInstant reads an instant the way wf's time flags take it: a span
// back from now as a Go duration (90m, 24h) or days with an optional rest
// (7d, 1d12h), or an RFC 3339 time. Empty is the zero time.
func parseInstant(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	var span time.Duration
	rest := s
	if days, after, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 100000 {
			return time.Time{}, fmt.Errorf("%q: want a duration like 90m, 24h or 7d, or an RFC 3339 time", s)
		}
		span, rest = time.Duration(n)*24*time.Hour, after
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q: want a duration like 90m, 24h or 7d, or an RFC 3339 time", s)
		}
		span += d
	}
	if span <= 0 {
		return time.Time{}, errors.New("must be a positive span")
	}
	return now.Add(-span), nil
}

// instantFlag is a flag that takes an instant as parseInstant reads it,
// relative to when the flag is parsed.
type instantFlag struct{ t *time.Time }

func (f instantFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.UTC().Format(time.RFC3339)
}

func (f instantFlag) Set(s string) error {
	t, err := parseInstant(s, time.Now())
	if err != nil {
		return err
	}
	if t.IsZero() {
		return errors.New("want a duration like 90m, 24h or 7d, or an RFC 3339 time")
	}
	*f.t = t
	return nil
}
