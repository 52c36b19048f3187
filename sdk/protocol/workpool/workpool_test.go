package workpool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunsEverythingAndReuses(t *testing.T) {
	p := New(4)
	var ran atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		p.Go(func() { defer wg.Done(); ran.Add(1) })
		if i%10 == 0 {
			wg.Wait() // let goroutines go idle so later work reuses them
		}
	}
	wg.Wait()
	if ran.Load() != 1000 {
		t.Fatalf("ran %d of 1000", ran.Load())
	}
	p.mu.Lock()
	idle := len(p.idle)
	p.mu.Unlock()
	if idle == 0 || idle > 4 {
		t.Errorf("%d idle goroutines kept, want 1 to 4", idle)
	}

	// Sequential work reuses one goroutine: the most recently idle.
	before := runtime.NumGoroutine()
	for i := 0; i < 100; i++ {
		done := make(chan struct{})
		p.Go(func() { close(done) })
		<-done
		time.Sleep(time.Millisecond) // it parks again
	}
	if after := runtime.NumGoroutine(); after > before+1 {
		t.Errorf("goroutines %d -> %d: sequential work did not reuse", before, after)
	}
	p.Close()
}

// Work runs concurrently: a blocked function does not hold up the next.
func TestConcurrent(t *testing.T) {
	p := New(2)
	defer p.Close()
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	for i := 0; i < 10; i++ {
		p.Go(func() { started <- struct{}{}; <-release })
	}
	for i := 0; i < 10; i++ {
		select {
		case <-started:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of 10 blocking functions started", i)
		}
	}
	close(release)
	// After Close, Go still works and leaves nothing behind.
	p.Close()
	done := make(chan struct{})
	p.Go(func() { close(done) })
	<-done
}
