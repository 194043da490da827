package ingress

import (
	"strconv"
	"sync"
	"testing"
)

// The filter never forgets a key, also when keys are added concurrently
// (the race detector checks the lock-free bit setting), says "full" past
// its capacity, and answers most unknown keys "new".
func TestSeenFilter(t *testing.T) {
	f := newSeenFilter(1 << 16)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 8192 {
				k := "wh_a/x-service-delivery-id:" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				f.add(k)
				if !f.mayContain(k) {
					t.Errorf("%s was added and is not in the filter", k)
					return
				}
			}
		}()
	}
	wg.Wait()
	for w := range 8 {
		for i := range 8192 {
			if k := "wh_a/x-service-delivery-id:" + strconv.Itoa(w) + "-" + strconv.Itoa(i); !f.mayContain(k) {
				t.Fatalf("%s is missing", k)
			}
		}
	}
	if !f.add("one more") {
		t.Error("a filter past its capacity does not say it is full")
	}
	falsePositives := 0
	for i := range 10000 {
		if f.mayContain("wh_a/body-sha256:" + strconv.Itoa(i)) {
			falsePositives++
		}
	}
	if falsePositives > 300 { // ~1% expected at capacity
		t.Errorf("%d of 10000 unknown keys are maybe-seen", falsePositives)
	}
}
