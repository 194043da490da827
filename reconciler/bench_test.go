package reconciler_test

import (
	"context"
	"fmt"
	"testing"

	"factory/internal/testfactory"
	"factory/reconciler"
)

// BenchmarkValidateAndPlan reads, validates and plans a factory of 20
// webhooks and 1,000 automations, and the same at 1/100th of the
// automations as the baseline. files/s is definition files per second.
func BenchmarkValidateAndPlan(b *testing.B) {
	for _, size := range []struct{ webhooks, automations int }{{20, 10}, {20, 1000}} {
		b.Run(fmt.Sprintf("webhooks=%d/automations=%d", size.webhooks, size.automations), func(b *testing.B) {
			dir := b.TempDir()
			testfactory.Generate(b, dir, size.webhooks, size.automations)
			src := reconciler.DirSource{Root: dir}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				snap, err := src.Fetch(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				d, ds := reconciler.Load(snap)
				if ds.HasErrors() {
					b.Fatal(ds)
				}
				reconciler.MakePlan("bench", d, nil)
			}
			files := float64(size.webhooks + size.automations)
			b.ReportMetric(files*float64(b.N)/b.Elapsed().Seconds(), "files/s")
		})
	}
}
