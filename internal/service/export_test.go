package service

import "factory/internal/store"

// HoldKeyForTest holds an Idempotency-Key's lock as a create in progress
// would, until the function it returns is called.
func HoldKeyForTest(s *Runs, caller, key string) func() {
	return s.keys.lock(store.HashAPIKey(caller + key))
}
