package badger

import (
	"testing"

	"github.com/tinyllm/durable/engine"
)

func TestMemoryFor(t *testing.T) {
	t.Parallel()
	const MiB, GiB = 1 << 20, 1 << 30
	cases := []struct {
		name   string
		budget int64
		want   Memory
	}{
		{"Minimum", 64 * MiB, Memory{Budget: 64 * MiB, MemTableSize: 4 * MiB, NumMemtables: 2,
			BlockCacheSize: 4 * MiB, IndexCacheSize: 2 * MiB, MappedLogs: 16 * MiB, GoLimit: 48 * MiB}},
		{"Default", DefaultMemoryBudget, Memory{Budget: 256 * MiB, MemTableSize: 16 * MiB, NumMemtables: 2,
			BlockCacheSize: 16 * MiB, IndexCacheSize: 8 * MiB, MappedLogs: 64 * MiB, GoLimit: 192 * MiB}},
		{"OneGiB", GiB, Memory{Budget: GiB, MemTableSize: 64 * MiB, NumMemtables: 2,
			BlockCacheSize: 64 * MiB, IndexCacheSize: 32 * MiB, MappedLogs: 256 * MiB, GoLimit: 768 * MiB}},
		{"MemtablesStopGrowingAt64MiB", 4 * GiB, Memory{Budget: 4 * GiB, MemTableSize: 64 * MiB, NumMemtables: 2,
			BlockCacheSize: 256 * MiB, IndexCacheSize: 128 * MiB, MappedLogs: GiB, GoLimit: 3 * GiB}},
		{"OddBytes", 100*MiB + 3, Memory{Budget: 100*MiB + 3, MemTableSize: 100 * MiB / 16, NumMemtables: 2,
			BlockCacheSize: 100 * MiB / 16, IndexCacheSize: 100 * MiB / 32, MappedLogs: 25 * MiB, GoLimit: 75*MiB + 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MemoryFor(tc.budget)
			if err != nil {
				t.Fatalf("MemoryFor(%d) = %v", tc.budget, err)
			}
			if got != tc.want {
				t.Errorf("MemoryFor(%d) =\n %+v, want\n %+v", tc.budget, got, tc.want)
			}
			// Badger's share fits the Go runtime's, with at least half of
			// the budget left for the rest of the heap.
			badger := int64(got.NumMemtables)*got.MemTableSize + got.BlockCacheSize + got.IndexCacheSize
			if got.MappedLogs+got.GoLimit != tc.budget || got.GoLimit-badger < tc.budget/2 {
				t.Errorf("split %+v does not add up to %d with half of it left for the heap", got, tc.budget)
			}
		})
	}
	if mem, _ := MemoryFor(DefaultMemoryBudget); mem.ResidentCeiling() != 384*MiB {
		t.Errorf("ResidentCeiling of the default budget = %d, want 384 MiB", mem.ResidentCeiling())
	}
	for _, budget := range []int64{0, -1, MinMemoryBudget - 1} {
		if _, err := MemoryFor(budget); err == nil {
			t.Errorf("MemoryFor(%d) = nil error, want one: below the minimum", budget)
		}
	}
}

func TestBadgerOptionsFollowTheMemory(t *testing.T) {
	t.Parallel()
	mem, err := MemoryFor(DefaultMemoryBudget)
	if err != nil {
		t.Fatal(err)
	}
	bo := badgerOptions("/data", Options{Memory: mem})
	for name, c := range map[string]struct{ got, want int64 }{
		"ValueThreshold":   {bo.ValueThreshold, valueThreshold},
		"ValueLogFileSize": {bo.ValueLogFileSize, valueLogFileSize},
		"MemTableSize":     {bo.MemTableSize, mem.MemTableSize},
		"NumMemtables":     {int64(bo.NumMemtables), int64(mem.NumMemtables)},
		"BlockCacheSize":   {bo.BlockCacheSize, mem.BlockCacheSize},
		"IndexCacheSize":   {bo.IndexCacheSize, mem.IndexCacheSize},
		"NumCompactors":    {int64(bo.NumCompactors), 2},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", name, c.got, c.want)
		}
	}
	if bo.SyncWrites || bo.Dir != "/data" || bo.ValueDir != "/data" {
		t.Errorf("SyncWrites %v, Dir %q, ValueDir %q; want false and /data", bo.SyncWrites, bo.Dir, bo.ValueDir)
	}
	// Badger refuses a threshold over 15% of a memtable; the smallest
	// budget's memtables must still take it.
	small, err := MemoryFor(MinMemoryBudget)
	if err != nil {
		t.Fatal(err)
	}
	if maxBatch := small.MemTableSize * 15 / 100; valueThreshold > maxBatch {
		t.Errorf("value threshold %d is over the smallest budget's transaction size %d", valueThreshold, maxBatch)
	}

	mbo := badgerOptions("", Options{InMemory: true, Memory: mem})
	if !mbo.InMemory || mbo.Dir != "" || mbo.MemTableSize != 64<<20 {
		t.Errorf("in memory: InMemory %v, Dir %q, MemTableSize %d; want true, empty, 64 MiB", mbo.InMemory, mbo.Dir, mbo.MemTableSize)
	}
}

func TestStore_OpensWithTheSmallestBudget(t *testing.T) {
	t.Parallel()
	mem, err := MemoryFor(MinMemoryBudget)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.TempDir(), Options{Memory: mem})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newActivity("wf", "big", scheduled, 0, 1)
	a.Input = make([]byte, 2<<20) // a 2 MiB payload, the daemon's default limit
	if err := s.Update(func(tx engine.Tx) error { return tx.PutActivity(a) }); err != nil {
		t.Fatalf("PutActivity of a 2 MiB payload with the smallest budget = %v", err)
	}
}
