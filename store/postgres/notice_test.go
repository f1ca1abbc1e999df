package postgres

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tinyllm/durable/engine"
)

// TestEncodeNotice_PartsFitThePayloadLimitAndJoinBackWhole encodes notices
// of every size, with ids of any bytes: each part is under PostgreSQL's
// limit, names its sender, and the parts join back into the notice.
func TestEncodeNotice_PartsFitThePayloadLimitAndJoinBackWhole(t *testing.T) {
	t.Parallel()
	odd := "nul\x00 invalid \xff\xfe ü " + strings.Repeat("x", maxPartLen-20)
	tests := []struct {
		name      string
		notice    engine.Notice
		wantParts int
	}{
		{"Empty", engine.Notice{}, 1},
		{"Flags", engine.Notice{Overrides: true, Operations: true}, 1},
		{"OperationsAndAudits", engine.Notice{OperationSeqs: []int64{1, 300, 1 << 40},
			Audits: []engine.AuditKey{{Time: time.Unix(0, 1767225600123456789).UTC(), ID: 81001}, {Time: time.Unix(0, 5).UTC(), ID: 1}}}, 1},
		{"OddBytes", engine.Notice{
			Queued:     []engine.QueuedNotice{{Kind: engine.WorkflowTask, Queue: odd, Due: time.Unix(0, 1).UTC()}},
			Closed:     []string{odd},
			Activities: []engine.ActivityKey{{WorkflowID: odd, ActivityID: odd}},
			Workflows:  []string{odd},
		}, 1},
		{"Big", bigNotice(3000), 0},
		{"ItemsOfTheLongestIDs", func() engine.Notice {
			var n engine.Notice
			for range 20 {
				n.Activities = append(n.Activities, engine.ActivityKey{WorkflowID: odd, ActivityID: odd})
			}
			return n
		}(), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := strings.Repeat("n", maxNodeName)
			parts := encodeNotice(tt.notice, node, 77, 3)
			if tt.wantParts > 0 && len(parts) != tt.wantParts {
				t.Errorf("%d parts, want %d", len(parts), tt.wantParts)
			}
			var whole engine.Notice
			for i, payload := range parts {
				if len(payload) > maxPayload {
					t.Errorf("part %d is %d bytes, over the limit of %d", i, len(payload), maxPayload)
				}
				p, err := decodePart(payload)
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				if p.incarnation != 77 || p.number != 3 || p.notice.Node != node || p.more != (i < len(parts)-1) {
					t.Errorf("part %d: incarnation %d, number %d, node %q, more %v", i, p.incarnation, p.number, p.notice.Node, p.more)
				}
				if i == 0 {
					whole = p.notice
				} else {
					join(&whole, p.notice)
				}
			}
			want := tt.notice
			want.Node = node
			if !reflect.DeepEqual(whole, want) {
				t.Errorf("joined back:\n%+v\nwant\n%+v", whole, want)
			}
		})
	}
}

func TestDecodePart_RefusesWhatIsNotANotice(t *testing.T) {
	t.Parallel()
	good := encodeNotice(engine.Notice{Closed: []string{"wf"}}, "a", 1, 1)[0]
	for _, payload := range []string{"", "not base64!", good[:len(good)-2], "AgAAAAAAAAAB"} {
		if _, err := decodePart(payload); err == nil {
			t.Errorf("decodePart(%q) succeeded", payload)
		}
	}
}
