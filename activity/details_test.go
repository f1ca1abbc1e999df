package activity

import "testing"

func TestSummarizeDetails(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
	}{
		{"Empty", "", ""},
		{"FieldsInTheOrderWritten", `{"next_index": 5600, "file": "part-0003", "done": false}`, "next_index=5600 file=part-0003 done=false"},
		{"NumbersKeepTheirDigits", `{"offset":1048576,"ratio":0.25,"big":12345678901234567890}`, "offset=1048576 ratio=0.25 big=12345678901234567890"},
		{"Nested", `{"cursor":{"page":3,"token":"ab"},"n":null}`, "cursor={page=3 token=ab} n=null"},
		{"ListsShowTheirHead", `{"items":[7,9,12,15,18]}`, "items=[7 9 12 …+2]"},
		{"ShortList", `{"ids":["a","b"]}`, "ids=[a b]"},
		{"EmptyContainers", `{"items":[],"meta":{}}`, "items=[] meta={}"},
		{"LongStringsCutInTheMiddle", `{"url":"https://example.com/a/very/long/path/to/part-0003"}`, "url=https://exa…to/part-0003"},
		{"QuotedWhenAmbiguous", `{"msg":"a b","eq":"x=y","empty":""}`, `msg="a b" eq="x=y" empty=""`},
		{"ControlCharactersEscaped", `{"s":"line\nbreak\u001b[2J"}`, `s="line\nbreak\x1b[2J"`},
		{"TopLevelScalar", `42`, "42"},
		{"TopLevelList", `[1,2]`, "[1 2]"},
		{"PlainText", "page 3\nof 10", "page 3 of 10"},
		{"Binary", "\x00\x01\x02", "<3 bytes>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := SummarizeDetails([]byte(c.in)); got != c.want {
				t.Fatalf("SummarizeDetails(%q) =\n%q, want\n%q", c.in, got, c.want)
			}
		})
	}
}
