package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"factory/internal/reconciler"
	"factory/internal/testfactory"
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

// BenchmarkValidateAndPlanV1Alpha1 is BenchmarkValidateAndPlan for the
// v1alpha1 layout: 1,000 nested automations (half with GitHub triggers,
// each run by one of 20 agents) beside the agents, their skills, runners
// and 20 webhooks, all checked across files. Its baseline is the flat
// benchmark's 1,000 automations, in the same run.
func BenchmarkValidateAndPlanV1Alpha1(b *testing.B) {
	dir := b.TempDir()
	testfactory.GenerateV1Alpha1(b, dir, 20, 1000)
	src := reconciler.DirSource{Root: dir}
	files := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		snap, err := src.Fetch(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		files = len(snap.Files)
		d, ds := reconciler.Load(snap)
		if ds.HasErrors() {
			b.Fatal(ds.Errors()[:1])
		}
		reconciler.MakePlan("bench", d, nil)
	}
	b.ReportMetric(float64(files)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
}

// BenchmarkSync measures the server's sync of a directory factory of 20
// webhooks and 1,000 automations: a no-op (nothing changed; target under
// 20 ms and no store write), and an apply of a one-file change (target: one
// synced batch). The baseline is the same at 1/100th of the automations.
// writes/op is store batches committed per sync.
func BenchmarkSync(b *testing.B) {
	for _, size := range []int{10, 1000} {
		dir := b.TempDir()
		testfactory.Generate(b, dir, 20, size)
		// References resolve: import the UIDs the generator's automations select.
		a := openApplier(b, b.TempDir())
		pins := a.Store.NewBatch()
		for i := 0; i < 20; i++ {
			pins.PinWebhookUID("bench", fmt.Sprintf("hook-%03d", i), fmt.Sprintf("wh_0000000000000000%04d", i))
		}
		if err := pins.Commit(); err != nil {
			b.Fatal(err)
		}
		a.Loader = &reconciler.Loader{}
		src := reconciler.DirSource{Root: dir}
		if _, outcome, err := a.Sync(context.Background(), "bench", src); err != nil || outcome != reconciler.Applied {
			b.Fatalf("first sync: %v %v", outcome, err)
		}
		b.Run(fmt.Sprintf("noop/automations=%d", size), func(b *testing.B) {
			writes := a.Store.Writes()
			for i := 0; i < b.N; i++ {
				if _, outcome, err := a.Sync(context.Background(), "bench", src); err != nil || outcome != reconciler.Unchanged {
					b.Fatalf("no-op sync: %v %v", outcome, err)
				}
			}
			b.ReportMetric(float64(a.Store.Writes()-writes)/float64(b.N), "writes/op")
		})
		b.Run(fmt.Sprintf("one-file-change/automations=%d", size), func(b *testing.B) {
			file := filepath.Join(dir, "automations", "auto-0000.md")
			orig, _ := os.ReadFile(file)
			writes := a.Store.Writes()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				os.WriteFile(file, []byte(strings.Replace(string(orig), "Automation 0", fmt.Sprintf("Automation 0 (edit %d)", i), 1)), 0o644)
				b.StartTimer()
				if _, outcome, err := a.Sync(context.Background(), "bench", src); err != nil || outcome != reconciler.Applied {
					b.Fatalf("sync of a change: %v %v", outcome, err)
				}
			}
			b.ReportMetric(float64(a.Store.Writes()-writes)/float64(b.N), "writes/op")
		})
		a.Store.Close()
	}
}
