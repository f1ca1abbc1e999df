package soak

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// report is what a run did and what it found.
type report struct {
	plan       plan
	seed       uint64
	dir        string
	loaded     time.Duration
	settled    time.Duration
	daemon     *daemon
	ledger     *ledger
	view       *mirror
	tally      tally
	problems   []problem
	settledRSS int64
	limit      int64
	errorLines []string
}

// shownPerKind bounds the problems printed of each kind; report.txt in the
// run's directory has them all.
const shownPerKind = 10

// write logs the figures and the problems, writes both to report.txt, and
// fails t if there is any problem.
func (r *report) write(t *testing.T) {
	var b strings.Builder
	r.figures(&b)
	byKind := map[string][]problem{}
	for _, p := range r.problems {
		byKind[p.kind] = append(byKind[p.kind], p)
	}
	full := b.String()
	if len(r.problems) > 0 {
		var shown, all strings.Builder
		fmt.Fprintf(&shown, "\nFAILED: %d problems. Each says what the ledger (the calls durabled acknowledged) or the rule expected, and what the recovered state holds.\n", len(r.problems))
		all.WriteString(shown.String())
		for _, kind := range []string{lost, twice, stuck, memory, refused} {
			ps := byKind[kind]
			if len(ps) == 0 {
				continue
			}
			fmt.Fprintf(&shown, "\n%s (%d):\n", kind, len(ps))
			fmt.Fprintf(&all, "\n%s (%d):\n", kind, len(ps))
			for i, p := range ps {
				line := fmt.Sprintf("  %s %s\n      want: %s\n      got:  %s\n", p.check, p.subject, p.want, p.got)
				all.WriteString(line)
				if i < shownPerKind {
					shown.WriteString(line)
				}
			}
			if len(ps) > shownPerKind {
				fmt.Fprintf(&shown, "  ... %d more in report.txt\n", len(ps)-shownPerKind)
			}
		}
		fmt.Fprintf(&shown, "\nThe run's directory is kept: %s\n", r.dir)
		full += all.String()
		b.WriteString(shown.String())
	}
	if err := os.WriteFile(filepath.Join(r.dir, "report.txt"), []byte(full), 0o644); err != nil {
		t.Errorf("write report: %v", err)
	}
	if len(r.problems) > 0 {
		t.Error(b.String())
		return
	}
	t.Log(b.String())
}

func (r *report) figures(b *strings.Builder) {
	l, d, k := r.ledger, r.daemon, r.tally
	l.mu.Lock()
	defer l.mu.Unlock()
	acked := 0
	for _, ok := range l.starts {
		if ok {
			acked++
		}
	}
	count := func(kind string) int {
		n := 0
		for _, p := range r.problems {
			if p.kind == kind {
				n++
			}
		}
		return n
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row := func(k string, v any) { fmt.Fprintf(tw, "  %s\t%v\n", k, v) }
	fmt.Fprintf(tw, "\nsoak figures (seed %d)\n", r.seed)
	row("load", fmt.Sprintf("%s, %d workflows in flight; then %s until every workflow and operation finished", r.loaded.Round(time.Second), r.plan.starters, r.settled.Round(100*time.Millisecond)))
	row("SIGKILLs of durabled", fmt.Sprintf("%d (%d runs on one data directory, fsync on)", len(d.restarts), d.runs))
	row("restart, SIGKILL to serving", durations(d.restarts))
	row("durabled peak RSS", fmt.Sprintf("%s (bound %s); %s once settled", mib(d.peakRSS), mib(r.limit), mib(r.settledRSS)))
	row("acknowledged StartWorkflow", fmt.Sprintf("%d (+%d found to exist when a retry was refused)", acked, len(l.starts)-acked))
	row("acknowledged CompleteWorkflowTask", fmt.Sprintf("%d (and %d FailWorkflowTask)", len(l.wfTasks), l.wfTaskFailures))
	row("acknowledged CompleteActivityTask", len(l.completions))
	row("acknowledged FailActivityTask", len(l.failures))
	row("acknowledged RecordHeartbeat", l.heartbeatAcks)
	row("acknowledged RedriveDeadLetter", len(l.redrives))
	row("acknowledged RedriveDeadLetters", fmt.Sprintf("%d operations, %d letters released", k.operations, k.released))
	row("heartbeat checkpoints checked", fmt.Sprintf("%d leases handed out after an acknowledged heartbeat", l.checkpoints))
	row("calls not acknowledged", errorCounts(l.errors))
	r.view.mu.Lock()
	row("Watch (a console's view)", fmt.Sprintf("%d snapshots (%d calls), %d events; streams ended: %s", r.view.snapshots, r.view.subscriptions, r.view.events, errorCounts(r.view.ends)))
	r.view.mu.Unlock()
	row("recovered workflows", fmt.Sprintf("%d: %d completed, %d failed (by the workload)", k.workflows, k.completed, k.failed))
	row("recovered activities", fmt.Sprintf("%d; %d dead-lettered, %d redriven; %d timers fired", k.activities, k.deadLettered, k.redriven, k.timersFired))
	row("effects", fmt.Sprintf("%d applied, %d deliveries (%d redeliveries suppressed by the idempotency key)", k.effects, k.deliveries, k.deliveries-k.effects))
	row("lost", count(lost))
	row("done twice", count(twice))
	row("stuck", count(stuck))
	row("over the memory bound", count(memory))
	row("refused or failed otherwise", count(refused))
	row("durabled ERROR log lines", len(r.errorLines))
	tw.Flush()
	for i, line := range r.errorLines {
		if i == 3 {
			fmt.Fprintf(b, "    ... %d more in durabled.log\n", len(r.errorLines)-3)
			break
		}
		fmt.Fprintf(b, "    %s\n", line)
	}
}

// durations is "median M, p90 P, max X over N".
func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return fmt.Sprintf("median %s, p90 %s, max %s (%d restarts)", at(0.5).Round(time.Millisecond), at(0.9).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), len(s))
}

func errorCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func mib(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
