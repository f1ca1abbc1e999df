package harness

import "testing"

func TestNameInUse_MatchesTheRefusalAsLogged(t *testing.T) {
	for _, line := range []string{
		`time=2026-12-01T18:30:08.666Z level=ERROR msg="durabled stopped" err="postgres /tmp/x/sock:35263/durable: node name \"node-2\" is in use: the node holding it was last seen 954ms ago"`,
		`durabled: node name "node-2" is in use: the node holding it was last seen 954ms ago`,
	} {
		if !nameInUse.MatchString(line) {
			t.Errorf("no match in %s", line)
		}
	}
	if nameInUse.MatchString(`level=ERROR msg="durabled stopped" err="listen tcp 127.0.0.1:7345: bind: address already in use"`) {
		t.Error("matched a refusal of the address")
	}
}
