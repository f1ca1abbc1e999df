package main

import "testing"

func TestParseBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want int64
	}{
		{"256MiB", 256 << 20},
		{"1GiB", 1 << 30},
		{"1.5GiB", 3 << 29},
		{"64mib", 64 << 20},
		{"512KiB", 512 << 10},
		{"500MB", 500e6},
		{"2GB", 2e9},
		{"1048576", 1 << 20},
		{"100B", 100},
		{" 3 MiB", 3 << 20},
	}
	for _, tc := range cases {
		got, err := parseBytes(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "MiB", "256M", "256 megabytes", "-1GiB", "1e30GiB", "NaN", "0x10MiB", "1GiB2"} {
		if got, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) = %d, want an error", bad, got)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{256 << 20: "256MiB", 1 << 30: "1GiB", 3 << 29: "1536MiB", 1000: "1000B", 0: "0B", 48 << 20: "48MiB", 2 << 40: "2TiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}
