package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// column is one table column. Under layout, columns shrink to min, grow by
// weight into spare width, and when even the minimums do not fit, the ones
// with the highest drop rank go first. Under allocate, they are as wide as
// their content allows, spare width going by priority.
type column struct {
	title string
	min   int
	grow  int
	drop  int // 0: never dropped
	// prio orders who gets width beyond min under allocate: 0 first.
	prio int
	// max caps the width a column gets before every column of a later
	// priority has had what it wants; 0: no cap.
	max int
	// keep is the width below which other columns are dropped first (by
	// drop rank) rather than this one squeezed: the failure's, so that it
	// still reads at 80 columns; 0: min.
	keep int
	// mid truncates the column's values in the middle ("order-…-0991"):
	// ids differ at their ends.
	mid bool
}

// cell is one rendered value; style colours it unless the row is selected.
type cell struct {
	text  string
	style *lipgloss.Style
	// short replaces text when text does not fit ("dead" for
	// "dead-lettered"); "" to truncate text instead.
	short string
}

// layout decides which columns fit in width and how wide each is.
func layout(cols []column, width int) (shown []int, widths []int) {
	const marker = 2
	for i := range cols {
		shown = append(shown, i)
	}
	total := func() int {
		t := marker
		for k, i := range shown {
			t += cols[i].min
			if k > 0 {
				t++
			}
		}
		return t
	}
	for total() > width {
		worst, at := 0, -1
		for k, i := range shown {
			if cols[i].drop > worst {
				worst, at = cols[i].drop, k
			}
		}
		if at < 0 {
			break
		}
		shown = append(shown[:at], shown[at+1:]...)
	}
	spare := max(width-total(), 0)
	weights := 0
	for _, i := range shown {
		weights += cols[i].grow
	}
	widths = make([]int, len(shown))
	given := 0
	for k, i := range shown {
		widths[k] = cols[i].min
		if weights > 0 {
			add := spare * cols[i].grow / weights
			widths[k] += add
			given += add
		}
	}
	// Hand the rounding remainder to the last growing column.
	for k := len(shown) - 1; k >= 0 && given < spare && weights > 0; k-- {
		if cols[shown[k]].grow > 0 {
			widths[k] += spare - given
			break
		}
	}
	return shown, widths
}

// allocate decides which columns are shown and how wide each is, from what
// the rows on screen want (want[i]: the widest value of column i, its title
// included) and the terminal's width:
//
//  1. every column needs its content, but not more than its min;
//  2. while those needs, with a column's keep in place of its min, do not
//     fit, the column with the highest drop rank goes;
//  3. spare width goes by priority (lowest prio first), shared evenly among
//     the columns of one priority, each up to its content capped by max;
//  4. then again by priority, up to the content without the caps;
//  5. what is left widens the last column, so rows span the terminal.
func allocate(cols []column, want []int, width int) (shown []int, widths []int) {
	const marker = 2
	need, kept := make([]int, len(cols)), make([]int, len(cols))
	for i, c := range cols {
		need[i] = min(c.min, want[i])
		kept[i] = min(max(c.min, c.keep), want[i])
	}
	for i := range cols {
		shown = append(shown, i)
	}
	sum := func(of []int) int {
		t := marker + max(len(shown)-1, 0)
		for _, i := range shown {
			t += of[i]
		}
		return t
	}
	used := func() int { return sum(need) }
	for sum(kept) > width {
		worst, at := 0, -1
		for k, i := range shown {
			if cols[i].drop > worst {
				worst, at = cols[i].drop, k
			}
		}
		if at < 0 {
			break
		}
		shown = append(shown[:at], shown[at+1:]...)
	}
	widths = make([]int, len(shown))
	for k, i := range shown {
		widths[k] = need[i]
	}
	spare := max(width-used(), 0)
	capped := func(i int) int {
		if cols[i].max > 0 {
			return max(min(want[i], cols[i].max), need[i])
		}
		return want[i]
	}
	uncapped := func(i int) int { return want[i] }
	for _, target := range []func(int) int{capped, uncapped} {
		for prio := 0; spare > 0 && prio <= maxPrio(cols); prio++ {
			spare = fill(cols, shown, widths, prio, target, spare)
		}
	}
	if len(shown) > 0 {
		widths[len(widths)-1] += spare
	}
	return shown, widths
}

func maxPrio(cols []column) int {
	p := 0
	for _, c := range cols {
		p = max(p, c.prio)
	}
	return p
}

// fill shares spare evenly among the shown columns of priority prio that are
// narrower than target, and returns what is left.
func fill(cols []column, shown, widths []int, prio int, target func(int) int, spare int) int {
	for spare > 0 {
		var hungry []int // positions in shown
		for k, i := range shown {
			if cols[i].prio == prio && widths[k] < target(i) {
				hungry = append(hungry, k)
			}
		}
		if len(hungry) == 0 {
			return spare
		}
		share := max(spare/len(hungry), 1)
		for _, k := range hungry {
			add := min(share, target(shown[k])-widths[k], spare)
			widths[k] += add
			spare -= add
			if spare == 0 {
				break
			}
		}
	}
	return spare
}

// wants measures the widest value of each column among rows, titles
// included: what allocate is given.
func wants(cols []column, rows [][]cell) []int {
	w := make([]int, len(cols))
	for i, c := range cols {
		w[i] = ansi.StringWidth(c.title)
	}
	for _, r := range rows {
		for i := range cols {
			w[i] = max(w[i], ansi.StringWidth(r[i].text))
		}
	}
	return w
}

// truncMiddle shortens s to w cells by cutting its middle, where ids keep
// what tells them apart: "order-2026-12-01-0991" at 12 is "order-…-0991".
// The cut snaps to separators ("-", "_", ".", "/", ":") when that costs at
// most a few characters, so the parts that remain are whole words.
func truncMiddle(s string, w int) string {
	if ansi.StringWidth(s) <= w {
		return s
	}
	if w <= 1 {
		return ansi.Truncate(s, w, "")
	}
	r := []rune(s)
	avail := w - 1
	tail := (avail + 1) / 2
	// The tail snaps back to start at a separator.
	for n := tail; n > 0 && n >= tail-3; n-- {
		if isSeparator(r[len(r)-n]) {
			tail = n
			break
		}
	}
	head := avail - tail
	// The head snaps back to end at a separator; what it gives up goes to
	// the tail only where the tail can start at a separator again.
	for n := head; n > 0 && n >= head-3; n-- {
		if isSeparator(r[n-1]) {
			for m := tail + head - n; m > tail; m-- {
				if isSeparator(r[len(r)-m]) {
					tail = m
					break
				}
			}
			head = n
			break
		}
	}
	out := string(r[:head]) + "…" + string(r[len(r)-tail:])
	if ansi.StringWidth(out) > w { // wide characters: fall back to the plain cut
		return ansi.Truncate(s, w, "…")
	}
	return out
}

func isSeparator(r rune) bool {
	switch r {
	case '-', '_', '.', '/', ':':
		return true
	}
	return false
}

// fitCell is c's text (or its short form) in exactly w cells, cut in the
// middle for a mid column.
func fitCell(c cell, w int, mid bool) string {
	text := c.text
	if c.short != "" && ansi.StringWidth(text) > w {
		text = c.short
	}
	if mid {
		text = truncMiddle(text, w)
	}
	return fit(text, w)
}

// renderCells renders one row of an allocated table; the selected one gets
// a marker that survives a terminal without colour.
func renderCells(st Styles, cols []column, cells []cell, shown, widths []int, selected bool) string {
	var b strings.Builder
	if selected {
		b.WriteString("› ")
	} else {
		b.WriteString("  ")
	}
	for k, i := range shown {
		if k > 0 {
			b.WriteByte(' ')
		}
		text := fitCell(cells[i], widths[k], cols[i].mid)
		if !selected && cells[i].style != nil {
			text = cells[i].style.Render(text)
		}
		b.WriteString(text)
	}
	if selected {
		return st.Selected.Render(b.String())
	}
	return b.String()
}

// renderTable renders the header and rows of an allocated table: the
// columns take the widths the rows on screen need, by priority. cursor is
// the index in rows of the selected one, or -1.
func renderTable(st Styles, cols []column, rows [][]cell, width, cursor int) string {
	shown, widths := allocate(cols, wants(cols, rows), width)
	lines := make([]string, 0, len(rows)+1)
	lines = append(lines, renderHeader(st, cols, shown, widths))
	for i, r := range rows {
		lines = append(lines, renderCells(st, cols, r, shown, widths, i == cursor))
	}
	return strings.Join(lines, "\n")
}

// fit truncates or pads s to exactly w cells.
func fit(s string, w int) string {
	if w <= 0 {
		return ""
	}
	s = ansi.Truncate(s, w, "…")
	if pad := w - ansi.StringWidth(s); pad > 0 {
		s += strings.Repeat(" ", pad)
	}
	return s
}

// renderHeader renders the column titles.
func renderHeader(st Styles, cols []column, shown, widths []int) string {
	var b strings.Builder
	b.WriteString("  ")
	for k, i := range shown {
		if k > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(fit(cols[i].title, widths[k]))
	}
	return st.Header.Render(b.String())
}

// renderRow renders one row; the selected one gets a marker that survives a
// terminal without colour.
func renderRow(st Styles, cells []cell, shown, widths []int, selected bool) string {
	var b strings.Builder
	if selected {
		b.WriteString("› ")
	} else {
		b.WriteString("  ")
	}
	for k, i := range shown {
		if k > 0 {
			b.WriteByte(' ')
		}
		text := fit(cells[i].text, widths[k])
		if !selected && cells[i].style != nil {
			text = cells[i].style.Render(text)
		}
		b.WriteString(text)
	}
	if selected {
		return st.Selected.Render(b.String())
	}
	return b.String()
}
