package activity

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		id     string
		offset int // -2: valid
		index  int
		want   string // part of the reason
	}{
		{"AccentedLatin", "commande-é-ñ-ü", -2, 0, ""},
		{"CJK", "注文/東京.1", -2, 0, ""},
		{"Emoji", "order-🚀-42", -2, 0, ""},
		{"EmojiWithVariationSelector", "love-❤️", -2, 0, ""},
		{"HyphensDotsSlashesColons", "billing/eu-west.1:retry_2", -2, 0, ""},
		{"InnerSpaces", "order 42 for Ann", -2, 0, ""},
		{"ReplacementCharacterItself", "a\uFFFDb", -2, 0, ""},
		{"Exactly1000Bytes", strings.Repeat("a", 1000), -2, 0, ""},
		{"Empty", "", -1, -1, "is required"},
		{"1001Bytes", strings.Repeat("a", 1001), -1, -1, "at most 1000 bytes, got 1001"},
		{"OnlySpaces", "   ", 0, 0, "only spaces"},
		{"LeadingSpace", " pay", 0, 0, "must not begin with a space"},
		{"TrailingSpace", "pay ", 3, 3, "must not end with a space"},
		{"RightToLeftOverride", "ab\u202Ecd", 2, 2, "U+202E RIGHT-TO-LEFT OVERRIDE (a format character) at byte offset 2 (character 2)"},
		{"OffsetsAfterMultiByte", "é\u202E", 2, 1, "at byte offset 2 (character 1)"},
		{"ZeroWidthSpace", "pay\u200B", 3, 3, "U+200B ZERO WIDTH SPACE"},
		{"ZeroWidthJoiner", "a\u200Db", 1, 1, "U+200D ZERO WIDTH JOINER"},
		{"ByteOrderMark", "\uFEFFpay", 0, 0, "U+FEFF ZERO WIDTH NO-BREAK SPACE"},
		{"SoftHyphen", "pa\u00ADy", 2, 2, "U+00AD SOFT HYPHEN"},
		{"RightToLeftIsolate", "a\u2067b", 1, 1, "U+2067 RIGHT-TO-LEFT ISOLATE"},
		{"TagCharacter", "a\U000E0041", 1, 1, "U+E0041 (a format character)"},
		{"NUL", "a\x00b", 1, 1, "U+0000 NULL (a control character)"},
		{"Tab", "a\tb", 1, 1, "U+0009 CHARACTER TABULATION"},
		{"Newline", "a\nb", 1, 1, "U+000A LINE FEED"},
		{"Delete", "a\x7fb", 1, 1, "U+007F DELETE"},
		{"C1Control", "a\u0085b", 1, 1, "(a control character)"},
		{"LineSeparator", "a\u2028b", 1, 1, "U+2028 LINE SEPARATOR (a line separator)"},
		{"ParagraphSeparator", "a\u2029b", 1, 1, "(a paragraph separator)"},
		{"NoBreakSpace", "a\u00A0b", 1, 1, "U+00A0 NO-BREAK SPACE (a space other than U+0020)"},
		{"IdeographicSpace", "東\u3000京", 3, 1, "U+3000 IDEOGRAPHIC SPACE"},
		{"HangulFiller", "a\u3164b", 1, 1, "U+3164 HANGUL FILLER (an invisible character)"},
		{"BraillePatternBlank", "a\u2800b", 1, 1, "U+2800 BRAILLE PATTERN BLANK (an invisible character)"},
		{"PrivateUse", "a\uE000b", 1, 1, "U+E000 (a private-use character)"},
		{"SupplementaryPrivateUse", "a\U000F0000", 1, 1, "(a private-use character)"},
		{"Unassigned", "a\u0378b", 1, 1, "U+0378 (an unassigned code point)"},
		{"Noncharacter", "a\uFFFF", 1, 1, "U+FFFF (an unassigned code point)"},
		{"InvalidUTF8", "ab\xffc", 2, 2, "must be valid UTF-8: byte 0xff at byte offset 2 (character 2) is not"},
		{"EncodedSurrogate", "a\xed\xa0\x80", 1, 1, "must be valid UTF-8: byte 0xed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckID(tt.id)
			if tt.offset == -2 {
				if err != nil {
					t.Fatalf("CheckID(%q) = %v, want nil", tt.id, err)
				}
				return
			}
			var ie *IDError
			if !errors.As(err, &ie) {
				t.Fatalf("CheckID(%q) = %v, want an *IDError", tt.id, err)
			}
			if ie.Offset != tt.offset || ie.Index != tt.index {
				t.Errorf("CheckID(%q) at byte %d, character %d; want %d, %d", tt.id, ie.Offset, ie.Index, tt.offset, tt.index)
			}
			if !strings.Contains(ie.Reason, tt.want) {
				t.Errorf("CheckID(%q) = %q, want it to contain %q", tt.id, ie.Reason, tt.want)
			}
		})
	}
}

func TestEscapeID(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"order-42", "order-42"},
		{"注文 🚀", "注文 🚀"},
		{`C:\jobs`, `C:\jobs`},
		{"", ""},
		{"ab\u202Ecd", `ab\u202ecd`},
		{"pay\u200B", `pay\u200b`},
		{"a\tb\n", `a\u0009b\u000a`},
		{"a\x00", `a\u0000`},
		{" pay ", `\u0020pay\u0020`},
		{"  ", `\u0020\u0020`},
		{"a b\u200B", `a b\u200b`},
		{"a\xffb", `a\xffb`},
		{"a\U000E0041", `a\U000e0041`},
		{`x\y` + "\u202E", `x\\y\u202e`},
	}
	for _, tt := range tests {
		if got := EscapeID(tt.in); got != tt.want {
			t.Errorf("EscapeID(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestEscapeIDLeavesEveryValidIDAsItIs(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"a", "order 42", "é/東京.🚀", `back\slash`, strings.Repeat("x", MaxIDLen)} {
		if CheckID(id) != nil {
			t.Fatalf("CheckID(%q) refused a valid id", id)
		}
		if got := EscapeID(id); got != id {
			t.Errorf("EscapeID(%q) = %q, want it unchanged", id, got)
		}
	}
}

func TestEscapeIDEscapesExactlyWhatCheckIDRefuses(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= 0x10FFFF; r++ {
		switch {
		case r == 0x10000:
			r = 0x1F000 // the emoji and symbol blocks of plane 1
		case r == 0x20000:
			r = 0xE0000 // CJK extensions, then unassigned planes: skip to the tags
		case r == 0xE1000:
			r = 0xFFF00 // the rest is private use; check the ends of its planes
		case r >= 0xD800 && r <= 0xDFFF, r == '\\':
			continue // not encodable in UTF-8; doubled, not refused
		}
		s := "a" + string(r) + "a"
		refused := CheckID(s) != nil
		escaped := EscapeID(s) != s
		if refused != escaped {
			t.Fatalf("%U: CheckID refuses %v, EscapeID escapes %v", r, refused, escaped)
		}
	}
}

func TestFailureFromErrorWritesATypeTheDaemonTakes(t *testing.T) {
	t.Parallel()
	tests := []struct{ typ, want string }{
		{"CardDeclined", "CardDeclined"},
		{"Card\u200BDeclined", `Card\u200bDeclined`},
		{" Padded ", `\u0020Padded\u0020`},
		{strings.Repeat("\u202E", 200), ""}, // escaped, then cut to MaxIDLen bytes
	}
	for _, tt := range tests {
		f := FailureFromError(NewError(tt.typ, "boom"))
		if tt.want != "" && f.GetType() != tt.want {
			t.Errorf("type %q became %q, want %q", tt.typ, f.GetType(), tt.want)
		}
		if err := CheckID(f.GetType()); err != nil {
			t.Errorf("type %q became %q, which CheckID refuses: %v", tt.typ, f.GetType(), err)
		}
	}
}

// BenchmarkCheckID prices the rule on the ids every call carries: a short
// ASCII id (the common case) and the longest id of CJK characters.
func BenchmarkCheckID(b *testing.B) {
	for _, bc := range []struct{ name, id string }{
		{"ASCII20", "order-2026-0991-pay1"},
		{"CJK1000", strings.Repeat("注文", 1000/6)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := CheckID(bc.id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
