package activity

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxIDLen bounds an id in bytes: workflow and activity ids, timer ids,
// workflow and activity types, task queues, failure types and worker
// identities.
const MaxIDLen = 1000

// Ids are shown in tables, typed into commands and compared by people, so an
// id must read as what it is. CheckID allows letters, marks, digits,
// punctuation and symbols of any script (accented Latin, CJK, emoji, "-",
// ".", "/", "_", ":") and the ASCII space between them, and refuses:
//
//	invalid UTF-8                 (which is also how surrogates would arrive)
//	control characters (Cc)       NUL, tab, newline, escape: they break tables and terminals
//	format characters (Cf)        bidi overrides and isolates, zero-width space and joiners,
//	                              the byte order mark, the soft hyphen: invisible, or they
//	                              reorder the text around them
//	private-use characters (Co)   no meaning of their own; shown as a box, a font's icon or nothing
//	other invisible characters    default-ignorable ones that are not Cf (U+115F, U+3164 HANGUL
//	                              FILLER, U+034F COMBINING GRAPHEME JOINER, …) and U+2800
//	                              BRAILLE PATTERN BLANK
//	line and paragraph separators (Zl, Zp)
//	spaces other than U+0020      (no-break, thin, ideographic, …): they look like a space
//	unassigned code points (Cn)   in the Unicode version of the Go release the daemon was
//	                              built with; noncharacters such as U+FFFF count as unassigned
//	a space at either end         "pay " and "pay" look the same in a table
//	the empty string, and more than MaxIDLen bytes
//
// A string of only spaces is refused too (it begins with a space).

// IDError says why a string is not a valid id. Offset and Index locate the
// character that was refused, both counted from 0: Offset in bytes, Index in
// characters (runes, an invalid byte counting as one); both are -1 when the
// problem is the whole string (empty, too long).
type IDError struct {
	// Offset is the byte offset of the refused character, from 0.
	Offset int
	// Index is the character (rune) index of the refused character, from 0.
	Index int
	// Rune is the refused character; utf8.RuneError for an invalid byte.
	Rune rune
	// Reason says what is wrong, as the end of "<field> …".
	Reason string
}

func (e *IDError) Error() string { return e.Reason }

// CheckID returns nil when s may be used as an id, or an *IDError saying
// which character is refused, where and why.
func CheckID(s string) error {
	switch {
	case s == "":
		return &IDError{Offset: -1, Index: -1, Reason: "is required"}
	case len(s) > MaxIDLen:
		return &IDError{Offset: -1, Index: -1, Reason: fmt.Sprintf("must be at most %d bytes, got %d", MaxIDLen, len(s))}
	case strings.Trim(s, " ") == "":
		return &IDError{Offset: 0, Index: 0, Rune: ' ', Reason: "must not be only spaces"}
	}
	index := 0
	for offset, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[offset:]); size == 1 {
				return &IDError{Offset: offset, Index: index, Rune: r,
					Reason: fmt.Sprintf("must be valid UTF-8: byte 0x%02x %s is not", s[offset], at(offset, index))}
			}
		}
		if class := refusedClass(r); class != "" {
			return &IDError{Offset: offset, Index: index, Rune: r,
				Reason: fmt.Sprintf("must not contain %s (%s) %s", runeName(r), class, at(offset, index))}
		}
		if r == ' ' && (offset == 0 || offset == len(s)-1) {
			where := "begin"
			if offset > 0 {
				where = "end"
			}
			return &IDError{Offset: offset, Index: index, Rune: r,
				Reason: fmt.Sprintf("must not %s with a space (%s)", where, at(offset, index))}
		}
		index++
	}
	return nil
}

func at(offset, index int) string {
	return fmt.Sprintf("at byte offset %d (character %d)", offset, index)
}

// refusedClass says why r may not appear in an id ("a format character"),
// or returns "" when it may.
func refusedClass(r rune) string {
	switch {
	case r < utf8.RuneSelf && r >= ' ' && r != 0x7F:
		return "" // printable ASCII, the common case, without a table lookup
	case unicode.Is(unicode.Cc, r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "a format character"
	case unicode.Is(unicode.Co, r):
		return "a private-use character"
	case unicode.Is(unicode.Cs, r):
		return "a surrogate"
	case unicode.Is(unicode.Zl, r):
		return "a line separator"
	case unicode.Is(unicode.Zp, r):
		return "a paragraph separator"
	case unicode.Is(unicode.Zs, r):
		return "a space other than U+0020"
	case unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), r == brailleBlank:
		return "an invisible character"
	case !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S):
		return "an unassigned code point"
	}
	return ""
}

// brailleBlank is a symbol (So) that every font draws as nothing.
const brailleBlank = 0x2800

// runeNames names the characters people meet in ids that lie.
var runeNames = map[rune]string{
	0x00:   "NULL",
	0x09:   "CHARACTER TABULATION",
	0x0A:   "LINE FEED",
	0x0D:   "CARRIAGE RETURN",
	0x1B:   "ESCAPE",
	0x7F:   "DELETE",
	0xA0:   "NO-BREAK SPACE",
	0xAD:   "SOFT HYPHEN",
	0x034F: "COMBINING GRAPHEME JOINER",
	0x061C: "ARABIC LETTER MARK",
	0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE",
	0x200C: "ZERO WIDTH NON-JOINER",
	0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK",
	0x200F: "RIGHT-TO-LEFT MARK",
	0x2028: "LINE SEPARATOR",
	0x2029: "PARAGRAPH SEPARATOR",
	0x202A: "LEFT-TO-RIGHT EMBEDDING",
	0x202B: "RIGHT-TO-LEFT EMBEDDING",
	0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE",
	0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x202F: "NARROW NO-BREAK SPACE",
	0x2060: "WORD JOINER",
	0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
	0x2800: "BRAILLE PATTERN BLANK",
	0x3000: "IDEOGRAPHIC SPACE",
	0x3164: "HANGUL FILLER",
	0xFEFF: "ZERO WIDTH NO-BREAK SPACE (byte order mark)",
}

// runeName is "U+202E RIGHT-TO-LEFT OVERRIDE", or "U+E000" for a character
// without a name here.
func runeName(r rune) string {
	if name, ok := runeNames[r]; ok {
		return fmt.Sprintf("%U %s", r, name)
	}
	return fmt.Sprintf("%U", r)
}

// EscapeID returns s as it may be shown on one line of a table or a
// terminal: unchanged when CheckID would allow every character of it, else
// with each character CheckID refuses written as an escape (\u202e,
// \U000e0001, \x00 for a byte that is not UTF-8, \u0020 for a space at
// either end) and each backslash doubled. Ids written since the daemon
// refused such characters show as they are; older ones, and any text put
// through it, show what they contain instead of hiding or reordering it.
// Two escaped ids never show the same; an unescaped id could spell out an
// escape ("a\u202eb" typed with a backslash), which is why the daemon, not
// the display, is what keeps new ids plain.
func EscapeID(s string) string {
	if !needsEscape(s) {
		return s
	}
	lo := strings.IndexFunc(s, func(r rune) bool { return r != ' ' })
	hi := strings.LastIndexFunc(s, func(r rune) bool { return r != ' ' })
	if lo < 0 {
		lo, hi = len(s), -1
	}
	var b strings.Builder
	for offset, r := range s {
		switch {
		case r == utf8.RuneError && isInvalidAt(s, offset):
			fmt.Fprintf(&b, `\x%02x`, s[offset])
		case r == '\\':
			b.WriteString(`\\`)
		case refusedClass(r) != "", r == ' ' && (offset < lo || offset > hi):
			if r > 0xFFFF {
				fmt.Fprintf(&b, `\U%08x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// needsEscape reports whether s holds a character that EscapeID escapes.
func needsEscape(s string) bool {
	if strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return true
	}
	for offset, r := range s {
		if refusedClass(r) != "" || (r == utf8.RuneError && isInvalidAt(s, offset)) {
			return true
		}
	}
	return false
}

func isInvalidAt(s string, offset int) bool {
	_, size := utf8.DecodeRuneInString(s[offset:])
	return size == 1
}
