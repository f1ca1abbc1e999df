package postgres

import (
	"bytes"
	"testing"

	"github.com/tinyllm/durable/internal/testpg"
)

func TestTokenKeyIsStoredOnceAndSharedByEveryStore(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	a, b := open(t, dsn), open(t, dsn)
	first, err := a.TokenKey([]byte("key-a"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.TokenKey([]byte("key-b"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, []byte("key-a")) || !bytes.Equal(second, first) {
		t.Errorf("TokenKey = %q then %q, want key-a both times", first, second)
	}
}
