package engine

import (
	"strings"
	"unicode/utf8"
)

// workflowCursorTag starts every ListWorkflows page token, followed by the
// last workflow id of the page. Ids never contain control characters (the
// server refuses them), so a bare id or a token of another list (a
// dead-letter or audit key) never passes for a cursor.
const workflowCursorTag = "\x00workflows\x00"

func workflowCursor(lastID string) []byte { return []byte(workflowCursorTag + lastID) }

// decodeWorkflowCursor returns the id a ListWorkflows page token names, ""
// for no token.
func decodeWorkflowCursor(token []byte) (string, error) {
	if len(token) == 0 {
		return "", nil
	}
	id, ok := strings.CutPrefix(string(token), workflowCursorTag)
	if !ok || id == "" || !utf8.ValidString(id) {
		return "", invalid("next_page_token", "is not a page token of ListWorkflows; pass the next_page_token of the previous ListWorkflows reply, or none for the first page")
	}
	return id, nil
}
