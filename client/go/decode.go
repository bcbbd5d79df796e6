package werk

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// The answers a producer and a worker read in bulk (jobs, and the lists of jobs a batch push or a
// fetch answers with) are decoded in one pass over their bytes: encoding/json first validates a
// whole answer, then builds every job through reflection. The rarer nested parts of a job
// (failure, unique lock, dependencies) still go through encoding/json, as does any string with
// escapes, so what a field holds is what encoding/json would give it.

// jsonReader reads one JSON value from data, strictly: anything that is not JSON is an error.
type jsonReader struct {
	data []byte
	pos  int
	// The last job's type, queue and state: the jobs of one answer mostly share them, and
	// share one copy of each.
	jobType, queue, state string
}

func (r *jsonReader) fail(what string) error {
	return fmt.Errorf("werk: invalid JSON at offset %d: %s", r.pos, what)
}

func (r *jsonReader) space() {
	if r.pos < len(r.data) && r.data[r.pos] > ' ' {
		return // the server writes no white space
	}
	for r.pos < len(r.data) {
		switch r.data[r.pos] {
		case ' ', '\t', '\n', '\r':
			r.pos++
		default:
			return
		}
	}
}

// peek is the next byte after white space (0 at the end).
func (r *jsonReader) peek() byte {
	r.space()
	if r.pos < len(r.data) {
		return r.data[r.pos]
	}
	return 0
}

// end checks that nothing but white space follows the value.
func (r *jsonReader) end() error {
	if r.space(); r.pos != len(r.data) {
		return r.fail("data after the value")
	}
	return nil
}

// object calls field for each member of an object; field reads the member's value.
func (r *jsonReader) object(field func(key []byte) error) error {
	if r.peek() != '{' {
		return r.fail("expected an object")
	}
	r.pos++
	if r.peek() == '}' {
		r.pos++
		return nil
	}
	for {
		if r.peek() != '"' {
			return r.fail("expected a member name")
		}
		key, err := r.key()
		if err != nil {
			return err
		}
		if r.peek() != ':' {
			return r.fail("expected ':'")
		}
		r.pos++
		if err := field(key); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.pos++
		case '}':
			r.pos++
			return nil
		default:
			return r.fail("expected ',' or '}'")
		}
	}
}

// array calls item for each element of an array; item reads the element.
func (r *jsonReader) array(item func() error) error {
	if r.peek() != '[' {
		return r.fail("expected an array")
	}
	r.pos++
	if r.peek() == ']' {
		r.pos++
		return nil
	}
	for {
		if err := item(); err != nil {
			return err
		}
		switch r.peek() {
		case ',':
			r.pos++
		case ']':
			r.pos++
			return nil
		default:
			return r.fail("expected ',' or ']'")
		}
	}
}

// null reads a null if one comes next.
func (r *jsonReader) null() bool {
	if r.peek() == 'n' && r.literal("null") == nil {
		return true
	}
	return false
}

func (r *jsonReader) literal(word string) error {
	if len(r.data)-r.pos < len(word) || string(r.data[r.pos:r.pos+len(word)]) != word {
		return r.fail("expected " + word)
	}
	r.pos += len(word)
	return nil
}

// quoted skips a string, reporting whether it holds escapes or bytes that are not plain UTF-8
// text (encoding/json then decides what it holds).
func (r *jsonReader) quoted() (raw []byte, plain bool, err error) {
	if r.peek() != '"' {
		return nil, false, r.fail("expected a string")
	}
	data, start := r.data, r.pos
	plain = true
	ascii := true
	for i := start + 1; i < len(data); i++ {
		for i < len(data) && plainText[data[i]] {
			i++
		}
		if i == len(data) {
			break
		}
		switch c := data[i]; {
		case c == '"':
			r.pos = i + 1
			raw = data[start:r.pos]
			if plain && !ascii && !utf8.Valid(raw) {
				plain = false
			}
			return raw, plain, nil
		case c == '\\':
			plain = false
			i++
		case c < 0x20:
			r.pos = i
			return nil, false, r.fail("control character in a string")
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	r.pos = len(data)
	return nil, false, r.fail("unterminated string")
}

// plainText: the bytes a string holds as they stand (not a quote, a backslash, a control
// character or part of a multi-byte character).
var plainText = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// key reads a member name: its bytes as they stand unless it holds escapes.
func (r *jsonReader) key() ([]byte, error) {
	raw, plain, err := r.quoted()
	if err != nil || plain {
		return raw[1 : len(raw)-1], err
	}
	var s string
	return []byte(s), json.Unmarshal(raw, &s)
}

// reused reads a string, giving *last itself when they are equal, and keeps it in *last.
func (r *jsonReader) reused(last *string) (string, error) {
	raw, plain, err := r.quoted()
	if err != nil {
		return "", err
	}
	if !plain {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	if text := raw[1 : len(raw)-1]; string(text) != *last {
		*last = string(text)
	}
	return *last, nil
}

func (r *jsonReader) str() (string, error) {
	raw, plain, err := r.quoted()
	if err != nil {
		return "", err
	}
	if plain {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// number skips a number, returning its text.
func (r *jsonReader) number() ([]byte, error) {
	r.space()
	start := r.pos
	digits := func() int {
		n := 0
		for r.pos < len(r.data) && r.data[r.pos] >= '0' && r.data[r.pos] <= '9' {
			r.pos++
			n++
		}
		return n
	}
	if r.pos < len(r.data) && r.data[r.pos] == '-' {
		r.pos++
	}
	if n := digits(); n == 0 || (n > 1 && r.data[r.pos-n] == '0') {
		return nil, r.fail("invalid number")
	}
	if r.pos < len(r.data) && r.data[r.pos] == '.' {
		r.pos++
		if digits() == 0 {
			return nil, r.fail("invalid number")
		}
	}
	if r.pos < len(r.data) && (r.data[r.pos] == 'e' || r.data[r.pos] == 'E') {
		r.pos++
		if r.pos < len(r.data) && (r.data[r.pos] == '+' || r.data[r.pos] == '-') {
			r.pos++
		}
		if digits() == 0 {
			return nil, r.fail("invalid number")
		}
	}
	return r.data[start:r.pos], nil
}

func (r *jsonReader) int() (int, error) {
	text, err := r.number()
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(text))
	if err != nil {
		return 0, fmt.Errorf("werk: %s is not an int", text)
	}
	return n, nil
}

func (r *jsonReader) bool() (bool, error) {
	if r.peek() == 't' {
		return true, r.literal("true")
	}
	return false, r.literal("false")
}

// raw skips any value, returning its bytes.
func (r *jsonReader) raw() ([]byte, error) {
	start := r.peekPos()
	var err error
	switch r.peek() {
	case '{':
		err = r.object(func([]byte) error { _, err := r.raw(); return err })
	case '[':
		err = r.array(func() error { _, err := r.raw(); return err })
	case '"':
		var plain bool
		_, plain, err = r.quoted()
		if err == nil && !plain && !json.Valid(r.data[start:r.pos]) {
			err = r.fail("invalid string escape")
		}
	case 't', 'f':
		_, err = r.bool()
	case 'n':
		err = r.literal("null")
	default:
		_, err = r.number()
	}
	return r.data[start:r.pos], err
}

func (r *jsonReader) peekPos() int {
	r.space()
	return r.pos
}

// value reads any value as encoding/json does into an interface{}: objects as map[string]any,
// arrays as []any, numbers as float64.
func (r *jsonReader) value() (any, error) {
	switch r.peek() {
	case '{':
		m := map[string]any{}
		err := r.object(func(key []byte) error {
			v, err := r.value()
			m[string(key)] = v
			return err
		})
		return m, err
	case '[':
		a := []any{}
		err := r.array(func() error {
			v, err := r.value()
			a = append(a, v)
			return err
		})
		return a, err
	case '"':
		return r.str()
	case 't', 'f':
		return r.bool()
	case 'n':
		return nil, r.literal("null")
	}
	text, err := r.number()
	if err != nil {
		return nil, err
	}
	f, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return nil, fmt.Errorf("werk: number %s out of range", text)
	}
	return f, nil
}

// into decodes the next value with encoding/json (the rarer nested parts of a job).
func (r *jsonReader) into(v any) error {
	raw, err := r.raw()
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

// copied is the next value's bytes, copied (a json.RawMessage outlives the answer's buffer).
func (r *jsonReader) copied() (json.RawMessage, error) {
	raw, err := r.raw()
	return append(json.RawMessage(nil), raw...), err
}

func (r *jsonReader) time(t *time.Time) error {
	raw, _, err := r.quoted()
	if err != nil {
		return err
	}
	if parsed, ok := utcTime(raw); ok {
		*t = parsed
		return nil
	}
	return t.UnmarshalJSON(raw)
}

// utcTime reads the form the server writes its times in, a quoted RFC 3339 time at UTC
// ("2006-01-02T15:04:05.999999999Z"), to what time.Parse gives; false for any other form, or a
// time out of range, which time.Parse then reads or refuses.
func utcTime(raw []byte) (time.Time, bool) {
	// "YYYY-MM-DDTHH:MM:SS" and "Z", in quotes; up to nine digits of a second between.
	if len(raw) < 22 || raw[0] != '"' || raw[5] != '-' || raw[8] != '-' || raw[11] != 'T' ||
		raw[14] != ':' || raw[17] != ':' || raw[len(raw)-2] != 'Z' || raw[len(raw)-1] != '"' {
		return time.Time{}, false
	}
	year, ok1 := digits(raw[1:5])
	month, ok2 := digits(raw[6:8])
	day, ok3 := digits(raw[9:11])
	hour, ok4 := digits(raw[12:14])
	minute, ok5 := digits(raw[15:17])
	second, ok6 := digits(raw[18:20])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 ||
		day > daysIn(time.Month(month), year) || hour > 23 || minute > 59 || second > 59 {
		return time.Time{}, false
	}
	nanos := 0
	if fraction := raw[20 : len(raw)-2]; len(fraction) > 0 {
		n, ok := digits(fraction[1:])
		if fraction[0] != '.' || !ok || len(fraction) < 2 || len(fraction) > 10 {
			return time.Time{}, false
		}
		for i := len(fraction); i < 10; i++ {
			n *= 10
		}
		nanos = n
	}
	return time.Date(year, time.Month(month), day, hour, minute, second, nanos, time.UTC), true
}

// digits reads a run of decimal digits (false: something else, or none).
func digits(text []byte) (int, bool) {
	n := 0
	for _, c := range text {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, len(text) > 0
}

func daysIn(month time.Month, year int) int {
	if month == time.February {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return 31 - int((month-1)%7%2)
}

// optTime reads a time or null (nil).
func (r *jsonReader) optTime() (*time.Time, error) {
	if r.null() {
		return nil, nil
	}
	t := new(time.Time)
	return t, r.time(t)
}

func (r *jsonReader) optString() (*string, error) {
	if r.null() {
		return nil, nil
	}
	s, err := r.str()
	return &s, err
}

// UnmarshalJSON decodes a job as the server sends it.
func (j *Job) UnmarshalJSON(data []byte) error {
	r := &jsonReader{data: data}
	if err := r.job(j); err != nil {
		return err
	}
	return r.end()
}

func (r *jsonReader) job(j *Job) error {
	if r.null() {
		return nil
	}
	return r.object(func(key []byte) error {
		var err error
		if r.null() {
			j.clear(key)
			return nil
		}
		switch string(key) {
		case "jid":
			j.JID, err = r.str()
		case "jobtype":
			j.JobType, err = r.reused(&r.jobType)
		case "args":
			j.Args = []any{}
			err = r.array(func() error {
				v, err := r.value()
				j.Args = append(j.Args, v)
				return err
			})
		case "queue":
			j.Queue, err = r.reused(&r.queue)
		case "priority":
			j.Priority, err = r.int()
		case "reserve_for":
			j.ReserveFor, err = r.int()
		case "retry":
			j.Retry, err = r.int()
		case "backtrace":
			j.Backtrace, err = r.int()
		case "custom":
			if r.peek() != '{' {
				return r.fail("custom: expected an object")
			}
			var v any
			v, err = r.value()
			j.Custom, _ = v.(map[string]any)
		case "at":
			j.At, err = r.optTime()
		case "state":
			j.State, err = r.reused(&r.state)
		case "created_at":
			err = r.time(&j.CreatedAt)
		case "enqueued_at":
			j.EnqueuedAt, err = r.optTime()
		case "attempt":
			j.Attempt, err = r.int()
		case "progress":
			j.Progress, err = r.copied()
		case "failure":
			err = r.into(&j.Failure)
		case "lease":
			j.Lease, err = r.optString()
		case "lease_expires_at":
			j.LeaseExpiresAt, err = r.optTime()
		case "wid":
			j.WID, err = r.optString()
		case "created":
			var b bool
			b, err = r.bool()
			j.Created = &b
		case "expires_at":
			j.ExpiresAt, err = r.optTime()
		case "unique":
			err = r.into(&j.Unique)
		case "duplicate":
			j.Duplicate, err = r.bool()
		case "keep_result_for":
			j.KeepResultFor, err = r.int()
		case "result":
			j.Result, err = r.copied()
		case "completed_at":
			j.CompletedAt, err = r.optTime()
		case "dependencies":
			err = r.into(&j.Dependencies)
		case "dependents":
			err = r.into(&j.Dependents)
		case "batch":
			j.Batch, err = r.str()
		default:
			_, err = r.raw()
		}
		if err != nil {
			return fmt.Errorf("werk: job field %q: %w", key, err)
		}
		return nil
	})
}

// clear applies a null to the field named key as encoding/json does: pointers, slices and maps
// become nil, raw values hold the null, other fields keep their value.
func (j *Job) clear(key []byte) {
	switch string(key) {
	case "args":
		j.Args = nil
	case "custom":
		j.Custom = nil
	case "at":
		j.At = nil
	case "enqueued_at":
		j.EnqueuedAt = nil
	case "progress":
		j.Progress = json.RawMessage("null")
	case "failure":
		j.Failure = nil
	case "lease":
		j.Lease = nil
	case "lease_expires_at":
		j.LeaseExpiresAt = nil
	case "wid":
		j.WID = nil
	case "created":
		j.Created = nil
	case "expires_at":
		j.ExpiresAt = nil
	case "unique":
		j.Unique = nil
	case "result":
		j.Result = json.RawMessage("null")
	case "completed_at":
		j.CompletedAt = nil
	case "dependencies":
		j.Dependencies = nil
	case "dependents":
		j.Dependents = nil
	}
}

// countItems counts the items of the array that comes next, without reading or checking them
// (the read that follows does); 0 when no array comes next.
func (r *jsonReader) countItems() int {
	if r.peek() != '[' {
		return 0
	}
	depth, n, empty := 0, 0, true
	for i := r.pos; i < len(r.data); i++ {
		switch c := r.data[i]; c {
		case '"':
			for i++; i < len(r.data) && r.data[i] != '"'; i++ {
				if r.data[i] == '\\' {
					i++
				}
			}
			empty = false
		case '[', '{':
			if depth == 1 {
				empty = false
			}
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				if !empty {
					n++
				}
				return n
			}
		case ',':
			if depth == 1 {
				n++
			}
		case ' ', '\t', '\n', '\r':
		default:
			empty = false
		}
	}
	return n
}

// jobs reads an array of jobs (null: nil), appended to into when it is not nil (a caller that
// knows how many jobs come sizes it).
func (r *jsonReader) jobs(out *[]Job, into []Job) error {
	if r.null() {
		*out = into
		return nil
	}
	list := into
	if list == nil {
		// Sized once: grown by append, a list of a hundred jobs (each a large struct) would be
		// allocated and copied eight times over.
		list = make([]Job, 0, r.countItems())
	}
	err := r.array(func() error {
		list = append(list, Job{})
		return r.job(&list[len(list)-1])
	})
	*out = list
	return err
}

// stringList reads an array of strings (null: nil).
func (r *jsonReader) stringList(out *[]string) error {
	if r.null() {
		*out = nil
		return nil
	}
	list := []string{}
	err := r.array(func() error {
		s, err := r.str()
		list = append(list, s)
		return err
	})
	*out = list
	return err
}

// UnmarshalJSON decodes the full answer to a batch push.
func (p *PushManyResult) UnmarshalJSON(data []byte) error {
	return p.decode(data, nil)
}

// pushAnswer is the answer to one request of Client.PushMany, its jobs appended to jobs.
type pushAnswer struct {
	PushManyResult
	jobs []Job
}

func (a *pushAnswer) UnmarshalJSON(data []byte) error {
	return a.decode(data, a.jobs)
}

// decode reads the answer to a batch push, its jobs appended to jobs when that is not nil.
func (p *PushManyResult) decode(data []byte, jobs []Job) error {
	r := &jsonReader{data: data}
	err := r.object(func(key []byte) error {
		switch string(key) {
		case "jobs":
			return r.jobs(&p.Jobs, jobs)
		case "created":
			if r.null() {
				return nil
			}
			n, err := r.int()
			p.Created = n
			return err
		case "jids":
			return r.stringList(&p.JIDs)
		case "existed":
			return r.stringList(&p.Existed)
		case "conflicts":
			return r.into(&p.Conflicts)
		case "refs":
			return r.into(&p.Refs)
		}
		_, err := r.raw()
		return err
	})
	if err != nil {
		return err
	}
	return r.end()
}

// fetched is the answer to a fetch.
type fetched struct {
	Jobs []Job `json:"jobs"`
}

func (f *fetched) UnmarshalJSON(data []byte) error {
	r := &jsonReader{data: data}
	err := r.object(func(key []byte) error {
		if string(key) == "jobs" {
			return r.jobs(&f.Jobs, nil)
		}
		_, err := r.raw()
		return err
	})
	if err != nil {
		return err
	}
	return r.end()
}
