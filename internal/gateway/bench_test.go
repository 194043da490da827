package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"factory"
	"factory/internal/gateway"
)

// sseUpstream is a provider that streams an Anthropic message: its start
// at once, then size bytes of text deltas, then its usage.
func sseUpstream(size int) *httptest.Server {
	delta := []byte("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"" +
		strings.Repeat("x", 1000) + "\"}}\n\n")
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n")
		w.(http.Flusher).Flush()
		for sent := 0; sent < size; sent += len(delta) {
			if _, err := w.Write(delta); err != nil {
				return
			}
		}
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":100}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
}

// benchGateway is a gateway in front of up, with one live run and its
// token.
func benchGateway(b *testing.B, up string) (url, token string) {
	tokens := &gateway.Tokens{Key: []byte("bench key")}
	runs := &fakeRuns{runs: map[string]*factory.Run{"run_live": {ID: "run_live", State: factory.StateInProgress}}}
	g := gateway.New(gateway.Config{Tokens: tokens, Runs: runs, Providers: map[string]gateway.Provider{gateway.Anthropic: {URL: up}},
		Key: func(*factory.Run, string) ([]byte, error) { return []byte(realKey), nil }})
	mux := http.NewServeMux()
	mux.Handle(gateway.Prefix, g)
	gw := httptest.NewServer(mux)
	b.Cleanup(gw.Close)
	return gw.URL + gateway.Prefix + "anthropic", tokens.Mint("run_live")
}

// firstByte is how long a streamed call takes to its first byte; the rest
// is read and dropped a buffer at a time.
func firstByte(b *testing.B, url, token string) time.Duration {
	req, _ := http.NewRequest("POST", url+"/v1/messages", strings.NewReader(calls[0].body))
	req.Header.Set("x-api-key", token)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 32<<10)
	if n, err := resp.Body.Read(buf); n == 0 {
		b.Fatalf("no first byte: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("%s", resp.Status)
	}
	d := time.Since(start)
	if _, err := io.CopyBuffer(io.Discard, resp.Body, buf); err != nil {
		b.Fatal(err)
	}
	return d
}

func p99(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[(len(ds)*99)/100]
}

// BenchmarkGateway: streaming through the gateway adds at most 2 ms to the
// first token at p99 (against the same provider called directly), and
// copies one chunk at a time: the heap stays flat through a 100 MB stream.
func BenchmarkGateway(b *testing.B) {
	b.Run("first-token", func(b *testing.B) {
		up := sseUpstream(10 << 10)
		defer up.Close()
		url, token := benchGateway(b, up.URL)
		var direct, through []time.Duration
		for range 20 { // warm both paths' connections
			firstByte(b, up.URL, token)
			firstByte(b, url, token)
		}
		b.ResetTimer()
		for i := 0; i < b.N || len(through) < 200; i++ {
			direct = append(direct, firstByte(b, up.URL, token))
			through = append(through, firstByte(b, url, token))
		}
		added := p99(through) - p99(direct)
		b.ReportMetric(float64(added.Microseconds())/1000, "added-p99-ms")
		if added > 2*time.Millisecond {
			b.Errorf("the gateway adds %s to the first byte at p99 (direct %s, through %s): over 2ms", added, p99(direct), p99(through))
		}
	})
	b.Run("100MB", func(b *testing.B) {
		up := sseUpstream(100 << 20)
		defer up.Close()
		url, token := benchGateway(b, up.URL)
		firstByte(b, url, token) // warm
		runtime.GC()
		var base runtime.MemStats
		runtime.ReadMemStats(&base)
		var peak atomic.Uint64
		done := make(chan struct{})
		go func() {
			var m runtime.MemStats
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
				runtime.ReadMemStats(&m)
				if m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}()
		b.ResetTimer()
		for range b.N {
			firstByte(b, url, token)
		}
		b.StopTimer()
		close(done)
		b.SetBytes(100 << 20)
		grew := int64(peak.Load()) - int64(base.HeapInuse)
		b.ReportMetric(float64(grew)/(1<<20), "heap-growth-MB")
		if grew > 16<<20 {
			b.Errorf("the heap grew by %d MB through a 100 MB stream: the gateway holds more than a chunk", grew>>20)
		}
	})
}
