package activity

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

func TestNormalizeMessage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"Timeout", "the attempt did not finish within its start-to-close timeout of 30s",
			"the attempt did not finish within its start-to-close timeout of <dur>"},
		{"CompoundDuration", "no heartbeat within the heartbeat timeout of 2m30.5s", "no heartbeat within the heartbeat timeout of <dur>"},
		{"Milliseconds", "context deadline exceeded after 250ms", "context deadline exceeded after <dur>"},
		{"ConnectionRefused", "dial tcp 10.0.0.7:5432: connect: connection refused",
			"dial tcp <ip>:<n>: connect: connection refused"},
		{"IPv6Loopback", "dial tcp [::1]:5432: connect: connection refused", "dial tcp [<ip>]:<n>: connect: connection refused"},
		{"IPv6Bare", "no route to fe80::1ff:fe23:4567:890a", "no route to <ip>"},
		{"NotFound", "order 8841 not found", "order <n> not found"},
		{"NegativeAndDecimal", "balance -12.50 below limit 0", "balance -<n> below limit <n>"},
		{"DoubleQuoted", `pq: duplicate key value violates unique constraint "orders_pkey"`,
			`pq: duplicate key value violates unique constraint "…"`},
		{"EscapedQuote", `field "a \"b\" c" is invalid`, `field "…" is invalid`},
		{"SingleQuoted", "unknown currency 'XYZ' for account 42", "unknown currency '…' for account <n>"},
		{"ApostrophesStay", "can't charge: the card's issuer won't answer", "can't charge: the card's issuer won't answer"},
		{"Backticks", "column `amount` overflows", "column `…` overflows"},
		{"CurlyQuotes", "file “report 7.pdf” is locked", "file “…” is locked"},
		{"HexAddress", "panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV addr=0x0 pc=0x4a3f2e]",
			"panic: runtime error: invalid memory address or nil pointer dereference [signal SIGSEGV addr=<hex> pc=<hex>]"},
		{"UUID", "payment 123e4567-e89b-12d3-a456-426614174000 was declined", "payment <uuid> was declined"},
		{"UpperUUID", "payment 123E4567-E89B-12D3-A456-426614174000 was declined", "payment <uuid> was declined"},
		{"LongID", "customer cus_8F3kQ2x9LmN has no default card", "customer <id> has no default card"},
		{"HexDigest", "blob a3f9c2e1b7d4 is missing", "blob <id> is missing"},
		{"DigitsInWord", "worker7 lost its lease", "worker<n> lost its lease"},
		{"LongWordsStay", "authentication unavailable", "authentication unavailable"},
		{"ClockTimeIsNotAnAddress", "maintenance window 12:30:45 to 13:00:00", "maintenance window <n>:<n>:<n> to <n>:<n>:<n>"},
		{"ScopeIsNotAnAddress", "std::vector::at out of range", "std::vector::at out of range"},
		{"NegativeDuration", "clock skew of -5s", "clock skew of -<dur>"},
		{"HostAndPort", "redis at cache-1:6379 is read-only", "redis at cache-<n>:<n> is read-only"},
		{"Version", "client v1.2.3 is too old", "client v<n>.<n> is too old"},
		{"DurationInsideAWord", "retry after 5secs", "retry after <n>secs"},
		{"BareLoopback", "listen ::1 failed", "listen <ip> failed"},
		{"HexWordsAreNotAnAddress", "dead::beef", "dead::beef"},
		{"UnclosedQuote", `say "hi`, `say "hi`},
		{"QuoteAcrossLines", "a 'b\nc' d", "a 'b c' d"},
		{"NonASCII", "Zählung 5 für Kunde ünd-48213-ä fehlgeschlagen", "Zählung <n> für Kunde <id> fehlgeschlagen"},
		{"Whitespace", "  line one\n\tline   two  ", "line one line two"},
		{"Empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := NormalizeMessage(tt.in); got != tt.want {
				t.Errorf("NormalizeMessage(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestFingerprint(t *testing.T) {
	t.Parallel()
	f := func(typ, msg string) *durablev1.Failure { return &durablev1.Failure{Type: typ, Message: msg} }
	tests := []struct {
		name string
		a, b *durablev1.Failure
		same bool
	}{
		{"NumbersDiffer", f("NotFound", "order 8841 not found"), f("NotFound", "order 17 not found"), true},
		{"HostsDiffer", f("Unavailable", "dial tcp 10.0.0.7:5432: connect: connection refused"),
			f("Unavailable", "dial tcp 10.0.0.12:6432: connect: connection refused"), true},
		{"DurationsDiffer", f("StartToCloseTimeout", "the attempt did not finish within its start-to-close timeout of 30s"),
			f("StartToCloseTimeout", "the attempt did not finish within its start-to-close timeout of 1m0s"), true},
		{"IDsDiffer", f("Declined", "payment 123e4567-e89b-12d3-a456-426614174000 was declined"),
			f("Declined", "payment 9b2f0c1e-0000-4abc-8def-000000000001 was declined"), true},
		{"QuotedValuesDiffer", f("Invalid", `unknown currency "XYZ"`), f("Invalid", `unknown currency "ABC"`), true},
		{"HexDiffers", f("Panic", "nil pointer at 0xdeadbeef"), f("Panic", "nil pointer at 0x4a3f2e"), true},
		{"WhitespaceDiffers", f("X", "a  b"), f("X", "a\nb"), true},
		{"TypesDiffer", f("NotFound", "order 8841 not found"), f("Gone", "order 8841 not found"), false},
		{"WordingDiffers", f("NotFound", "order 8841 not found"), f("NotFound", "order 8841 not paid"), false},
		{"TypeIsNotMessage", f("a", "b c"), f("a b", "c"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fa, fb := Fingerprint(tt.a), Fingerprint(tt.b)
			if (fa == fb) != tt.same {
				t.Errorf("Fingerprint(%q) = %s, Fingerprint(%q) = %s; same = %v, want %v",
					tt.a.GetMessage(), fa, tt.b.GetMessage(), fb, fa == fb, tt.same)
			}
		})
	}
}

func TestFingerprint_ShortStableHex(t *testing.T) {
	t.Parallel()
	if got := Fingerprint(nil); got != "" {
		t.Errorf("Fingerprint(nil) = %q, want empty", got)
	}
	got := Fingerprint(&durablev1.Failure{Type: "NotFound", Message: "order 8841 not found"})
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(got) {
		t.Errorf("fingerprint %q is not 12 hex digits", got)
	}
	// The fingerprint is stored with dead letters and typed by operators:
	// a change of the rules that moves it must be deliberate.
	if want := "c2097d7eaa27"; got != want {
		t.Errorf("Fingerprint changed: got %s, want %s", got, want)
	}
	if n := NormalizedMessage(&durablev1.Failure{Message: "order 8841 not found"}); n != "order <n> not found" {
		t.Errorf("NormalizedMessage = %q", n)
	}
}

func TestNormalizeMessage_ReadsTheFirst4KiB(t *testing.T) {
	t.Parallel()
	head := "a" + strings.Repeat("é", 2047) // 4095 bytes
	got := NormalizeMessage(head + "ü tail")
	if got != head {
		t.Errorf("NormalizeMessage kept %d bytes, want the %d before the cut (the ü straddles it)", len(got), len(head))
	}
	long := &durablev1.Failure{Type: "X", Message: strings.Repeat("x", 5000) + " order 1"}
	other := &durablev1.Failure{Type: "X", Message: strings.Repeat("x", 5000) + " order 2 and more"}
	if Fingerprint(long) != Fingerprint(other) {
		t.Error("messages that differ only after 4 KiB have different fingerprints")
	}
}

// BenchmarkNormalizeMessage_UnclosedQuotes is a message of escaped and
// unmatched quotes at the length bound: a pass over it, not a pass per quote.
func BenchmarkNormalizeMessage_UnclosedQuotes(b *testing.B) {
	for _, c := range []struct{ name, msg string }{
		{"EscapedDoubleQuotes", `"` + strings.Repeat(`\"`, 2000)},
		{"CurlyOpeners", strings.Repeat("“", 1400)},
		{"SpacedQuotes", strings.Repeat(" '", 2000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				NormalizeMessage(c.msg)
			}
		})
	}
}

// BenchmarkFingerprint is the cost the daemon pays on every failed attempt.
func BenchmarkFingerprint(b *testing.B) {
	f := &durablev1.Failure{Type: "Unavailable", Message: `dial tcp 10.0.0.7:5432: connect: connection refused (order 8841, key "eu-west")`}
	for range b.N {
		Fingerprint(f)
	}
}

// FuzzNormalizeMessage: any message normalises without a panic, to valid
// UTF-8 (for valid input), with no digit left: every number is part of a
// detail that a placeholder replaced.
func FuzzNormalizeMessage(f *testing.F) {
	for _, s := range []string{"order 8841 not found", `a "b\" c`, "[::1]:5432", "0x", "1.2.3.4.5", "fe80::1%eth0", "“x", "2m", "'"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		got := NormalizeMessage(msg)
		if utf8.ValidString(msg) && !utf8.ValidString(got) {
			t.Fatalf("NormalizeMessage(%q) = %q, not UTF-8", msg, got)
		}
		if strings.ContainsAny(got, "0123456789") {
			t.Fatalf("NormalizeMessage(%q) = %q keeps a digit", msg, got)
		}
	})
}
