package postgres

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tinyllm/durable/engine"
)

// noticeChannel is the channel every node notifies and listens on.
const noticeChannel = "durable_notices"

// maxPayload is the longest payload PostgreSQL takes (it refuses 8000
// bytes or more), and maxPart the encoded bytes that fit in it as base64.
const (
	maxPayload = 7999
	maxPart    = maxPayload / 4 * 3
)

// A notice travels as one or more notifications, each a part that names its
// sender, base64 (unpadded, standard alphabet) of:
//
//	version:byte(1) | incarnation:i64 | node:str | number:uvarint | flags:byte | item*
//
// where number counts the notices of the sending transaction from 1, flags
// holds partMore (more parts of this notice follow), partOverrides and
// partOperations (on the first part only), and each item is
//
//	'q' kind:byte queue:str due:uvarint   a queue that got entries
//	'c' workflow:str                      a workflow that closed
//	'a' workflow:str activity:str         an activity written or removed
//	'w' workflow:str                      a workflow written
//	'o' seq:uvarint                       an operation started or changed
//	'r' at:uvarint id:uvarint             an audit record written (at in Unix nanoseconds)
//
// str is a uvarint length and the bytes; due is UTC Unix nanoseconds, 0 for
// the zero time. Base64 keeps any id, whatever its bytes, a valid payload in
// any server encoding. A part is at most maxPart bytes before base64: a
// notice with more items than that is split between items, and the
// listener joins the parts before it hands the notice on. Parts of one
// transaction reach a listener one after another (PostgreSQL queues a
// transaction's notifications together, at commit).
//
// 'o' and 'r' items came after the first nodes of this version, whose
// decoder refuses a part with an item it does not know: they travel in a
// notice of their own (Notify), so that such a node loses only them, not
// the wake-ups of the rest, while the nodes of a database are upgraded one
// by one.
const noticeVersion = 1

const (
	partMore = 1 << iota
	partOverrides
	partOperations
)

const (
	itemQueued    = 'q'
	itemClosed    = 'c'
	itemActivity  = 'a'
	itemWorkflow  = 'w'
	itemOperation = 'o'
	itemAudit     = 'r'
)

// errNotice is a payload that is not a notice part of this version.
var errNotice = errors.New("not a notice")

func appendStr(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// encodeNotice returns the payloads of the parts of n, the number-th notice
// of a transaction of node (incarnation inc).
func encodeNotice(n engine.Notice, node string, inc int64, number int) []string {
	var items [][]byte
	for _, q := range n.Queued {
		var due uint64
		if !q.Due.IsZero() {
			due = uint64(nanos(q.Due))
		}
		items = append(items, binary.AppendUvarint(appendStr([]byte{itemQueued, byte(q.Kind)}, q.Queue), due))
	}
	for _, id := range n.Closed {
		items = append(items, appendStr([]byte{itemClosed}, id))
	}
	for _, a := range n.Activities {
		items = append(items, appendStr(appendStr([]byte{itemActivity}, a.WorkflowID), a.ActivityID))
	}
	for _, id := range n.Workflows {
		items = append(items, appendStr([]byte{itemWorkflow}, id))
	}
	for _, seq := range n.OperationSeqs {
		items = append(items, binary.AppendUvarint([]byte{itemOperation}, uint64(seq)))
	}
	for _, a := range n.Audits {
		items = append(items, binary.AppendUvarint(binary.AppendUvarint([]byte{itemAudit}, uint64(nanos(a.Time))), uint64(a.ID)))
	}

	head := func(flags byte) []byte {
		h := binary.BigEndian.AppendUint64([]byte{noticeVersion}, uint64(inc))
		h = binary.AppendUvarint(appendStr(h, node), uint64(number))
		return append(h, flags)
	}
	var first byte
	if n.Overrides {
		first |= partOverrides
	}
	if n.Operations {
		first |= partOperations
	}
	// Every part's head has the same length: flags is one byte.
	room := maxPart - len(head(0))
	var bodies [][]byte
	var body []byte
	for _, it := range items {
		if len(body) > 0 && len(body)+len(it) > room {
			bodies = append(bodies, body)
			body = nil
		}
		body = append(body, it...)
	}
	bodies = append(bodies, body)
	out := make([]string, len(bodies))
	for i, body := range bodies {
		var flags byte
		if i == 0 {
			flags = first
		}
		if i < len(bodies)-1 {
			flags |= partMore
		}
		out[i] = base64.RawStdEncoding.EncodeToString(append(head(flags), body...))
	}
	return out
}

// noticePart is one decoded notification.
type noticePart struct {
	incarnation int64
	number      uint64
	more        bool
	notice      engine.Notice
}

// partReader reads a part; any misfit sets bad.
type partReader struct {
	b   []byte
	bad bool
}

func (r *partReader) byte() byte {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *partReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *partReader) str() string {
	n := r.uvarint()
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func decodePart(payload string) (noticePart, error) {
	var p noticePart
	raw, err := base64.RawStdEncoding.DecodeString(payload)
	if err != nil || len(raw) < 9 || raw[0] != noticeVersion {
		return p, errNotice
	}
	p.incarnation = int64(binary.BigEndian.Uint64(raw[1:9]))
	r := &partReader{b: raw[9:]}
	p.notice.Node = r.str()
	p.number = r.uvarint()
	flags := r.byte()
	p.more = flags&partMore != 0
	p.notice.Overrides = flags&partOverrides != 0
	p.notice.Operations = flags&partOperations != 0
	n := &p.notice
	for !r.bad && len(r.b) > 0 {
		switch tag := r.byte(); tag {
		case itemQueued:
			q := engine.QueuedNotice{Kind: engine.TaskKind(r.byte()), Queue: r.str()}
			if due := r.uvarint(); due != 0 {
				q.Due = fromNanos(int64(due))
			}
			n.Queued = append(n.Queued, q)
		case itemClosed:
			n.Closed = append(n.Closed, r.str())
		case itemActivity:
			a := engine.ActivityKey{WorkflowID: r.str()}
			a.ActivityID = r.str()
			n.Activities = append(n.Activities, a)
		case itemWorkflow:
			n.Workflows = append(n.Workflows, r.str())
		case itemOperation:
			n.OperationSeqs = append(n.OperationSeqs, int64(r.uvarint()))
		case itemAudit:
			at := int64(r.uvarint())
			n.Audits = append(n.Audits, engine.AuditKey{Time: fromNanos(at), ID: int64(r.uvarint())})
		default:
			return p, fmt.Errorf("%w: item tag %q", errNotice, tag)
		}
	}
	if r.bad {
		return p, fmt.Errorf("%w: truncated", errNotice)
	}
	return p, nil
}

// join adds a later part of the same notice to n.
func join(n *engine.Notice, p engine.Notice) {
	n.Queued = append(n.Queued, p.Queued...)
	n.Closed = append(n.Closed, p.Closed...)
	n.Activities = append(n.Activities, p.Activities...)
	n.Workflows = append(n.Workflows, p.Workflows...)
	n.Overrides = n.Overrides || p.Overrides
	n.Operations = n.Operations || p.Operations
	n.OperationSeqs = append(n.OperationSeqs, p.OperationSeqs...)
	n.Audits = append(n.Audits, p.Audits...)
}
