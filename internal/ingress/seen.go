package ingress

import "sync/atomic"

// seenFilter is a Bloom filter of the identity keys in the store. Almost
// every delivery is new, and "new" is the answer a Bloom filter gives
// exactly, without a store lookup; a "maybe" is checked in the store. The
// filter holds every key the store holds: it is filled from the store at
// start and on every acceptance (this process is the store's only writer).
// Keys that retention removed stay in the filter as harmless "maybe"s; when
// it is over capacity it is rebuilt, larger, from the store.
//
// It takes no lock: bits are set with an atomic OR and read with atomic
// loads. A key's additions happen before its write's stripe lock is
// released, so a request holding the same stripe sees all of them; a
// reader racing an unrelated addition can only see more bits, never fewer
// of its own key's.
type seenFilter struct {
	bits  []atomic.Uint64
	k     int
	n     atomic.Int64 // keys added
	limit int64        // keys before a rebuild keeps the false-positive rate near 1%
}

func newSeenFilter(capacity int) *seenFilter {
	capacity = max(capacity, 1<<16)
	// About 10 bits per key and 7 hashes: ~1% false positives at capacity.
	return &seenFilter{bits: make([]atomic.Uint64, capacity*10/64+1), k: 7, limit: int64(capacity)}
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

// add sets a key's bits and reports whether the filter is over capacity.
func (f *seenFilter) add(key string) (full bool) {
	a, b := hashes(key)
	m := uint64(len(f.bits) * 64)
	for i := 0; i < f.k; i++ {
		bit := (a + uint64(i)*b) % m
		f.bits[bit/64].Or(1 << (bit % 64))
	}
	return f.n.Add(1) > f.limit
}

func (f *seenFilter) mayContain(key string) bool {
	a, b := hashes(key)
	m := uint64(len(f.bits) * 64)
	for i := 0; i < f.k; i++ {
		bit := (a + uint64(i)*b) % m
		if f.bits[bit/64].Load()&(1<<(bit%64)) == 0 {
			return false
		}
	}
	return true
}
