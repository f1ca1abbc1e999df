package tui

import (
	"slices"
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// titles names the shown columns with their widths, for failure messages.
func titles(cols []column, shown, widths []int) map[string]int {
	out := map[string]int{}
	for k, i := range shown {
		out[cols[i].title] = widths[k]
	}
	return out
}

// TestAllocateGivesTheCauseItsWidth runs the home view's columns through the
// allocator with what an outage's rows want: long ids, a long failure, a
// heartbeat summary.
func TestAllocateGivesTheCauseItsWidth(t *testing.T) {
	t.Parallel()
	//                 WORKFLOW ACTIVITY STATE TRY NEXT WAITING FAILURE HEARTBEAT
	outage := []int{21, 16, 13, 3, 13, 17, 58, 44}
	cases := []struct {
		name  string
		width int
		want  map[string]int
	}{
		// 80: the heartbeat and the wait reason go; ids shrink to their
		// minimum; the failure keeps the rest.
		{"80", 80, map[string]int{"WORKFLOW": 12, "ACTIVITY": 12, "STATE": 9, "TRY": 3, "NEXT": 13, "LAST FAILURE": 24}},
		// 100: the failure takes its capped width before the wait reason
		// may come back, then the state is whole.
		{"100", 100, map[string]int{"WORKFLOW": 12, "ACTIVITY": 12, "STATE": 13, "TRY": 3, "NEXT": 13, "LAST FAILURE": 40}},
		// 110: the wait reason is back, the failure keeps what it keeps.
		{"110", 110, map[string]int{"WORKFLOW": 12, "ACTIVITY": 12, "STATE": 9, "TRY": 3, "NEXT": 13, "WAITING ON": 17, "LAST FAILURE": 36}},
		// 132: the failure and the heartbeat share the spare width before
		// the state or the ids get any.
		{"132", 132, map[string]int{"WORKFLOW": 12, "ACTIVITY": 12, "STATE": 9, "TRY": 3, "NEXT": 13, "WAITING ON": 17, "LAST FAILURE": 33, "HEARTBEAT": 24}},
		// 200: everything whole; what is left widens the last column.
		{"200", 200, map[string]int{"WORKFLOW": 21, "ACTIVITY": 16, "STATE": 13, "TRY": 3, "NEXT": 13, "WAITING ON": 17, "LAST FAILURE": 58, "HEARTBEAT": 50}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			shown, widths := allocate(attemptColumns, outage, c.width)
			got := titles(attemptColumns, shown, widths)
			if len(got) != len(c.want) {
				t.Fatalf("shown %v, want %v", got, c.want)
			}
			for k, w := range c.want {
				if got[k] != w {
					t.Fatalf("widths %v, want %v", got, c.want)
				}
			}
			total := 2 + len(shown) - 1
			for _, w := range widths {
				total += w
			}
			if total != c.width {
				t.Fatalf("the table is %d cells wide, want %d", total, c.width)
			}
		})
	}
}

func TestAllocateDropsColumnsBeforeTheFailureIsSqueezed(t *testing.T) {
	t.Parallel()
	// WORKFLOW ACTIVITY TRIES FAILURE DEAD-FOR REDRIVES
	want := []int{10, 12, 5, 37, 9, 8}
	shown, widths := allocate(deadColumns, want, 80)
	got := titles(deadColumns, shown, widths)
	if _, ok := got["REDRIVES"]; ok || got["FAILURE"] < 37 {
		t.Fatalf("at 80 columns: %v; want the whole failure and no REDRIVES", got)
	}
	shown, widths = allocate(deadColumns, want, 132)
	if got := titles(deadColumns, shown, widths); got["REDRIVES"] == 0 || got["FAILURE"] < 37 {
		t.Fatalf("at 132 columns: %v", got)
	}
}

func TestAllocateNeverOverflows(t *testing.T) {
	t.Parallel()
	want := []int{40, 40, 13, 5, 13, 17, 200, 200}
	for width := 1; width <= 300; width++ {
		shown, widths := allocate(attemptColumns, want, width)
		total := 2 + len(shown) - 1
		for _, w := range widths {
			total += w
			if w < 0 {
				t.Fatalf("width %d: negative column width %v", width, widths)
			}
		}
		// Below 78 even the columns that are never dropped do not fit at
		// their minimums; the view cuts the lines.
		if width >= 78 && total != width {
			t.Fatalf("width %d: the table is %d wide", width, total)
		}
	}
}

func TestTruncMiddle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		w    int
		want string
	}{
		{"order-1001", 12, "order-1001"},
		{"order-2026-12-01-0991", 12, "order-…-0991"},
		{"order-2026-12-01-0991", 16, "order-…-01-0991"},
		{"invoice_batch_2026_0042", 14, "invoice_…_0042"},
		{"3f2a9c1e4b7d11ee8d2a0242ac120002", 12, "3f2a9…120002"},
		{"tenant/acme/order/991", 13, "tenant/…/991"},
		{"abcdef", 1, "a"},
		{"abcdef", 0, ""},
		{"注文注文注文注文", 6, "注文…"},
	}
	for _, c := range cases {
		got := truncMiddle(c.in, c.w)
		if got != c.want {
			t.Errorf("truncMiddle(%q, %d) = %q, want %q", c.in, c.w, got, c.want)
		}
		if ansi.StringWidth(got) > c.w {
			t.Errorf("truncMiddle(%q, %d) = %q is wider than %d", c.in, c.w, got, c.w)
		}
	}
}

func TestShortFormsReplaceTextThatDoesNotFit(t *testing.T) {
	t.Parallel()
	c := cell{text: "dead-lettered", short: "dead"}
	if got := []string{fitCell(c, 13, false), fitCell(c, 9, false)}; !slices.Equal(got, []string{"dead-lettered", "dead     "}) {
		t.Fatalf("fitCell = %q", got)
	}
}
