package werk

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
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
	  "dependencies":[{"jid":"d","ref":"r","on_failure":"fail","outcome":"completed","result":{"x":1},"settled_at":null}],
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
		!reflect.DeepEqual(got.Conflicts, want.Conflicts) || !reflect.DeepEqual(got.Refs, want.Refs) {
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
