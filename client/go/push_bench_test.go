package werk

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// batchAnswer is the server's full answer to a batch push of n jobs, as it words one.
func batchAnswer(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"jids":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"1a244a1cf1707a864fa171b9%04x"`, i)
	}
	fmt.Fprintf(&b, `],"created":%d,"existed":[],"jobs":[`, n)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"jid":"1a244a1cf1707a864fa171b9%04x","jobtype":"noop","args":[%d],"queue":"bench-peers",`+
			`"priority":0,"reserve_for":1800,"retry":25,"backtrace":0,"custom":{},"at":null,"state":"available",`+
			`"created_at":"2026-12-05T05:16:24.736679Z","enqueued_at":"2026-12-05T05:16:24.736679Z","attempt":0,`+
			`"progress":null,"failure":null,"lease_expires_at":null,"wid":null,"keep_result_for":0,"result":null,`+
			`"completed_at":null,"expires_at":null,"unique":null}`, i, i)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

func benchSpecs(n int) []JobSpec {
	specs := make([]JobSpec, n)
	for i := range specs {
		specs[i] = JobSpec{JobType: "noop", Args: []any{i}, Queue: "bench-peers"}
	}
	return specs
}

// BenchmarkPushMany: a batch push of MaxBatch jobs against a server that answers at once.
func BenchmarkPushMany(b *testing.B) {
	answer := batchAnswer(MaxBatch)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = w.Write(answer)
	}))
	defer server.Close()
	c := NewClient(server.URL)
	specs := benchSpecs(MaxBatch)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.PushMany(context.Background(), specs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchBody: the request body of a batch push.
func BenchmarkBatchBody(b *testing.B) {
	specs := benchSpecs(MaxBatch)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := batchBodies(specs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchAnswer: decoding the full answer to a batch push, as PushMany does.
func BenchmarkBatchAnswer(b *testing.B) {
	answer := batchAnswer(MaxBatch)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		out := pushAnswer{jobs: make([]Job, 0, MaxBatch)}
		if err := out.UnmarshalJSON(answer); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNewJID(b *testing.B) {
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		NewJID()
	}
}

// BenchmarkPush: a single push against a server that answers at once.
func BenchmarkPush(b *testing.B) {
	answer := []byte(`{"jid":"1a244a1cf1707a864fa171b90000","jobtype":"noop","args":[1],"queue":"bench-peers",` +
		`"priority":0,"reserve_for":1800,"retry":25,"backtrace":0,"custom":{},"at":null,"state":"available",` +
		`"created_at":"2026-12-05T05:16:24.736679Z","enqueued_at":"2026-12-05T05:16:24.736679Z","attempt":0,` +
		`"progress":null,"failure":null,"lease_expires_at":null,"wid":null,"keep_result_for":0,"result":null,` +
		`"completed_at":null,"expires_at":null,"unique":null,"created":true}`)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = w.Write(answer)
	}))
	defer server.Close()
	c := NewClient(server.URL)
	spec := JobSpec{JobType: "noop", Args: []any{1}, Queue: "bench-peers"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Push(context.Background(), spec); err != nil {
			b.Fatal(err)
		}
	}
}
