package tuning_test

import (
	"runtime/metrics"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/sdk/protocol/tuning"
)

// forcedCollections counts the collections the process asked for.
func forcedCollections() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// waitForced waits until at least want forced collections happened since
// from, or fails after a while.
func waitForced(t *testing.T, from, want uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * tuning.TrimAfter)
	for forcedCollections()-from < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d forced collections after %s, want %d", forcedCollections()-from, 10*tuning.TrimAfter, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Calls of Later in a row make one trim (two collections, see Trimmer),
// TrimAfter after the last; Stop drops a pending one.
func TestTrimmer(t *testing.T) {
	var tr tuning.Trimmer
	from := forcedCollections()
	for range 3 {
		tr.Later()
		time.Sleep(tuning.TrimAfter / 10)
	}
	if n := forcedCollections() - from; n != 0 {
		t.Fatalf("%d forced collections while work went on, want none", n)
	}
	waitForced(t, from, 2)
	time.Sleep(2 * tuning.TrimAfter)
	if n := forcedCollections() - from; n != 2 {
		t.Errorf("%d forced collections for one burst, want 2 (one trim)", n)
	}

	tr.Later()
	tr.Stop()
	from = forcedCollections()
	tr.Later() // does nothing after Stop
	time.Sleep(2 * tuning.TrimAfter)
	if n := forcedCollections() - from; n != 0 {
		t.Errorf("%d forced collections after Stop, want none", n)
	}
}

// Quiet.Large trims soon after a large call; Quiet.Stop drops it.
func TestQuietLarge(t *testing.T) {
	q := tuning.NewQuiet(time.Hour)
	from := forcedCollections()
	q.Large()
	waitForced(t, from, 2)

	q.Large()
	q.Stop()
	from = forcedCollections()
	time.Sleep(2 * tuning.TrimAfter)
	if n := forcedCollections() - from; n != 0 {
		t.Errorf("%d forced collections after Stop, want none", n)
	}
}
