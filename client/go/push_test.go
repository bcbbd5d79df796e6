package werk

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
)

// plainSpec is JobSpec as encoding/json writes it.
type plainSpec JobSpec

var awkwardStrings = []string{
	"", "plain", `quo"te`, `back\slash`, "<b>&amp;</b>", "a<b", "a>b", "a&b", "tab\there", "nl\n", "\x00\x1f\x7f", "café ünïcode 😀",
	"\u2028\u2029", "bad \xff utf-8", strings.Repeat("long ", 100),
}

var awkwardValues = []any{
	nil, true, false, 0, 1, -42, math.MaxInt64, int64(math.MinInt64), int32(7), uint8(200), uint64(math.MaxUint64),
	0.0, math.Copysign(0, -1), 0.1, -2.5, 1e-6, 9.99e-7, 1e20, 1e21, -1e21, 123456789.125, math.MaxFloat64,
	math.SmallestNonzeroFloat64, float32(0.1), "s", "<x>", "\u00e9", []any{1, "a", nil}, map[string]any{"b": 1, "a": []int{2}},
	json.RawMessage(`{"raw" : true}`), time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), struct{ X int }{3}, []byte("bytes"),
}

func TestSpecsEncodeAsEncodingJSON(t *testing.T) {
	full := JobSpec{
		JID: "j<1>", JobType: "t&t", Args: awkwardValues, Queue: "q", Priority: -3, ReserveFor: 60, Retry: Int(0),
		Backtrace: 5, Custom: map[string]any{"timeout": 2.5, "z": "<", "a": nil}, At: "2026-01-02T03:04:05Z",
		Unique: &Unique{For: 60, Until: "success", By: []string{"args"}}, ExpiresAt: "2026-01-03T00:00:00+01:00",
		ExpiresIn: 1.5, KeepResultFor: 30, DependsOn: []any{"a", Needs{Job: "b", OnFailure: "skip"}},
		OnDependencyFailure: "ignore", Ref: "r", Batch: "b",
	}
	// Every field is set in full, so a field added to JobSpec and not to appendSpec fails here.
	v := reflect.ValueOf(full)
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).IsZero() {
			t.Fatalf("the full spec leaves %s unset", v.Type().Field(i).Name)
		}
	}
	specs := []JobSpec{full, {JID: "j", JobType: "t"}, {JID: "j", JobType: "t", Args: []any{}, Custom: map[string]any{},
		DependsOn: []any{}, Retry: Int(25), ExpiresIn: -1e-9}}
	for _, s := range awkwardStrings {
		specs = append(specs, JobSpec{JID: "j" + s, JobType: s, Queue: s, Args: []any{s}, Ref: s})
	}
	for _, value := range awkwardValues {
		specs = append(specs, JobSpec{JID: "j", JobType: "t", Args: []any{value}, ExpiresIn: toFloat(value)})
	}
	for _, spec := range specs {
		want, err := json.Marshal(plainSpec(spec))
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendSpec(nil, &spec, nil)
		if err != nil || string(got) != string(want) {
			t.Errorf("spec %+v encoded as\n%s (%v), want\n%s", spec, got, err, want)
		}
	}
}

func toFloat(v any) float64 {
	f, _ := v.(float64)
	return f
}

func TestUnencodableSpecsFailBeforeAnythingIsSent(t *testing.T) {
	for _, spec := range []JobSpec{
		{JobType: "t", Args: []any{math.NaN()}},
		{JobType: "t", Args: []any{make(chan int)}},
		{JobType: "t", Custom: map[string]any{"f": func() {}}},
		{JobType: "t", ExpiresIn: math.Inf(1)},
	} {
		_, reference := json.Marshal(plainSpec(spec))
		if reference == nil {
			t.Fatalf("%+v encodes with encoding/json: not a case for this test", spec)
		}
		specs := []JobSpec{{JobType: "fine"}, spec}
		if _, err := batchBodies(specs); err == nil || err.Error() != reference.Error() {
			t.Errorf("batchBodies(%+v) = %v, want %v", spec, err, reference)
		}
		c := NewClient("http://127.0.0.1:1") // nothing listens: a request sent would fail otherwise
		c.Retries = 0
		if _, err := c.PushMany(context.Background(), specs); err == nil || !strings.Contains(err.Error(), "encoding the request") {
			t.Errorf("PushMany(%+v) = %v", spec, err)
		}
		if _, err := c.Push(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "encoding the request") {
			t.Errorf("Push(%+v) = %v", spec, err)
		}
	}
}

func TestBatchBodiesSplitAtMaxBatchAndKeepJIDs(t *testing.T) {
	specs := make([]JobSpec, 2*MaxBatch+1)
	for i := range specs {
		specs[i] = JobSpec{JobType: "t", Args: []any{i}}
	}
	specs[5].JID = "mine"
	bodies, err := batchBodies(specs)
	if err != nil || len(bodies) != 3 {
		t.Fatalf("%d bodies, %v", len(bodies), err)
	}
	var jids []string
	for k, body := range bodies {
		var decoded struct{ Jobs []plainSpec }
		if err := json.Unmarshal(body, &decoded); err != nil {
			t.Fatal(err)
		}
		for i, spec := range decoded.Jobs {
			if n := k*MaxBatch + i; spec.Args[0] != float64(n) || spec.JobType != "t" {
				t.Fatalf("item %d of body %d is %+v", i, k, spec)
			}
			jids = append(jids, spec.JID)
		}
	}
	if len(jids) != len(specs) || jids[5] != "mine" || specs[4].JID != "" {
		t.Fatalf("%d jids, the sixth %q; the caller's spec now has jid %q", len(jids), jids[5], specs[4].JID)
	}
	for i := 1; i < len(jids); i++ {
		if i != 5 && i != 6 && jids[i] <= jids[i-1] {
			t.Fatalf("jid %d (%s) after %s", i, jids[i], jids[i-1])
		}
	}
	if empty, err := batchBodies(nil); err != nil || len(empty) != 1 || string(empty[0]) != `{"jobs":[]}` {
		t.Errorf("no specs: %q %v", empty, err)
	}
}

// PushMany decodes each request's answer into one list: the jobs in input order, conflicts
// indexed over the whole input, a null list adding nothing.
func TestPushManyMergesItsRequestsAnswers(t *testing.T) {
	var requests int
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests++
		var body struct{ Jobs []plainSpec }
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		if requests == 3 {
			_, _ = w.Write([]byte(`{"jobs":null,"created":0}`))
			return
		}
		var answer strings.Builder
		answer.WriteString(`{"jobs":[`)
		for i, spec := range body.Jobs {
			if i > 0 {
				answer.WriteByte(',')
			}
			fmt.Fprintf(&answer, `{"jid":%q,"jobtype":%q,"queue":"q%d","state":"available","args":%s,`+
				`"created_at":"2026-12-05T05:16:24.736679Z","enqueued_at":"2026-12-05T05:16:2%d.5Z"}`,
				spec.JID, spec.JobType, i%2, mustJSON(t, spec.Args), requests)
		}
		fmt.Fprintf(&answer, `],"created":%d,"conflicts":[{"index":1,"existing_jid":"x","on_conflict":"existing"}]}`,
			len(body.Jobs)-1)
		_, _ = w.Write([]byte(answer.String()))
	}))
	defer server.Close()
	specs := make([]JobSpec, MaxBatch+2)
	for i := range specs {
		specs[i] = JobSpec{JobType: []string{"a", "b"}[i/MaxBatch], Args: []any{i}}
	}
	specs[3].JID = "mine"
	got, err := NewClient(server.URL).PushMany(context.Background(), specs)
	if err != nil {
		t.Fatal(err)
	}
	if requests != 2 || len(got.Jobs) != len(specs) || got.Created != len(specs)-2 || len(got.Conflicts) != 2 ||
		got.Conflicts[0].Index != 1 || got.Conflicts[1].Index != MaxBatch+1 || got.Jobs[3].JID != "mine" {
		t.Fatalf("%d requests; %d jobs, created %d, conflicts %+v", requests, len(got.Jobs), got.Created, got.Conflicts)
	}
	for i, job := range got.Jobs {
		second := 21 + i/MaxBatch
		if job.Args[0] != float64(i) || job.JobType != specs[i].JobType || job.Queue != fmt.Sprintf("q%d", i%MaxBatch%2) ||
			job.State != "available" || job.JID == "" || job.EnqueuedAt.Second() != second || job.CreatedAt.Nanosecond() != 736679000 {
			t.Fatalf("job %d: %+v", i, job)
		}
	}
	// A later request answered with no list keeps what the earlier ones gave.
	requests = 1
	got, err = NewClient(server.URL).PushMany(context.Background(), specs[:MaxBatch+1])
	if err != nil || len(got.Jobs) != MaxBatch || got.Jobs[MaxBatch-1].Args[0] != float64(MaxBatch-1) {
		t.Fatalf("%v %d", err, len(got.Jobs))
	}
}

func mustJSON(t *testing.T, v any) string {
	text, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}
