package werk

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FieldError locates one invalid field of a rejected request ("jobs.3.queue").
type FieldError struct {
	Loc     string `json:"loc"`
	Message string `json:"message"`
}

// Error is every error the client returns: a problem+json answer with the server's stable Code,
// or a failure to reach the server (Status 0, Code "unreachable"). Compare with errors.Is against
// the sentinels (ErrLeaseLost, ErrJobNotFound, ...), never on message text.
type Error struct {
	Code       string
	Status     int
	Detail     string
	Errors     []FieldError
	RetryAfter time.Duration
	Err        error
	// ExistingJID names the job holding the unique key (code not_unique).
	ExistingJID string
}

func (e *Error) Error() string {
	head := e.Code
	if e.Status != 0 {
		head = fmt.Sprintf("%d %s", e.Status, e.Code)
	}
	if e.Detail != "" {
		head += ": " + e.Detail
	}
	if len(e.Errors) > 0 {
		parts := make([]string, len(e.Errors))
		for i, f := range e.Errors {
			parts[i] = f.Loc + ": " + f.Message
		}
		head += " (" + strings.Join(parts, "; ") + ")"
	}
	return head
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches the sentinels by code (ErrValidation also matches invalid_json, malformed_request
// and a refused graph of jobs, dependency_cycle and dependency_not_found; ErrUnauthorized the
// refusals of credentials, ErrForbidden cross_site_request; ErrUnavailable
// matches any 502/503/504 or unreachable server; ErrBatchClosed matches batch_finished too;
// ErrTooLarge matches result_too_large too, as a result is part of the body refused;
// ErrServerError matches any other 5xx answer).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok {
		return false
	}
	if e.Code == "http_"+strconv.Itoa(e.Status) && byStatus[e.Status] == t {
		return true
	}
	switch t {
	case ErrValidation:
		return e.Code == "invalid_request" || e.Code == "invalid_json" ||
			e.Code == "malformed_request" || e.Code == "dependency_cycle" ||
			e.Code == "dependency_not_found"
	case ErrUnauthorized:
		return e.Code == "unauthorized" || e.Code == "ambiguous_credentials" ||
			e.Code == "too_many_auth_failures"
	case ErrForbidden:
		return e.Code == "forbidden" || e.Code == "cross_site_request"
	case ErrUnavailable:
		return e.transient()
	case ErrBatchClosed:
		return e.Code == "batch_committed" || e.Code == "batch_finished"
	case ErrTooLarge:
		return e.Code == "payload_too_large" || e.Code == "result_too_large"
	case ErrServerError:
		return e.Code == "internal_error" || (e.Status >= 500 && !e.transient())
	}
	return t.Code == e.Code
}

func (e *Error) transient() bool {
	return e.Code == "unreachable" || e.Code == "database_unavailable" ||
		e.Status == 502 || e.Status == 503 || e.Status == 504
}

// An answer without a problem body (a proxy's, say; its Code is http_<status>) matches the
// sentinel its status stands for, as the Python and TypeScript clients read it: a worker then
// neither retries a bare 404 or 409 to its ack nor takes it for an outage.
var byStatus = map[int]*Error{
	400: ErrValidation, 401: ErrUnauthorized, 403: ErrForbidden, 404: ErrJobNotFound,
	409: ErrLeaseLost, 413: ErrTooLarge, 422: ErrValidation,
}

// Sentinels for errors.Is.
var (
	ErrLeaseLost   = &Error{Code: "lease_lost"}
	ErrNotUnique   = &Error{Code: "not_unique"}
	ErrJobNotFound = &Error{Code: "job_not_found"}
	// ErrBatchNotFound: no batch with that bid. ErrBatchClosed: the batch takes no members now
	// (batch_committed: open it again first; batch_finished: never again).
	ErrBatchNotFound = &Error{Code: "batch_not_found"}
	ErrBatchClosed   = &Error{Code: "batch_committed"}
	ErrValidation    = &Error{Code: "invalid_request"}
	ErrUnauthorized  = &Error{Code: "unauthorized"}
	ErrForbidden     = &Error{Code: "forbidden"}
	// ErrTooLarge: the request body is over the server's limit; ErrResultTooLarge: an ack's
	// result is over WERK_MAX_RESULT_BYTES (nothing was acked). ErrTooLarge matches both.
	ErrTooLarge       = &Error{Code: "payload_too_large"}
	ErrResultTooLarge = &Error{Code: "result_too_large"}
	ErrUnavailable    = &Error{Code: "unreachable"}
	// ErrServerError: the server failed (internal_error, or a 5xx that is not ErrUnavailable,
	// such as schema_too_new).
	ErrServerError = &Error{Code: "internal_error"}
)

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
