package badger

import (
	"slices"
	"strings"
	"testing"
)

func TestLogSpansPicksTheLogsOfTheDirectory(t *testing.T) {
	t.Parallel()
	const maps = `00400000-00c00000 r-xp 00000000 fd:00 1234                               /usr/local/bin/durabled
7f0000000000-7f0008000000 rw-s 00000000 fd:00 42                         /data/dir/000001.vlog
7f0008000000-7f000a000000 rw-s 00000000 fd:00 43                         /data/dir/00002.mem
7f000a000000-7f000a200000 r--s 00000000 fd:00 44                         /data/dir/000003.sst
7f000b000000-7f000c000000 rw-s 00000000 fd:00 45                         /data/dir/000004.vlog (deleted)
7f000c000000-7f000d000000 rw-s 00000000 fd:00 46                         /data/dir/sub/000005.vlog
7f000d000000-7f000e000000 rw-s 00000000 fd:00 47                         /data/dir two/000006.vlog
7f000e000000-7f000f000000 rw-p 00000000 00:00 0
7f000f000000-7f000f001000 rw-p 00000000 00:00 0                          [stack]
garbage line
zz-yy rw-s 00000000 fd:00 48                                             /data/dir/000007.vlog
`
	got, err := logSpans(strings.NewReader(maps), "/data/dir")
	if err != nil {
		t.Fatal(err)
	}
	want := []span{
		{0x7f0000000000, 0x7f0008000000, "/data/dir/000001.vlog"},
		{0x7f0008000000, 0x7f000a000000, "/data/dir/00002.mem"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("logSpans = %+v, want %+v", got, want)
	}
	got, _ = logSpans(strings.NewReader(maps), "/data/dir two")
	if len(got) != 1 || got[0].path != "/data/dir two/000006.vlog" {
		t.Errorf("logSpans of a directory with a space = %+v, want its one value log", got)
	}
}

func TestStatusBytes(t *testing.T) {
	t.Parallel()
	const status = "Name:\tdurabled\nVmHWM:\t  300000 kB\nVmRSS:\t  120000 kB\nRssAnon:\t   80000 kB\nRssFile:\t   40000 kB\nThreads:\t12\n"
	for name, want := range map[string]int64{"RssFile": 40000 << 10, "VmHWM": 300000 << 10, "Threads": -1, "Missing": -1} {
		if got := statusBytes(strings.NewReader(status), name); got != want {
			t.Errorf("statusBytes(%s) = %d, want %d", name, got, want)
		}
	}
}
