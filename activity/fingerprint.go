package activity

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode"
	"unicode/utf8"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// A failure fingerprint groups failures that are the same problem: an outage
// dead-letters a thousand activities whose messages differ only in the order
// number, the host or the time they waited, and an operator wants to see one
// line with a count, not a thousand. The fingerprint is the failure type
// plus its message with the details that vary from one occurrence to the
// next replaced by placeholders, hashed to a short hex string.
//
// The message is read once, left to right. Quoted values are replaced
// wherever they start (a single quote only where it does not follow a
// letter or digit, so "can't" stays); the other details only where a token
// starts, and whole: a UUID, hex number, address or duration must end where
// a word ends.
//
//	quoted values       "abc", 'abc', `abc`, “abc”  →  the quotes kept, the content "…"
//	UUIDs               123e4567-e89b-12d3-a456-426614174000  →  <uuid>
//	hex numbers         0x7ffe3b2c, 0XFF                      →  <hex>
//	IP addresses        10.0.0.7, [::1], fe80::1              →  <ip>, [<ip>]
//	durations           30s, 1.5s, 2m0s, 250ms, 1h30m         →  <dur>
//	long ids            ord_8F3kQ2x9, a3f9c2e1b7d4            →  <id>  (8+ letters, digits, _ or -, at least one digit)
//	numbers             8841, 2.5, worker7                    →  <n>   (every other run of digits)
//
// Whitespace runs become one space. Words, punctuation and the failure type
// stay as they are, so "order 12 not found" and "order 13 not found" share a
// fingerprint while "order 12 not found" and "order 12 not paid" do not. A
// bare IPv6 address needs a "::" or all eight groups, so that a time such
// as 12:30:45 reads as three numbers.

// FingerprintLen is the number of hex digits of a fingerprint: 48 bits, short
// enough to type after --fingerprint, long enough that two of the few
// hundred distinct failures a daemon sees never share one by chance.
const FingerprintLen = 12

// Fingerprint returns the fingerprint of a failure: a short hex string that
// is the same for failures of the same type whose messages differ only in
// numbers, ids, hex values, addresses, durations and quoted values. A nil
// failure has the empty fingerprint. It is a pure function, cheap enough
// for every failed attempt.
func Fingerprint(f *durablev1.Failure) string {
	if f == nil {
		return ""
	}
	sum := sha256.Sum256([]byte(f.GetType() + "\x00" + NormalizeMessage(f.GetMessage())))
	return hex.EncodeToString(sum[:])[:FingerprintLen]
}

// NormalizedMessage returns the message of a failure the way its fingerprint
// sees it, for showing a group of failures as one line:
// "connection refused <ip>:<n>", "order <n> not found".
func NormalizedMessage(f *durablev1.Failure) string {
	return NormalizeMessage(f.GetMessage())
}

// maxNormalized bounds the bytes of a message that are normalised: a
// failure message may be as large as a payload, and its first 4 KiB tell
// one problem from another. What follows is left out.
const maxNormalized = 4 << 10

// NormalizeMessage replaces the details of a failure message that vary from
// one occurrence to the next with placeholders (see Fingerprint). Only the
// first 4 KiB of the message are read.
func NormalizeMessage(msg string) string {
	if len(msg) > maxNormalized {
		cut := maxNormalized
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	n := normalizer{msg: msg}
	return n.run()
}

// normalizer is one pass over a message.
type normalizer struct {
	msg string
	b   strings.Builder
	// unclosed holds, per kind of quote, where the text in which a quote of
	// that kind is not closed ends: an opening quote before it is not
	// looked at again, so that a line of unmatched quotes costs a pass, not
	// a pass per quote.
	unclosed [4]int
}

// The kinds of quote, as indexes of normalizer.unclosed.
const (
	quoteDouble = iota
	quoteSingle
	quoteBack
	quoteCurly
)

func (n *normalizer) run() string {
	msg := n.msg
	n.b.Grow(len(msg))
	space := false
	for i := 0; i < len(msg); {
		r, size := utf8.DecodeRuneInString(msg[i:])
		if unicode.IsSpace(r) {
			space = n.b.Len() > 0
			i += size
			continue
		}
		if space {
			n.b.WriteByte(' ')
			space = false
		}
		var prev rune
		if i > 0 {
			prev, _ = utf8.DecodeLastRuneInString(msg[:i])
		}
		if l, placeholder := n.detail(i, prev); l > 0 {
			n.b.WriteString(placeholder)
			i += l
			continue
		}
		if !isTokenRune(r) || r == '-' || r == '_' {
			// A token's own punctuation is written as it is, so that what
			// follows it starts a token of its own.
			n.b.WriteRune(r)
			i += size
			continue
		}
		end := i + tokenLen(msg[i:])
		if tok := msg[i:end]; utf8.RuneCountInString(tok) >= 8 && strings.ContainsAny(tok, "0123456789") {
			n.b.WriteString("<id>")
			i = end
			continue
		}
		i = writeNumbers(&n.b, msg, i, end)
	}
	return n.b.String()
}

// detail recognises a quoted value or, at the start of a token, a UUID, hex
// number, address or duration at msg[i:], whose previous rune is prev. It
// returns how many bytes it covers and what replaces them; 0 if there is
// none.
func (n *normalizer) detail(i int, prev rune) (int, string) {
	s := n.msg[i:]
	switch {
	case s[0] == '"':
		if l := n.quoted(i, quoteDouble, `"`, `"`, true); l > 0 {
			return l, `"…"`
		}
	case s[0] == '`':
		if l := n.quoted(i, quoteBack, "`", "`", false); l > 0 {
			return l, "`…`"
		}
	case s[0] == '\'' && !unicode.IsLetter(prev) && !unicode.IsDigit(prev):
		if l := n.quoted(i, quoteSingle, "'", "'", false); l > 0 {
			return l, "'…'"
		}
	case strings.HasPrefix(s, "“"):
		if l := n.quoted(i, quoteCurly, "“", "”", false); l > 0 {
			return l, "“…”"
		}
	case s[0] == '[':
		if l := bracketedIPv6(s); l > 0 {
			return l, "[<ip>]"
		}
	}
	if isWordRune(prev) {
		return 0, ""
	}
	for _, m := range []struct {
		match       func(string) int
		placeholder string
	}{{uuid, "<uuid>"}, {hexNumber, "<hex>"}, {ipv4, "<ip>"}, {ipv6, "<ip>"}, {duration, "<dur>"}} {
		if l := m.match(s); l > 0 && endsWord(s, l) {
			return l, m.placeholder
		}
	}
	return 0, ""
}

// quoted returns the length of the quoted value at msg[i:], quotes
// included, on one line; 0 if it is not closed. With escapes, a backslash
// escapes the next byte.
func (n *normalizer) quoted(i, kind int, open, close string, escapes bool) int {
	if i < n.unclosed[kind] {
		return 0
	}
	s := n.msg[i:]
	for j := len(open); j < len(s); j++ {
		switch {
		case s[j] == '\n':
			n.unclosed[kind] = i + j
			return 0
		case escapes && s[j] == '\\':
			j++
		case strings.HasPrefix(s[j:], close):
			return j + len(close)
		}
	}
	n.unclosed[kind] = len(n.msg)
	return 0
}

// uuid matches 8-4-4-4-12 hex digits.
func uuid(s string) int {
	if len(s) < 36 {
		return 0
	}
	for j := range 36 {
		if j == 8 || j == 13 || j == 18 || j == 23 {
			if s[j] != '-' {
				return 0
			}
		} else if !isHex(s[j]) {
			return 0
		}
	}
	return 36
}

// hexNumber matches 0x and hex digits.
func hexNumber(s string) int {
	if len(s) < 3 || s[0] != '0' || s[1] != 'x' && s[1] != 'X' {
		return 0
	}
	n := 2 + span(s[2:], isHex)
	if n == 2 {
		return 0
	}
	return n
}

// ipv4 matches four dot-separated groups of one to three digits.
func ipv4(s string) int {
	j := 0
	for g := range 4 {
		if g > 0 {
			if j >= len(s) || s[j] != '.' {
				return 0
			}
			j++
		}
		d := span(s[j:], isDigit)
		if d < 1 || d > 3 {
			return 0
		}
		j += d
	}
	return j
}

// ipv6 matches hex groups joined by two to eight colons that hold a digit
// and either a "::" or all eight groups.
func ipv6(s string) int {
	j := span(s, isHex)
	colons := 0
	for colons < 8 && j < len(s) && s[j] == ':' {
		j++
		j += span(s[j:], isHex)
		colons++
	}
	m := s[:j]
	if colons < 2 || !strings.ContainsAny(m, "0123456789") || !strings.Contains(m, "::") && colons != 7 {
		return 0
	}
	return j
}

// bracketedIPv6 matches an IPv6 address in brackets, as in "[::1]:5432",
// with an optional zone.
func bracketedIPv6(s string) int {
	j := 1 + span(s[1:], func(c byte) bool { return isHex(c) || c == ':' || c == '.' })
	if !strings.Contains(s[1:j], ":") {
		return 0
	}
	if j < len(s) && s[j] == '%' {
		z := span(s[j+1:], func(c byte) bool { return c == '.' || c == '_' || isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'z' })
		if z == 0 {
			return 0
		}
		j += 1 + z
	}
	if j >= len(s) || s[j] != ']' {
		return 0
	}
	return j + 1
}

// duration matches one or more numbers with a unit, as Go writes a
// time.Duration: 30s, 1.5s, 2m0s, 250ms, 1h30m.
func duration(s string) int {
	j := 0
	for {
		d := span(s[j:], isDigit)
		if d == 0 {
			return j
		}
		k := j + d
		if k+1 < len(s) && s[k] == '.' && isDigit(s[k+1]) {
			k += 1 + span(s[k+1:], isDigit)
		}
		unit := 0
		for _, u := range []string{"ns", "us", "µs", "ms", "s", "m", "h"} {
			if strings.HasPrefix(s[k:], u) {
				unit = len(u)
				break
			}
		}
		if unit == 0 {
			return j
		}
		j = k + unit
	}
}

// writeNumbers writes the token msg[i:end] with each run of digits as <n>;
// a run that ends the token takes a decimal part after it ("12.50"). It
// returns where the text after the token starts.
func writeNumbers(b *strings.Builder, msg string, i, end int) int {
	for i < end {
		if !isDigit(msg[i]) {
			r, size := utf8.DecodeRuneInString(msg[i:])
			b.WriteRune(r)
			i += size
			continue
		}
		i += span(msg[i:end], isDigit)
		if i == end && i+1 < len(msg) && msg[i] == '.' && isDigit(msg[i+1]) {
			i += 1 + span(msg[i+1:], isDigit)
			end = i
		}
		b.WriteString("<n>")
	}
	return end
}

// tokenLen is the length of the run of letters, digits, _ and - s starts
// with.
func tokenLen(s string) int {
	for j, r := range s {
		if !isTokenRune(r) {
			return j
		}
	}
	return len(s)
}

// endsWord reports whether s[:n] ends where a word does.
func endsWord(s string, n int) bool {
	r, _ := utf8.DecodeRuneInString(s[n:])
	return n == len(s) || !isWordRune(r)
}

func span(s string, ok func(byte) bool) int {
	j := 0
	for j < len(s) && ok(s[j]) {
		j++
	}
	return j
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isHex(c byte) bool { return isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'f' }

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		c := byte(r)
		return c == '_' || isDigit(c) || 'a' <= c|0x20 && c|0x20 <= 'z'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isTokenRune(r rune) bool { return r == '-' || isWordRune(r) }
