package werk

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// plain is Job without its UnmarshalJSON: what encoding/json makes of the same bytes.
type plain Job

var jobAnswers = []string{
	`{"jid":"a1","jobtype":"noop","args":[1,-2.5e3,"x",true,false,null,[],{},{"k":[1,{"n":null}]}],"queue":"q",
	  "priority":-3,"reserve_for":1800,"retry":25,"backtrace":0,"custom":{"timeout":2.5,"tenant":"acme","deep":{"a":[1]}},
	  "at":null,"state":"available","created_at":"2026-12-04T19:55:51.539566Z","enqueued_at":"2026-12-04T19:55:51.539566+01:00",
	  "attempt":0,"progress":null,"failure":null,"lease_expires_at":null,"wid":null,"keep_result_for":0,"result":null,
	  "completed_at":null,"expires_at":null,"unique":null,"created":true}`,
	` { "jid" : "esc\"aped\\\/\u00e9\ud83d\ude00" , "jobtype":"caf\u00e9 ünïcode 😀", "args":[], "custom":{},
	  "lease":"l-1", "wid":"w", "lease_expires_at":"2026-12-04T20:25:51Z", "progress":{"step": 3},
	  "failure":{"retry_count":2,"remaining":23,"failed_at":"2026-12-04T19:55:51Z","next_at":null,"errtype":"E",
	  "message":"m","backtrace":["a","b"]},
	  "unique":{"for":60,"until":"success","key":"k","on_conflict":"reject"}, "duplicate":true, "created":false,
	  "result":[1,2], "completed_at":"2026-12-04T19:55:52Z", "keep_result_for":60, "batch":"b1",
	  "dependencies":[{"jid":"d","ref":"r","on_failure":"fail","outcome":"completed","result":{"x":1},"settled_at":null},
	  {"jid":"d2","ref":null,"on_failure":"skip","outcome":"completed","result":null,"result_omitted":true,
	  "settled_at":"2026-12-04T19:55:52Z"}],
	  "dependents":[{"jid":"e","state":"waiting","on_failure":"skip"}],
	  "unknown":{"nested":[1,2,{"x":"y"}],"s":"\n"}, "also_unknown": -0.5e-7 } `,
	`{"jid":null,"args":null,"custom":null,"created_at":null,"priority":null,"state":"x"}`,
	`null`,
}

func TestJobDecodesAsEncodingJSON(t *testing.T) {
	for _, answer := range jobAnswers {
		var want plain
		if err := json.Unmarshal([]byte(answer), &want); err != nil {
			t.Fatalf("reference decode of %s: %v", answer, err)
		}
		var got Job
		if err := json.Unmarshal([]byte(answer), &got); err != nil {
			t.Fatalf("decode of %s: %v", answer, err)
		}
		if !reflect.DeepEqual(plain(got), want) {
			t.Errorf("decoded %s\n got %+v\nwant %+v", answer, got, want)
		}
	}
}

func TestBatchAnswerDecodesAsEncodingJSON(t *testing.T) {
	answer := `{"jids":["a1","b"],"created":1,"existed":["b"],"jobs":[` + jobAnswers[0] + `,` + jobAnswers[1] +
		`],"conflicts":[{"index":1,"existing_jid":"b","on_conflict":"existing"}],"refs":{"r":"a1"}}`
	var want struct {
		Jobs      []plain          `json:"jobs"`
		Created   int              `json:"created"`
		Conflicts []UniqueConflict `json:"conflicts"`
		Refs      map[string]string
		JIDs      []string `json:"jids"`
		Existed   []string `json:"existed"`
	}
	if err := json.Unmarshal([]byte(answer), &want); err != nil {
		t.Fatal(err)
	}
	var got PushManyResult
	if err := got.UnmarshalJSON([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	if len(got.Jobs) != 2 || !reflect.DeepEqual(plain(got.Jobs[0]), want.Jobs[0]) ||
		!reflect.DeepEqual(plain(got.Jobs[1]), want.Jobs[1]) || got.Created != want.Created ||
		!reflect.DeepEqual(got.Conflicts, want.Conflicts) || !reflect.DeepEqual(got.Refs, want.Refs) ||
		!reflect.DeepEqual(got.JIDs, want.JIDs) || !reflect.DeepEqual(got.Existed, want.Existed) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	var none fetched
	if err := none.UnmarshalJSON([]byte(`{"jobs":[]}`)); err != nil || none.Jobs == nil || len(none.Jobs) != 0 {
		t.Errorf("an empty fetch answer decoded as %#v (%v)", none.Jobs, err)
	}
}

func TestInvalidAnswersAreRefused(t *testing.T) {
	for _, answer := range []string{
		``, `{`, `{"jid":"a"`, `{"jid":"a",}`, `{"jid" "a"}`, `{"jid":"a"} x`, `{"jid":"a\q"}`, "{\"jid\":\"a\tb\"}",
		`{"priority":1.5}`, `{"priority":01}`, `{"priority":-}`, `{"args":[1,]}`, `{"args":{}}`, `{"custom":[]}`,
		`{"x":[1 2]}`, `{"x":tru}`, `{"x":"\u12"}`, `{"args":[1e999]}`, `{"created_at":"yesterday"}`, `[]`,
	} {
		var reference plain
		if json.Unmarshal([]byte(answer), &reference) == nil {
			t.Fatalf("%q is valid for encoding/json: not a case for this test", answer)
		}
		var job Job
		if err := job.UnmarshalJSON([]byte(answer)); err == nil {
			t.Errorf("%q decoded without an error", answer)
		}
		if err := (&PushManyResult{}).UnmarshalJSON([]byte(`{"jobs":[` + answer + `]}`)); err == nil && answer != "" {
			t.Errorf("a batch answer holding %q decoded without an error", answer)
		}
	}
}

func TestCountItemsCountsTheTopLevelItems(t *testing.T) {
	for text, want := range map[string]int{
		`[]`:                             0,
		` [ ] `:                          0,
		`[1]`:                            1,
		`[{"a":[1,2,{"b":","}]}, "x,]"]`: 2,
		`["\"],[", {}, [], null, -1.5]`:  5,
		`[[1,2],[3],{"k":"v","l":[]}]`:   3,
		`{"a":1}`:                        0,
	} {
		r := &jsonReader{data: []byte(text)}
		if got := r.countItems(); got != want {
			t.Errorf("countItems(%s) = %d, want %d", text, got, want)
		}
		if r.pos != len(text)-len(strings.TrimLeft(text, " ")) {
			t.Errorf("countItems(%s) moved the reader past the spaces", text)
		}
	}
}

// The times the server writes are read without time.Parse, to the same time.Time; any other
// form is left to time.Parse.
func TestUTCTimesReadAsTimeParse(t *testing.T) {
	fast := []string{
		"2026-12-05T05:16:24.736679Z", "2026-12-05T05:16:24Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999999Z",
		"2024-02-29T12:00:00.5Z", "2026-01-31T00:00:00.123456789Z", "2000-02-29T01:02:03.000000Z", "1970-01-01T00:00:00.1Z",
	}
	others := []string{
		"2026-12-05T05:16:24.736679+00:00", "2026-12-05T05:16:24+01:00", "2026-12-05t05:16:24Z", "2026-12-05T05:16:24z",
		"2026-12-05 05:16:24Z", "2026-12-05T05:16:24.Z", "2026-12-05T05:16:24,5Z", "2026-12-05T05:16:24.1234567891Z",
		"2023-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
		"2026-01-00T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:60:00Z", "2026-01-01T00:00:60Z", "2026-1-01T00:00:00Z",
		"+2026-01-01T00:00:00Z", "20261-01-01T00:00:00Z", "2026-01-01T00:00:0aZ", "2026-01-01T00:00:00.1aZ", "-001-01-01T00:00:00Z",
		"2026-01-01T00:00:00.-1Z", "2026-01-01T00:00:00+1Z", "yesterday", "", "Z",
	}
	for _, text := range append(fast, others...) {
		raw := []byte(`"` + text + `"`)
		want, wantErr := time.Parse(time.RFC3339, text)
		got, ok := utcTime(raw)
		if ok != (wantErr == nil && contains(fast, text)) {
			t.Errorf("%s: read without time.Parse %v", text, ok)
		}
		if ok && (!reflect.DeepEqual(got, want) || got.Location() != time.UTC) {
			t.Errorf("%s read as %v, time.Parse gives %v", text, got, want)
		}
		var job Job
		err := job.UnmarshalJSON([]byte(`{"created_at":` + string(raw) + `}`))
		if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(job.CreatedAt, want) && err == nil {
			t.Errorf("%s decoded as %v (%v), time.Parse gives %v (%v)", text, job.CreatedAt, err, want, wantErr)
		}
	}
	// Each month's last day, leap years included.
	for year := 1999; year <= 2101; year++ {
		for month := time.January; month <= time.December; month++ {
			for day := 28; day <= 32; day++ {
				text := fmt.Sprintf("%04d-%02d-%02dT00:00:00Z", year, month, day)
				want, wantErr := time.Parse(time.RFC3339, text)
				got, ok := utcTime([]byte(`"` + text + `"`))
				if ok != (wantErr == nil) || ok && !got.Equal(want) {
					t.Fatalf("%s: %v %v, time.Parse %v %v", text, got, ok, want, wantErr)
				}
			}
		}
	}
}

// decodeList decodes a batch answer holding jobs with the decoder and with encoding/json: the
// errors (whether there is one) and the jobs must agree.
func decodeList(t *testing.T, jobs []string) {
	t.Helper()
	answer := `{"jids":["1a244a1cf1707a864fa171b90000","1a244a1cf1707a864fa171b90001"],"jobs":[` +
		strings.Join(jobs, ",") + `]}`
	var want struct {
		Jobs []plain `json:"jobs"`
	}
	wantErr := json.Unmarshal([]byte(answer), &want)
	for _, into := range [][]Job{nil, make([]Job, 0, len(jobs))} {
		var got pushAnswer
		got.jobs = into
		err := got.UnmarshalJSON([]byte(answer))
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("%s\ndecoded with error %v, encoding/json with %v", answer, err, wantErr)
		}
		if err != nil {
			continue
		}
		if len(got.Jobs) != len(want.Jobs) {
			t.Fatalf("%s\ndecoded %d jobs, encoding/json %d", answer, len(got.Jobs), len(want.Jobs))
		}
		for k := range got.Jobs {
			if !reflect.DeepEqual(plain(got.Jobs[k]), want.Jobs[k]) {
				t.Fatalf("%s\njob %d decoded as\n%+v\nencoding/json gives\n%+v", answer, k, got.Jobs[k], want.Jobs[k])
			}
		}
	}
}

// The jobs of a list are read by the places of their members in the job before: jobs alike,
// jobs that differ from the one before by a value, a name, an order, white space, a null or a
// member more or less decode as encoding/json decodes them.
func TestJobListsDecodeAsEncodingJSON(t *testing.T) {
	const job = `{"jid":"1a244a1cf1707a864fa171b90000","jobtype":"noop","args":[1],"queue":"q","priority":0,` +
		`"reserve_for":1800,"retry":25,"backtrace":0,"custom":{},"at":null,"state":"available",` +
		`"created_at":"2026-12-05T05:16:24.736679Z","enqueued_at":"2026-12-05T05:16:24.736679Z","attempt":0,` +
		`"progress":null,"failure":null,"lease_expires_at":null,"wid":null,"keep_result_for":0,"result":null,` +
		`"completed_at":null,"expires_at":null,"unique":null,"x":[1,{"y":2}],"batch":"b","duplicate":false}`
	// A dependency whose result the answer left out.
	const dependency = `{"jid":"1a244a1cf1707a864fa171b90002","ref":null,"on_failure":"fail","outcome":"completed",` +
		`"result":null,"result_omitted":true,"settled_at":"2026-12-05T05:16:24.736679Z"}`
	variants := []string{
		job,
		strings.Replace(job, `"jid":"1a244a1cf1707a864fa171b90000"`, `"jid":"1a244a1cf1707a864fa171b90001"`, 1),
		strings.Replace(job, `"priority":0`, `"priority":01`, 1),
		strings.Replace(job, `"priority":0`, `"priority":0.5`, 1),
		strings.Replace(job, `"priority":0,`, `"priority":0 ,`, 1),
		strings.Replace(job, `"priority":0,`, `"priority": 0,`, 1),
		strings.Replace(job, `"priority":0,`, `"priority":07,`, 1),
		strings.Replace(job, `"priority":0,`, `"priority":-0,`, 1),
		strings.Replace(job, `"retry":25`, `"retry":250`, 1),
		strings.Replace(job, `"retry":25`, `"retry":2`, 1),
		strings.Replace(job, `"retry":25`, `"retry":null`, 1),
		strings.Replace(job, `"retry":25`, `"retry":nul`, 1),
		strings.Replace(job, `"retry":25`, `"retry":"25"`, 1),
		strings.Replace(job, `"state":"available"`, `"state":"availablex"`, 1),
		strings.Replace(job, `"state":"available"`, `"state":"avail\u0061ble"`, 1),
		strings.Replace(job, `"state":"available"`, `"state":"available`, 1),
		strings.Replace(job, `"state":"available"`, `"state":null`, 1),
		strings.Replace(job, `"state":"available"`, `"st\u0061te":"available"`, 1),
		strings.Replace(job, `"at":null`, `"at":"2026-12-05T05:16:25Z"`, 1),
		strings.Replace(job, `"at":null`, `"at":"2026-12-05T06:16:25+01:00"`, 1),
		strings.Replace(job, `"at":null`, `"at":nullx`, 1),
		strings.Replace(job, `"created_at":"2026-12-05T05:16:24.736679Z"`, `"created_at":"2026-12-05T05:16:24.73668Z"`, 1),
		strings.Replace(job, `"created_at":"2026-12-05T05:16:24.736679Z"`, `"created_at":null`, 1),
		strings.Replace(job, `"enqueued_at":"2026-12-05T05:16:24.736679Z"`, `"enqueued_at":null`, 1),
		strings.Replace(job, `"progress":null`, `"progress":{"step":1}`, 1),
		strings.Replace(job, `"result":null`, `"result":[1,2]`, 1),
		strings.Replace(job, `"custom":{}`, `"custom":{"a":1}`, 1),
		strings.Replace(job, `"custom":{}`, `"custom":null`, 1),
		strings.Replace(job, `"args":[1]`, `"args":[1,"x",null]`, 1),
		strings.Replace(job, `"args":[1]`, `"args":null`, 1),
		strings.Replace(job, `"x":[1,{"y":2}]`, `"x":[1,{"y":3}]`, 1),
		strings.Replace(job, `"x":[1,{"y":2}]`, `"x":[1,{"y":2}`, 1),
		strings.Replace(job, `"duplicate":false}`, `"duplicate":true}`, 1),
		strings.Replace(job, `"duplicate":false}`, `"duplicate":false }`, 1),
		strings.Replace(job, `"duplicate":false}`, `"duplicate":false,"priority":3}`, 1),
		strings.Replace(job, `"duplicate":false}`, `"duplicate":false,"retry":null,"retry":4}`, 1),
		strings.Replace(job, `"duplicate":false}`, `"duplicate":false,}`, 1),
		strings.Replace(job, `"duplicate":false}`, `"duplicate":false`, 1),
		strings.Replace(job, `"queue":"q","priority":0,`, `"priority":0,"queue":"q",`, 1),
		strings.Replace(job, `"queue":"q",`, ``, 1),
		strings.Replace(job, `"keep_result_for":0,`, `"keep_result_for":0,"keep_result_for":5,`, 1),
		strings.Replace(job, `{"jid"`, `{ "jid"`, 1),
		strings.Replace(job, `"batch":"b"`, `"batch":"b","dependencies":[`+dependency+`]`, 1),
		strings.Replace(job, `"batch":"b"`, `"batch":"b","dependencies":[`+dependency+`,`+
			strings.Replace(dependency, `"result":null,"result_omitted":true`, `"result":[1],"result_omitted":false`, 1)+`]`, 1),
		strings.Replace(job, `"batch":"b"`, `"batch":"b","dependencies":[`+
			strings.Replace(dependency, `"result_omitted":true`, `"result_omitted":null`, 1)+`]`, 1),
		strings.Replace(job, `"batch":"b"`, `"batch":"b","dependencies":[`+
			strings.Replace(dependency, `"result_omitted":true`, `"result_omitted":1`, 1)+`]`, 1),
		`{}`, `null`, `{"state":"x"}`,
	}
	for _, a := range variants {
		decodeList(t, []string{a, a, a})
		for _, b := range variants {
			decodeList(t, []string{a, b, a})
		}
	}
}

// Each byte of a job changed, taken out or doubled, after a job alike and before another: the
// decoder refuses what encoding/json refuses and reads the rest as it does.
func TestChangedJobsInListsDecodeAsEncodingJSON(t *testing.T) {
	const job = `{"jid":"1a244a1cf1707a864fa171b90000","jobtype":"noop","args":[1],"queue":"q","priority":0,` +
		`"reserve_for":1800,"retry":25,"custom":{},"at":null,"state":"available",` +
		`"created_at":"2026-12-05T05:16:24.736679Z","enqueued_at":"2026-12-05T05:16:24.736679Z",` +
		`"progress":null,"wid":null,"result":null,"zz":1,"dependencies":[{"jid":"d","ref":null,"outcome":"completed",` +
		`"result":null,"result_omitted":true}]}`
	for i := 0; i < len(job); i++ {
		changed := []string{job[:i] + job[i+1:], job[:i] + job[i:i+1] + job[i:]}
		for _, c := range []string{" ", "0", "1", `"`, ",", "}", "]", "n", `\`, "\t", "\u00e9", "\xff"} {
			changed = append(changed, job[:i]+c+job[i+1:])
		}
		for _, b := range changed {
			decodeList(t, []string{job, b, job})
		}
	}
}

// Strings are read eight bytes at a time up to a quote, a backslash, a control character or a
// byte of a multi-byte character, wherever it falls: each is read as encoding/json reads it.
func TestStringsDecodeAsEncodingJSON(t *testing.T) {
	for n := 0; n < 20; n++ {
		for at := 0; at <= n; at++ {
			for _, c := range []string{`"`, `\`, `\n`, `\u00e9`, `\x`, "\x01", "\x1f", "\x7f", "\u00e9", "\xff", "\xc3", "é\\n"} {
				text := strings.Repeat("a", at) + c + strings.Repeat("b", n-at)
				for _, tail := range []string{"", "}", `,"more":"text to read after it"}`} {
					data := `"` + text + `"` + tail
					var want string
					reference := json.NewDecoder(strings.NewReader(data))
					wantErr := reference.Decode(&want)
					r := &jsonReader{data: []byte(data)}
					got, err := r.str()
					if (err == nil) != (wantErr == nil) || err == nil && (got != want || int64(r.pos) != reference.InputOffset()) {
						t.Errorf("%q: read %q (%v) to %d, encoding/json %q (%v) to %d", data, got, err, r.pos, want, wantErr,
							reference.InputOffset())
					}
				}
			}
		}
	}
}

// The jids of a list are cut from one string; a list with escapes is read string by string.
func TestStringListsDecodeAsEncodingJSON(t *testing.T) {
	for _, list := range []string{`[]`, ` [ ] `, `["a"]`, `["a","b", "c" ,"d"]`, `["a\n","b"]`, `["é","\u00e9"]`,
		`["a",1]`, `["a",]`, `["a"`, `["a" "b"]`, `null`, `["",""]`} {
		var want struct {
			JIDs []string `json:"jids"`
		}
		answer := `{"jids":` + list + `}`
		wantErr := json.Unmarshal([]byte(answer), &want)
		var got PushManyResult
		err := got.UnmarshalJSON([]byte(answer))
		if (err == nil) != (wantErr == nil) || err == nil && !reflect.DeepEqual(got.JIDs, want.JIDs) {
			t.Errorf("%s: read %#v (%v), encoding/json %#v (%v)", list, got.JIDs, err, want.JIDs, wantErr)
		}
	}
}

// Values cut from one slab are each their own: appending to one leaves the next job's alone.
func TestJobsOfAListShareNothingWritable(t *testing.T) {
	var got PushManyResult
	if err := got.UnmarshalJSON(batchAnswer(3)); err != nil {
		t.Fatal(err)
	}
	a, b := got.Jobs[0], got.Jobs[1]
	_ = append(a.Args, "x")
	_ = append(a.Progress, 'x')
	_ = append(a.Result, 'x')
	*a.EnqueuedAt = time.Time{}
	a.Custom["k"] = 1
	if b.Args[0] != 1.0 || string(b.Progress) != "null" || string(b.Result) != "null" || b.EnqueuedAt.IsZero() ||
		len(b.Custom) != 0 || len(b.Args) != 1 {
		t.Errorf("changing one job changed the next: %+v", b)
	}
}

// An answer naming its jobs twice is answered by its second list, as that list alone decodes:
// nothing of the first list's jobs is left in them.
func TestJobsNamedTwiceAreTheSecondList(t *testing.T) {
	answer := `{"jobs":[{"jid":"a","priority":3,"state":"s"},{"jid":"b","priority":4}],"jobs":[{"jid":"c"},{"jid":"d"}]}`
	var want struct {
		Jobs []plain `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(`{"jobs":[{"jid":"c"},{"jid":"d"}]}`), &want); err != nil {
		t.Fatal(err)
	}
	got := pushAnswer{jobs: make([]Job, 0, 2)}
	if err := got.UnmarshalJSON([]byte(answer)); err != nil {
		t.Fatal(err)
	}
	if len(got.Jobs) != 2 || !reflect.DeepEqual(plain(got.Jobs[0]), want.Jobs[0]) || !reflect.DeepEqual(plain(got.Jobs[1]), want.Jobs[1]) {
		t.Errorf("got %+v\nwant %+v", got.Jobs, want.Jobs)
	}
}

// A dependency whose result an answer left out says so (result_omitted, sent only when true),
// in a job read alone and in the jobs of a fetch, and says it again only when true.
func TestOmittedDependencyResultsDecode(t *testing.T) {
	var job Job
	if err := job.UnmarshalJSON([]byte(jobAnswers[1])); err != nil {
		t.Fatal(err)
	}
	var list fetched
	if err := list.UnmarshalJSON([]byte(`{"jobs":[` + jobAnswers[1] + `,` + jobAnswers[1] + `]}`)); err != nil {
		t.Fatal(err)
	}
	for _, j := range []Job{job, list.Jobs[0], list.Jobs[1]} {
		deps := j.Dependencies
		if len(deps) != 2 || deps[0].ResultOmitted || string(deps[0].Result) != `{"x":1}` ||
			!deps[1].ResultOmitted || string(deps[1].Result) != "null" {
			t.Fatalf("dependencies decoded as %+v", deps)
		}
		encoded, err := json.Marshal(deps)
		if err != nil || strings.Count(string(encoded), `"result_omitted":true`) != 1 ||
			strings.Count(string(encoded), `"result_omitted"`) != 1 {
			t.Fatalf("dependencies encoded as %s (%v)", encoded, err)
		}
	}
}
