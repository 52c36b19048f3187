package supervisor

import (
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 30 * time.Second}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w*time.Second {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w*time.Second)
		}
	}
	b.Jitter = 0.1
	for i := 0; i < 200; i++ {
		d := b.Delay(3)
		if d < 4*time.Second || d > 4*time.Second+400*time.Millisecond {
			t.Fatalf("Delay(3) with 10%% jitter = %s, want within [4s, 4.4s]", d)
		}
	}
}
