package werk

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The answers a producer and a worker read in bulk (jobs, and the lists of jobs a batch push or a
// fetch answers with) are decoded in one pass over their bytes: encoding/json first validates a
// whole answer, then builds every job through reflection. The rarer nested parts of a job
// (failure, unique lock, dependencies) still go through encoding/json, as does any string with
// escapes, so what a field holds is what encoding/json would give it.
//
// The jobs of one list are written alike, most members the same as in the job before, name and
// value: a member whose bytes are those the last job had at its place takes the value read then
// (bytes already checked, so nothing is accepted that reading them again would refuse), and one
// whose name alone is the same skips reading the name. The small parts of many jobs (args, times,
// raw values) are cut from shared allocations, and a job's jid shares the string of the answer's
// list of jids.

// jsonReader reads one JSON value from data, strictly: anything that is not JSON is an error.
type jsonReader struct {
	data []byte
	pos  int
	// The last job's type, queue and state: the jobs of one answer mostly share them, and
	// share one copy of each.
	jobType, queue, state string
	// The last time read as the server writes it, and its value: a job's times, and the jobs
	// of one answer, mostly share them.
	lastTimeRaw []byte
	lastTime    time.Time
	// The jids an answer lists before its jobs: a job whose jid is the one listed at its place
	// shares that string.
	jids    []string
	nextJID string
	// left is how many jobs of the list being read are still to come, this one included.
	left int
	// Slabs the small parts of many jobs are cut from: one allocation for the args, times and
	// raw values of many jobs instead of one each. Each part is capped at its own length, so
	// appending to one never writes into another (a part kept keeps its slab, a bounded one).
	anys    []any
	times   []time.Time
	raws    []byte
	scratch []any
	// The member names of the last job of a list, in order.
	shape []shapeKey
	// listed: a list of jobs was read.
	listed bool
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
	// Most strings hold nothing but printable ASCII: read eight bytes at a time up to the first
	// byte that is a quote, a backslash, a control character or part of a multi-byte character.
	// A quote ends such a string; anything else, or the last bytes of the data, is read byte by
	// byte below.
	for i := start + 1; i+8 <= len(data); i += 8 {
		if m := special(binary.LittleEndian.Uint64(data[i:])); m != 0 {
			if i += bits.TrailingZeros64(m) / 8; data[i] == '"' {
				r.pos = i + 1
				return data[start:r.pos], true, nil
			}
			break
		}
	}
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

// special flags (with its high bit) each byte of x, eight bytes of a string read in little-endian
// order, that is a quote, a backslash, a control character or at or above 0x80. A byte at or
// above 0x80 has its high bit set already; below 0x20, x-0x20 borrows into it; a quote or a
// backslash is a zero byte of x^0x22 or x^0x5c, where subtracting one borrows. A borrow may
// flag bytes after one rightly flagged, never one before it: the first byte flagged is one of
// those sought, and no word holding one goes unflagged.
func special(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^0x22*ones, x^0x5c*ones
	return (x | (x-0x20*ones)&^x | (quote-ones)&^quote | (backslash-ones)&^backslash) & highs
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
	if err != nil {
		return nil, err
	}
	if plain {
		return raw[1 : len(raw)-1], nil
	}
	var s string
	err = json.Unmarshal(raw, &s)
	return []byte(s), err
}

// known reads a string, giving known itself when they are equal.
func (r *jsonReader) known(known string) (string, error) {
	raw, plain, err := r.quoted()
	if err != nil {
		return "", err
	}
	if !plain {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	if text := raw[1 : len(raw)-1]; string(text) != known {
		return string(text), nil
	}
	return known, nil
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
	if n, ok := smallInt(text); ok {
		return n, nil
	}
	n, err := strconv.Atoi(string(text))
	if err != nil {
		return 0, fmt.Errorf("werk: %s is not an int", text)
	}
	return n, nil
}

// smallInt reads a number's text that is an integer too short to overflow an int (false for any
// other, which strconv then reads).
func smallInt(text []byte) (int, bool) {
	digits := text
	if text[0] == '-' {
		digits = text[1:]
	}
	if len(digits) > 18 || strconv.IntSize == 32 && len(digits) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if text[0] == '-' {
		n = -n
	}
	return n, true
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
	// An integer of up to 15 digits is a float64 exactly (but -0, which ParseFloat reads as
	// the negative zero).
	if len(text) <= 15 {
		if n, ok := smallInt(text); ok && (n != 0 || text[0] != '-') {
			return float64(n), nil
		}
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
	return r.keep(raw), err
}

// Bounds of the slabs, in items: a value larger than a bytes slab has an allocation of its own.
const (
	slabAnys  = 1024
	slabTimes = 512
	slabBytes = 4096
)

// slabSize is how many items a new slab holds when need are wanted now: room for as many in
// each job still to come, within bound.
func (r *jsonReader) slabSize(need, bound int) int {
	n := need
	if r.left > 1 {
		n *= r.left
	}
	if n > bound {
		n = bound
	}
	if n < need {
		n = need
	}
	return n
}

// keep copies raw into the bytes slab.
func (r *jsonReader) keep(raw []byte) []byte {
	if len(raw) > cap(r.raws)-len(r.raws) {
		if len(raw) > slabBytes/4 {
			return append([]byte(nil), raw...)
		}
		// Twice the need: a job holds two raw values, its progress and its result.
		r.raws = make([]byte, 0, r.slabSize(2*len(raw), slabBytes))
	}
	start := len(r.raws)
	r.raws = append(r.raws, raw...)
	return r.raws[start:len(r.raws):len(r.raws)]
}

// cutAnys copies values into the slab of interfaces ([]any{} when there are none).
func (r *jsonReader) cutAnys(values []any) []any {
	if len(values) == 0 {
		return []any{}
	}
	if len(values) > cap(r.anys)-len(r.anys) {
		r.anys = make([]any, 0, r.slabSize(len(values), slabAnys))
	}
	start := len(r.anys)
	r.anys = append(r.anys, values...)
	return r.anys[start:len(r.anys):len(r.anys)]
}

// newTime is a zero time.Time cut from the slab of times.
func (r *jsonReader) newTime() *time.Time {
	if len(r.times) == cap(r.times) {
		// Two times a job: its enqueued_at and one of its other times.
		r.times = make([]time.Time, 0, r.slabSize(2, slabTimes))
	}
	r.times = r.times[:len(r.times)+1]
	return &r.times[len(r.times)-1]
}

func (r *jsonReader) time(t *time.Time) error {
	raw, _, err := r.quoted()
	if err != nil {
		return err
	}
	if r.lastTimeRaw != nil && bytes.Equal(raw, r.lastTimeRaw) {
		*t = r.lastTime
		return nil
	}
	if parsed, ok := utcTime(raw); ok {
		*t = parsed
		r.lastTimeRaw, r.lastTime = raw, parsed
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
	t := r.newTime()
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
	if r.peek() != '{' {
		return r.fail("expected an object")
	}
	r.pos++
	if r.peek() == '}' {
		r.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := r.member(j, i); err != nil {
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

// member reads the member of a job at place i.
func (r *jsonReader) member(j *Job, i int) error {
	var key []byte
	var field jobField
	var place *shapeKey
	r.space()
	start := r.pos
	if i < len(r.shape) {
		place = &r.shape[i]
		rest := r.data[r.pos:]
		if n := len(place.member); n > 0 && len(rest) > n && (rest[n] == ',' || rest[n] == '}') &&
			bytes.HasPrefix(rest, place.member) {
			// The member the last job had at this place, name and value, to the byte (and its
			// value ends where it ended then): its value is the one read then.
			r.pos += n
			r.recall(j, place)
			return nil
		}
		if bytes.HasPrefix(rest, place.text) {
			// The same name: no need to read it.
			key, field = place.key, place.field
			r.pos += len(place.text)
		} else {
			place = nil
		}
	}
	if place == nil {
		if r.peek() != '"' {
			return r.fail("expected a member name")
		}
		var err error
		if key, err = r.key(); err != nil {
			return err
		}
		if r.peek() != ':' {
			return r.fail("expected ':'")
		}
		r.pos++
		field = jobFields[string(key)]
		if r.left > 1 {
			if r.shape == nil {
				r.shape = make([]shapeKey, 0, len(jobFields))
			}
			r.shape = append(r.shape[:i], shapeKey{text: r.data[start:r.pos], key: key, field: field})
			place = &r.shape[i]
		}
	}
	null := r.peek() == 'n'
	if err := r.jobField(j, field); err != nil {
		return fmt.Errorf("werk: job field %q: %w", key, err)
	}
	if place != nil {
		r.remember(j, place, null, r.data[start:r.pos])
	}
	return nil
}

// remember keeps the member just read into j, at place of the shape, with its value when that
// can be given again to the next job without reading it: a null, a number, a string or a time
// (the value itself, not one the job's fields point to), or any value of a member that is no
// field of Job (skipped).
func (r *jsonReader) remember(j *Job, place *shapeKey, null bool, member []byte) {
	place.member, place.null = member, null
	if null {
		return
	}
	switch place.field {
	case jobTypeField:
		place.s = j.JobType
	case queueField:
		place.s = j.Queue
	case stateField:
		place.s = j.State
	case batchField:
		place.s = j.Batch
	case priorityField:
		place.n = j.Priority
	case reserveForField:
		place.n = j.ReserveFor
	case retryField:
		place.n = j.Retry
	case backtraceField:
		place.n = j.Backtrace
	case attemptField:
		place.n = j.Attempt
	case keepResultForField:
		place.n = j.KeepResultFor
	case createdAtField:
		place.t = j.CreatedAt
	case atField:
		place.t = *j.At
	case enqueuedAtField:
		place.t = *j.EnqueuedAt
	case leaseExpiresAtField:
		place.t = *j.LeaseExpiresAt
	case expiresAtField:
		place.t = *j.ExpiresAt
	case completedAtField:
		place.t = *j.CompletedAt
	case otherField:
	default:
		place.member = nil
	}
}

// recall gives j the value remembered at place, as reading it again would.
func (r *jsonReader) recall(j *Job, place *shapeKey) {
	if place.null {
		r.clear(j, place.field)
		return
	}
	switch place.field {
	case jobTypeField:
		j.JobType = place.s
	case queueField:
		j.Queue = place.s
	case stateField:
		j.State = place.s
	case batchField:
		j.Batch = place.s
	case priorityField:
		j.Priority = place.n
	case reserveForField:
		j.ReserveFor = place.n
	case retryField:
		j.Retry = place.n
	case backtraceField:
		j.Backtrace = place.n
	case attemptField:
		j.Attempt = place.n
	case keepResultForField:
		j.KeepResultFor = place.n
	case createdAtField:
		j.CreatedAt = place.t
	case atField:
		j.At = r.timeOf(place.t)
	case enqueuedAtField:
		j.EnqueuedAt = r.timeOf(place.t)
	case leaseExpiresAtField:
		j.LeaseExpiresAt = r.timeOf(place.t)
	case expiresAtField:
		j.ExpiresAt = r.timeOf(place.t)
	case completedAtField:
		j.CompletedAt = r.timeOf(place.t)
	}
}

// timeOf is a new time.Time holding t.
func (r *jsonReader) timeOf(t time.Time) *time.Time {
	p := r.newTime()
	*p = t
	return p
}

// jobField names a member of a job.
type jobField uint8

const (
	otherField jobField = iota
	jidField
	jobTypeField
	argsField
	queueField
	priorityField
	reserveForField
	retryField
	backtraceField
	customField
	atField
	stateField
	createdAtField
	enqueuedAtField
	attemptField
	progressField
	failureField
	leaseField
	leaseExpiresAtField
	widField
	createdField
	expiresAtField
	uniqueField
	duplicateField
	keepResultForField
	resultField
	completedAtField
	dependenciesField
	dependenciesOmittedField
	dependentsField
	batchField
)

var jobFields = map[string]jobField{
	"jid": jidField, "jobtype": jobTypeField, "args": argsField, "queue": queueField,
	"priority": priorityField, "reserve_for": reserveForField, "retry": retryField,
	"backtrace": backtraceField, "custom": customField, "at": atField, "state": stateField,
	"created_at": createdAtField, "enqueued_at": enqueuedAtField, "attempt": attemptField,
	"progress": progressField, "failure": failureField, "lease": leaseField,
	"lease_expires_at": leaseExpiresAtField, "wid": widField, "created": createdField,
	"expires_at": expiresAtField, "unique": uniqueField, "duplicate": duplicateField,
	"keep_result_for": keepResultForField, "result": resultField, "completed_at": completedAtField,
	"dependencies": dependenciesField, "dependencies_omitted": dependenciesOmittedField,
	"dependents": dependentsField, "batch": batchField,
}

// shapeKey is a member name as the last job of a list had it at one place: its text from the
// opening quote to the colon, and what it names. The jobs of one answer are written alike, so
// the next job's member at the same place is most often the same bytes.
type shapeKey struct {
	text, key []byte
	field     jobField
	// The whole member (name and value) and its value, when the value can be given again
	// without reading it (see remember); member is nil otherwise.
	member []byte
	null   bool
	n      int
	s      string
	t      time.Time
}

// jobField reads the value of a job's member.
func (r *jsonReader) jobField(j *Job, field jobField) error {
	if r.null() {
		r.clear(j, field)
		return nil
	}
	var err error
	switch field {
	case jidField:
		j.JID, err = r.known(r.nextJID)
	case jobTypeField:
		j.JobType, err = r.reused(&r.jobType)
	case argsField:
		r.scratch = r.scratch[:0]
		err = r.array(func() error {
			v, err := r.value()
			r.scratch = append(r.scratch, v)
			return err
		})
		j.Args = r.cutAnys(r.scratch)
	case queueField:
		j.Queue, err = r.reused(&r.queue)
	case priorityField:
		j.Priority, err = r.int()
	case reserveForField:
		j.ReserveFor, err = r.int()
	case retryField:
		j.Retry, err = r.int()
	case backtraceField:
		j.Backtrace, err = r.int()
	case customField:
		if r.peek() != '{' {
			return r.fail("custom: expected an object")
		}
		var v any
		v, err = r.value()
		j.Custom, _ = v.(map[string]any)
	case atField:
		j.At, err = r.optTime()
	case stateField:
		j.State, err = r.reused(&r.state)
	case createdAtField:
		err = r.time(&j.CreatedAt)
	case enqueuedAtField:
		j.EnqueuedAt, err = r.optTime()
	case attemptField:
		j.Attempt, err = r.int()
	case progressField:
		j.Progress, err = r.copied()
	case failureField:
		err = r.into(&j.Failure)
	case leaseField:
		j.Lease, err = r.optString()
	case leaseExpiresAtField:
		j.LeaseExpiresAt, err = r.optTime()
	case widField:
		j.WID, err = r.optString()
	case createdField:
		var b bool
		b, err = r.bool()
		j.Created = &b
	case expiresAtField:
		j.ExpiresAt, err = r.optTime()
	case uniqueField:
		err = r.into(&j.Unique)
	case duplicateField:
		j.Duplicate, err = r.bool()
	case keepResultForField:
		j.KeepResultFor, err = r.int()
	case resultField:
		j.Result, err = r.copied()
	case completedAtField:
		j.CompletedAt, err = r.optTime()
	case dependenciesField:
		err = r.into(&j.Dependencies)
	case dependenciesOmittedField:
		j.DependenciesOmitted, err = r.bool()
	case dependentsField:
		err = r.into(&j.Dependents)
	case batchField:
		j.Batch, err = r.str()
	default:
		_, err = r.raw()
	}
	return err
}

var null = []byte("null")

// clear applies a null to a job's field as encoding/json does: pointers, slices and maps
// become nil, raw values hold the null, other fields keep their value.
func (r *jsonReader) clear(j *Job, field jobField) {
	switch field {
	case argsField:
		j.Args = nil
	case customField:
		j.Custom = nil
	case atField:
		j.At = nil
	case enqueuedAtField:
		j.EnqueuedAt = nil
	case progressField:
		j.Progress = r.keep(null)
	case failureField:
		j.Failure = nil
	case leaseField:
		j.Lease = nil
	case leaseExpiresAtField:
		j.LeaseExpiresAt = nil
	case widField:
		j.WID = nil
	case createdField:
		j.Created = nil
	case expiresAtField:
		j.ExpiresAt = nil
	case uniqueField:
		j.Unique = nil
	case resultField:
		j.Result = r.keep(null)
	case completedAtField:
		j.CompletedAt = nil
	case dependenciesField:
		j.Dependencies = nil
	case dependentsField:
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
// knows how many jobs come sizes it, fresh from make: its room past its length is zero).
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
	first := len(list)
	// A second list in one answer (a member named twice) finds the room written by the first.
	zeroed := !r.listed
	r.listed = true
	err := r.array(func() error {
		// The list is sized for the jobs to come (by the count above, or by the caller).
		r.left = cap(list) - len(list)
		r.nextJID = ""
		if k := len(list) - first; k < len(r.jids) {
			r.nextJID = r.jids[k]
		}
		if zeroed && len(list) < cap(list) {
			// The room is zero already: appending a zero Job would clear it again.
			list = list[:len(list)+1]
		} else {
			list = append(list, Job{})
		}
		return r.job(&list[len(list)-1])
	})
	r.left, r.nextJID = 0, ""
	*out = list
	return err
}

// stringList reads an array of strings (null: nil).
func (r *jsonReader) stringList(out *[]string) error {
	if r.null() {
		*out = nil
		return nil
	}
	// When no string holds an escape, the strings are cut from one copy of the array's text
	// (one allocation, not one each); otherwise each is read on its own.
	start, n, plain := r.pos, 0, true
	err := r.array(func() error {
		_, p, err := r.quoted()
		n++
		plain = plain && p
		return err
	})
	if err != nil {
		return err
	}
	list := make([]string, 0, n)
	if !plain {
		r.pos = start
		err := r.array(func() error {
			s, err := r.str()
			list = append(list, s)
			return err
		})
		*out = list
		return err
	}
	text := string(r.data[start:r.pos])
	for i := 0; len(list) < n; {
		open := i + strings.IndexByte(text[i:], '"')
		end := open + 1 + strings.IndexByte(text[open+1:], '"')
		list = append(list, text[open+1:end])
		i = end + 1
	}
	*out = list
	return nil
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
			err := r.stringList(&p.JIDs)
			r.jids = p.JIDs
			return err
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
