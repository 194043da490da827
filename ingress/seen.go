package ingress

import "sync"

// seenFilter is a Bloom filter of the identity keys in the store. Almost
// every delivery is new, and "new" is the answer a Bloom filter gives
// exactly, without a store lookup; a "maybe" is checked in the store. The
// filter holds every key the store holds: it is filled from the store at
// start and on every acceptance (this process is the store's only writer).
// Keys that retention removed stay in the filter as harmless "maybe"s; when
// it is over capacity it is rebuilt, larger, from the store.
type seenFilter struct {
	mu    sync.RWMutex
	bits  []uint64
	k     int
	n     int // keys added
	limit int // keys before a rebuild keeps the false-positive rate near 1%
}

func newSeenFilter(capacity int) *seenFilter {
	capacity = max(capacity, 1<<16)
	// About 10 bits per key and 7 hashes: ~1% false positives at capacity.
	return &seenFilter{bits: make([]uint64, capacity*10/64+1), k: 7, limit: capacity}
}

// hashes is FNV-1a of the key, and a second hash derived from it.
func hashes(key string) (uint64, uint64) {
	a := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		a ^= uint64(key[i])
		a *= 1099511628211
	}
	return a, a>>33 | a<<31 | 1
}

func (f *seenFilter) add(key string) (full bool) {
	a, b := hashes(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	m := uint64(len(f.bits) * 64)
	for i := 0; i < f.k; i++ {
		bit := (a + uint64(i)*b) % m
		f.bits[bit/64] |= 1 << (bit % 64)
	}
	f.n++
	return f.n > f.limit
}

func (f *seenFilter) mayContain(key string) bool {
	a, b := hashes(key)
	f.mu.RLock()
	defer f.mu.RUnlock()
	m := uint64(len(f.bits) * 64)
	for i := 0; i < f.k; i++ {
		bit := (a + uint64(i)*b) % m
		if f.bits[bit/64]&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}
