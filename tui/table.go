package tui

import (
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"
)

// column is one table column. Columns shrink to min, grow by weight into spare
// width, and when even the minimums do not fit, the ones with the highest
// drop rank go first.
type column struct {
	title string
	min   int
	grow  int
	drop  int // 0: never dropped
}

// cell is one rendered value; style colours it unless the row is selected.
type cell struct {
	text  string
	style *lipgloss.Style
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
