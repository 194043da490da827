package workers

// Orphans counts the events the dispatcher holds for turns nobody follows
// yet, and their bytes.
func (d *Dispatcher) Orphans() (events, bytes int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, o := range d.orphans {
		for _, e := range o.events {
			events++
			bytes += eventSize(e)
		}
	}
	return events, bytes
}
