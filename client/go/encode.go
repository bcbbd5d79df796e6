package werk

import (
	"encoding/json"
	"math"
	"strconv"
)

// The bodies of pushes are written by hand: encoding/json walks every field of every spec
// through reflection. The bytes are the ones encoding/json writes for a JobSpec (its field
// order, omitempty and escaping), which the tests check field by field; values of types other
// than the common scalars, and the rarer nested parts of a spec (custom, unique, depends_on),
// still go through encoding/json.

// encoded is a request body already encoded as JSON: Client.callWith sends it as it stands.
type encoded []byte

// batchBodies encodes specs as the bodies of batch pushes of at most MaxBatch jobs each, giving
// each job without a jid a new one (so a retried request stores once). No jobs still make one
// (empty) request: the server's answer to it is the caller's. Every body is encoded before any
// is sent, so a spec that cannot be encoded fails the push before anything is stored.
func batchBodies(specs []JobSpec) ([]encoded, error) {
	bodies := []encoded{}
	for start := 0; start < len(specs) || start == 0; start += MaxBatch {
		end := start + MaxBatch
		if end > len(specs) {
			end = len(specs)
		}
		// Room for a spec of the usual size, so most bodies are allocated once (and a large one
		// comes from the pools: see Client.recycle).
		b := getBuffer(16 + 128*(end-start))[:0]
		b = append(b, `{"jobs":[`...)
		missing := 0
		for i := start; i < end; i++ {
			if specs[i].JID == "" {
				missing++
			}
		}
		jids := reserveJIDs(missing)
		for i := start; i < end; i++ {
			if i > start {
				b = append(b, ',')
			}
			var err error
			if b, err = appendSpec(b, &specs[i], &jids); err != nil {
				return nil, err
			}
		}
		bodies = append(bodies, append(b, "]}"...))
		if len(specs) == 0 {
			break
		}
	}
	return bodies, nil
}

// specBody is the body of a single push.
func specBody(spec *JobSpec) (encoded, error) {
	var jids jidRun
	if spec.JID == "" {
		jids = reserveJIDs(1)
	}
	return appendSpec(make([]byte, 0, 256), spec, &jids)
}

// appendSpec appends the spec as encoding/json writes it, with the next jid of jids when it has
// none.
func appendSpec(b []byte, s *JobSpec, jids *jidRun) ([]byte, error) {
	var err error
	b = append(b, `{"jid":`...)
	if s.JID == "" {
		// Written straight into the body: the jid is read back from the answer.
		b = jids.append(b)
	} else {
		b = appendString(b, s.JID)
	}
	b = append(b, `,"jobtype":`...)
	b = appendString(b, s.JobType)
	if len(s.Args) > 0 {
		b = append(b, `,"args":[`...)
		for i, v := range s.Args {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendValue(b, v); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = appendStringField(b, `,"queue":`, s.Queue)
	b = appendIntField(b, `,"priority":`, s.Priority)
	b = appendIntField(b, `,"reserve_for":`, s.ReserveFor)
	if s.Retry != nil {
		b = strconv.AppendInt(append(b, `,"retry":`...), int64(*s.Retry), 10)
	}
	b = appendIntField(b, `,"backtrace":`, s.Backtrace)
	if len(s.Custom) > 0 {
		if b, err = appendMarshalled(append(b, `,"custom":`...), s.Custom); err != nil {
			return nil, err
		}
	}
	b = appendStringField(b, `,"at":`, s.At)
	if s.Unique != nil {
		if b, err = appendMarshalled(append(b, `,"unique":`...), s.Unique); err != nil {
			return nil, err
		}
	}
	b = appendStringField(b, `,"expires_at":`, s.ExpiresAt)
	if s.ExpiresIn != 0 {
		if b, err = appendValue(append(b, `,"expires_in":`...), s.ExpiresIn); err != nil {
			return nil, err
		}
	}
	b = appendIntField(b, `,"keep_result_for":`, s.KeepResultFor)
	if len(s.DependsOn) > 0 {
		if b, err = appendMarshalled(append(b, `,"depends_on":`...), s.DependsOn); err != nil {
			return nil, err
		}
	}
	b = appendStringField(b, `,"on_dependency_failure":`, s.OnDependencyFailure)
	b = appendStringField(b, `,"ref":`, s.Ref)
	b = appendStringField(b, `,"batch":`, s.Batch)
	return append(b, '}'), nil
}

// appendStringField and appendIntField write an omitempty member: nothing for the zero value.
func appendStringField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, name...), s)
}

func appendIntField(b []byte, name string, n int) []byte {
	if n == 0 {
		return b
	}
	return strconv.AppendInt(append(b, name...), int64(n), 10)
}

// appendValue writes the common scalars itself and the rest through encoding/json.
func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case string:
		return appendString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case float64:
		// encoding/json writes the shortest decimal form, in exponent notation outside
		// [1e-6, 1e21): only the plain form is written here.
		if abs := math.Abs(v); abs == 0 || (abs >= 1e-6 && abs < 1e21) {
			return strconv.AppendFloat(b, v, 'f', -1, 64), nil
		}
	}
	return appendMarshalled(b, v)
}

func appendMarshalled(b []byte, v any) ([]byte, error) {
	text, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, text...), nil
}

// appendString writes a string as encoding/json does: a printable ASCII string it leaves as it
// stands (apart from the characters it escapes) is copied, any other goes through encoding/json.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			text, _ := json.Marshal(s) // a string always encodes
			return append(b, text...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
