package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteSize is a flag of a number of bytes written with a unit: "256MiB",
// "1.5GiB", "500MB", or plain bytes.
type byteSize struct{ n *int64 }

// sizeUnits are the units a byteSize takes, binary and decimal; case does
// not matter.
var sizeUnits = []struct {
	name string
	n    int64
}{
	{"B", 1},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
}

func (f byteSize) String() string {
	if f.n == nil {
		return ""
	}
	return formatBytes(*f.n)
}

func (f byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	*f.n = n
	return nil
}

// parseBytes reads a size such as "256MiB", "1.5GiB", "500MB" or "1048576".
func parseBytes(s string) (int64, error) {
	num := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
	unit := strings.TrimSpace(s[len(num):])
	num = strings.TrimSpace(num)
	mult := int64(1)
	if unit != "" {
		mult = 0
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult = u.n
			}
		}
	}
	v, err := strconv.ParseFloat(num, 64)
	if mult == 0 || err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*float64(mult) >= math.MaxInt64 {
		return 0, fmt.Errorf("want a size such as 256MiB, 1GiB or 500MB, got %q", s)
	}
	return int64(v * float64(mult)), nil
}

// formatBytes writes n in the largest binary unit that divides it, or in
// bytes: "256MiB", "1GiB", "1000B".
func formatBytes(n int64) string {
	for i := len(sizeUnits[:5]) - 1; i > 0; i-- {
		if u := sizeUnits[i]; n != 0 && n%u.n == 0 {
			return strconv.FormatInt(n/u.n, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
