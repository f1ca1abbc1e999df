package activity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Caps of SummarizeDetails, so that one long field cannot hide the others.
const (
	summaryValueRunes = 24 // a string value longer than this is cut in its middle
	summaryListItems  = 3  // a list shows this many items, then how many more
)

// SummarizeDetails shows heartbeat details (or any payload) on one line the
// way an operator scans them: a JSON object as its fields in the order they
// were written, "next_index=5600 file=part-0003 done=true"; nested objects in
// braces, lists as their first items and a count of the rest
// ("ids=[7 9 12 …+40]"), long strings cut in the middle; strings quoted only
// when they would otherwise be misread (spaces, "=", quotes, control
// characters). Text that is not JSON is shown with its whitespace squeezed;
// anything else as its size, "<512 bytes>". Empty details are "".
func SummarizeDetails(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if json.Valid(b) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var sb strings.Builder
		if summarizeValue(d, &sb, true) == nil {
			return sb.String()
		}
	}
	if utf8.Valid(b) && printable(string(b)) {
		return strings.Join(strings.Fields(string(b)), " ")
	}
	return fmt.Sprintf("<%d bytes>", len(b))
}

// summarizeValue writes the next JSON value of d; top is the outermost one,
// whose braces are left out.
func summarizeValue(d *json.Decoder, sb *strings.Builder, top bool) error {
	tok, err := d.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			if !top {
				sb.WriteByte('{')
			}
			for i := 0; d.More(); i++ {
				k, err := d.Token()
				if err != nil {
					return err
				}
				if i > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(summaryString(k.(string)))
				sb.WriteByte('=')
				if err := summarizeValue(d, sb, false); err != nil {
					return err
				}
			}
			if _, err := d.Token(); err != nil { // '}'
				return err
			}
			if !top {
				sb.WriteByte('}')
			}
		case '[':
			sb.WriteByte('[')
			n := 0
			for ; d.More(); n++ {
				if n >= summaryListItems {
					var skip json.RawMessage
					if err := d.Decode(&skip); err != nil {
						return err
					}
					continue
				}
				if n > 0 {
					sb.WriteByte(' ')
				}
				if err := summarizeValue(d, sb, false); err != nil {
					return err
				}
			}
			if n > summaryListItems {
				fmt.Fprintf(sb, " …+%d", n-summaryListItems)
			}
			if _, err := d.Token(); err != nil { // ']'
				return err
			}
			sb.WriteByte(']')
		}
	case string:
		sb.WriteString(summaryString(t))
	case json.Number:
		sb.WriteString(t.String())
	case bool:
		sb.WriteString(strconv.FormatBool(t))
	case nil:
		sb.WriteString("null")
	}
	return nil
}

// summaryString is a key or string value, cut in its middle past
// summaryValueRunes, and quoted when it has anything that would make the
// line ambiguous or unsafe for a terminal.
func summaryString(s string) string {
	if r := []rune(s); len(r) > summaryValueRunes {
		head := (summaryValueRunes - 1) / 2
		s = string(r[:head]) + "…" + string(r[len(r)-(summaryValueRunes-1-head):])
	}
	if s == "" {
		return `""`
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || strings.ContainsRune(`="{}[]`, r) {
			return strconv.Quote(s)
		}
	}
	return s
}

func printable(s string) bool {
	for _, r := range s {
		if !unicode.IsPrint(r) && !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}
