package activity

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"

	durablev1 "github.com/tinyllm/durable/proto/durable/v1"
)

// A failure fingerprint groups failures that are the same problem: an outage
// dead-letters a thousand activities whose messages differ only in the order
// number, the host or the time they waited, and an operator wants to see one
// line with a count, not a thousand. The fingerprint is the failure type
// plus its message with the details that vary from one occurrence to the
// next replaced by placeholders, hashed to a short hex string.
//
// What counts as a detail, in the order the rules apply:
//
//	quoted values       "abc", 'abc', `abc`, “abc”  →  the quotes kept, the content "…"
//	UUIDs               123e4567-e89b-12d3-a456-426614174000  →  <uuid>
//	hex numbers         0x7ffe3b2c, 0XFF                      →  <hex>
//	IP addresses        10.0.0.7, [::1], fe80::1              →  <ip>, [<ip>]
//	durations           30s, 1.5s, 2m0s, 250ms, 1h30m         →  <dur>
//	long ids            ord_8F3kQ2x9, a3f9c2e1b7d4            →  <id>  (8+ letters, digits, _ or -, at least one digit)
//	numbers             8841, -3, 2.5, worker7                →  <n>   (every run of digits)
//
// Whitespace runs become one space. Words, punctuation and the failure type
// stay as they are, so "order 12 not found" and "order 13 not found" share a
// fingerprint while "order 12 not found" and "order 12 not paid" do not.

// FingerprintLen is the number of hex digits of a fingerprint: 48 bits, short
// enough to type after --fingerprint, long enough that two of the few
// hundred distinct failures a daemon sees never share one by chance.
const FingerprintLen = 12

var (
	// A quote that opens after a letter or digit is an apostrophe ("can't"),
	// so the character before it is captured and put back.
	reQuotedDouble = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"`)
	reQuotedSingle = regexp.MustCompile(`(^|[^\pL\pN])'[^'\n]*'`)
	reQuotedBack   = regexp.MustCompile("`[^`\n]*`")
	reQuotedCurly  = regexp.MustCompile(`“[^”\n]*”`)
	reUUID         = regexp.MustCompile(`(?i)\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	reHex          = regexp.MustCompile(`(?i)\b0x[0-9a-f]+\b`)
	reIPv4         = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)
	// IPv6: bracketed as in host:port, or bare with a "::" or all eight
	// groups; ipv6 checks a bare candidate, so that "std::vector" or a time
	// such as 12:30:45 is left to the other rules.
	reIPv6Bracketed = regexp.MustCompile(`\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:%[\w.]+)?\]`)
	reIPv6          = regexp.MustCompile(`[0-9A-Fa-f]*(?::[0-9A-Fa-f]*){2,8}`)
	reDuration      = regexp.MustCompile(`\b(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+\b`)
	reLongID        = regexp.MustCompile(`[\pL\pN_-]{8,}`)
	reNumber        = regexp.MustCompile(`\d+(?:\.\d+)?`)
	reSpace         = regexp.MustCompile(`\s+`)
)

// Fingerprint returns the fingerprint of a failure: a short hex string that
// is the same for failures of the same type whose messages differ only in
// numbers, ids, hex values, addresses, durations and quoted values. A nil
// failure has the empty fingerprint. The function is pure and stable across
// releases of the same normalisation rules.
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

// NormalizeMessage replaces the details of a failure message that vary from
// one occurrence to the next with placeholders (see Fingerprint).
func NormalizeMessage(msg string) string {
	s := reQuotedDouble.ReplaceAllString(msg, `"…"`)
	s = reQuotedSingle.ReplaceAllString(s, `$1'…'`)
	s = reQuotedBack.ReplaceAllString(s, "`…`")
	s = reQuotedCurly.ReplaceAllString(s, "“…”")
	s = reUUID.ReplaceAllString(s, "<uuid>")
	s = reHex.ReplaceAllString(s, "<hex>")
	s = reIPv4.ReplaceAllString(s, "<ip>")
	s = reIPv6Bracketed.ReplaceAllString(s, "[<ip>]")
	s = reIPv6.ReplaceAllStringFunc(s, ipv6)
	s = reDuration.ReplaceAllString(s, "<dur>")
	s = reLongID.ReplaceAllStringFunc(s, func(m string) string {
		if !strings.ContainsAny(m, "0123456789") {
			return m // a long word
		}
		return "<id>"
	})
	s = reNumber.ReplaceAllString(s, "<n>")
	return strings.TrimSpace(reSpace.ReplaceAllString(s, " "))
}

// ipv6 replaces a bare IPv6 candidate that has a digit and either a "::" or
// eight groups.
func ipv6(m string) string {
	if !strings.ContainsAny(m, "0123456789") || !strings.Contains(m, "::") && strings.Count(m, ":") != 7 {
		return m
	}
	return "<ip>"
}
