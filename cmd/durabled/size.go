package main

import (
	"fmt"

	badgerstore "github.com/tinyllm/durable/store/badger"
)

// byteSize is a flag of a number of bytes written with a unit, read as
// --disk-reserve reads its sizes (badgerstore.ParseSize): "256MiB",
// "1.5GiB", "500MB", or plain bytes.
type byteSize struct{ n *int64 }

func (f byteSize) String() string {
	if f.n == nil {
		return ""
	}
	return badgerstore.FormatSize(uint64(*f.n))
}

func (f byteSize) Set(s string) error {
	n, err := badgerstore.ParseSize(s)
	if err != nil || n >= 1<<62 {
		// ParseSize's own message offers a share of the volume too.
		return fmt.Errorf("want a size such as 256MiB, 1GiB or 500MB, got %q", s)
	}
	*f.n = int64(n)
	return nil
}
