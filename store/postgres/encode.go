package postgres

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/tinyllm/durable/engine"
)

// maxPartLen bounds every id, queue name and activity type, as the Badger
// store does: the engine's contract may not depend on the store.
const maxPartLen = 1024

// maxRecordSize bounds one encoded record, the Badger store's bound on disk.
const maxRecordSize = 8 << 20

// errCorrupt reports a row or page token the store did not write, or a
// record that does not decode: a bug or corruption.
var errCorrupt = errors.New("malformed row or value")

// checkPart rejects a string too long to be an id, queue name or type.
func checkPart(field, s string) error {
	if len(s) > maxPartLen {
		return &engine.InvalidError{Field: field, Reason: fmt.Sprintf("longer than %d bytes", maxPartLen)}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// b is s as a bytea parameter; never nil, which pgx would send as NULL.
func b(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return []byte(s)
}

// nanos is t as UTC Unix nanoseconds, clamped as the Badger store's keys
// clamp it: instants before 1970 (an unset timestamp) to 0, after 2262 to
// the maximum.
func nanos(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, 0)):
		return 0
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// marshal encodes a record, refusing one over the store's bound.
func marshal(m proto.Message) ([]byte, error) {
	v, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", m, err)
	}
	if len(v) > maxRecordSize {
		return nil, &engine.InvalidError{Field: "record", Reason: fmt.Sprintf("%d bytes encoded, more than the store's limit of %d", len(v), maxRecordSize)}
	}
	return v, nil
}

func unmarshal(what string, v []byte, m proto.Message) error {
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("%s: %w: %w", what, errCorrupt, err)
	}
	return nil
}

// Page tokens. Each starts with a byte naming its list, then the values the
// list is ordered by, so a token of one list is refused by another:
//
//	audit:       'a' | at:i64 | id:i64
//	operations:  'o' | seq:i64
//	dead letters 'd' | dead_lettered_at:i64 | workflow_id:s16 | activity_id:rest
//	by state:    's' | state:u8 | activity_type:s16 | workflow_id:s16 | activity_id:rest
//
// i64 is big-endian; s16 a u16 length and the bytes; rest runs to the end.
const (
	cursorAudit      = 'a'
	cursorOperation  = 'o'
	cursorDeadLetter = 'd'
	cursorState      = 's'
)

type cursorWriter []byte

func (w cursorWriter) i64(v int64) cursorWriter {
	return binary.BigEndian.AppendUint64(w, uint64(v))
}

func (w cursorWriter) s16(s string) cursorWriter {
	return append(binary.BigEndian.AppendUint16(w, uint16(len(s))), s...)
}

func (w cursorWriter) tail(s string) cursorWriter { return append(w, s...) }

// cursorReader reads a token back; any misfit sets bad.
type cursorReader struct {
	rest []byte
	bad  bool
}

func newCursorReader(c []byte, tag byte) *cursorReader {
	if len(c) == 0 || c[0] != tag {
		return &cursorReader{bad: true}
	}
	return &cursorReader{rest: c[1:]}
}

func (r *cursorReader) i64() int64 {
	if len(r.rest) < 8 {
		r.bad = true
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.rest))
	r.rest = r.rest[8:]
	return v
}

func (r *cursorReader) u8() byte {
	if len(r.rest) < 1 {
		r.bad = true
		return 0
	}
	v := r.rest[0]
	r.rest = r.rest[1:]
	return v
}

func (r *cursorReader) s16() string {
	if len(r.rest) < 2 {
		r.bad = true
		return ""
	}
	n := int(binary.BigEndian.Uint16(r.rest))
	if len(r.rest) < 2+n {
		r.bad = true
		return ""
	}
	s := string(r.rest[2 : 2+n])
	r.rest = r.rest[2+n:]
	return s
}

func (r *cursorReader) tail() string {
	s := string(r.rest)
	r.rest = nil
	return s
}

// done reports whether the token was read whole and fit.
func (r *cursorReader) done() bool { return !r.bad && len(r.rest) == 0 }
