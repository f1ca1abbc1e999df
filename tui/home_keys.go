package tui

// cycleSort orders the home view by the next sort key, keeping the cursor
// on the activity it was on.
func (m Model) cycleSort() Model {
	return m.keepSelection(func() { m.st.sortHomeBy(m.st.attempts.home.key.next()) })
}

// toggleDead hides dead letters from the home view or brings them back;
// the dead-letter screen keeps them either way.
func (m Model) toggleDead() Model {
	hide := !m.st.attempts.home.hideDead
	m = m.keepSelection(func() { m.st.hideDeadFromHome(hide) })
	if hide {
		return m.say("dead letters hidden here (" + thousands(m.st.deadTotal) + " on screen 2) · D shows them")
	}
	return m.say("dead letters shown")
}

// keepSelection runs change (which reorders the home view) and puts the
// cursor back on the activity it was on, if it is still shown.
func (m Model) keepSelection(change func()) Model {
	l := &m.views.attempts.list
	var key string
	if l.cursor < m.st.attempts.set.Len() {
		key = keyOf(m.st.attempts.set.At(l.cursor))
	}
	change()
	if i := m.st.attempts.set.Index(key); i >= 0 {
		l.cursor = i
	}
	return m.clamp(screenAttempts)
}

// nextStuck moves the cursor to the next row below it that nothing will move
// without someone acting, going round to the top.
func (m Model) nextStuck() Model {
	set, home := m.st.attempts.set, &m.st.attempts.home
	n := set.Len()
	l := &m.views.attempts.list
	for step := 1; step <= n; step++ {
		i := (l.cursor + step) % n
		if home.rank[set.At(i)].stuck() {
			l.cursor = i
			return m.clamp(screenAttempts)
		}
	}
	return m.say("nothing stuck: no overdue activity, no dead letter shown")
}

// homeStatus is the home view's quiet line: its order and what it leaves
// out.
func (m Model) homeStatus() string {
	home := m.st.attempts.home
	s := "sorted by " + home.key.String() + " (s)"
	if home.hideDead {
		s += " · dead letters hidden (D)"
	}
	return s
}

// selectedKeys are the activities under the cursors of the activity lists,
// taken before a change that may reorder them.
func (m Model) selectedKeys() [2]string {
	var out [2]string
	if c := m.views.attempts.cursor; c < m.st.attempts.set.Len() {
		out[0] = keyOf(m.st.attempts.set.At(c))
	}
	if c := m.views.dead.cursor; c < m.st.dead.set.Len() {
		out[1] = keyOf(m.st.dead.set.At(c))
	}
	return out
}

// followSelection keeps each cursor on the activity it was on when rows
// moved around it (an urgency changed, a row came or went above it); a
// cursor whose activity is gone stays where it was.
func (m Model) followSelection(keys [2]string) Model {
	if j := m.st.attempts.set.Index(keys[0]); keys[0] != "" && j >= 0 {
		m.views.attempts.cursor = j
	}
	if j := m.st.dead.set.Index(keys[1]); keys[1] != "" && j >= 0 {
		m.views.dead.cursor = j
	}
	return m
}
