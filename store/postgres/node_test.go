package postgres

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

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

func TestNodeLockRefusesASecondNodeUntilTheFirstReleases(t *testing.T) {
	t.Parallel()
	dsn := testpg.Database(t)
	ctx := context.Background()
	l, err := LockNode(ctx, dsn, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockNode(ctx, dsn, time.Second); !errors.Is(err, ErrNodeLocked) {
		t.Fatalf("second LockNode = %v, want ErrNodeLocked", err)
	}
	// A node on another database of the same server is not refused.
	other, err := LockNode(ctx, testpg.Database(t), time.Second)
	if err != nil {
		t.Fatalf("LockNode on another database = %v", err)
	}
	other.Release()
	l.Release()
	l2, err := LockNode(ctx, dsn, time.Second)
	if err != nil {
		t.Fatalf("LockNode after Release = %v", err)
	}
	l2.Release()
}
