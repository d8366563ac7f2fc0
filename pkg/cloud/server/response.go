package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"
	"k8s.io/klog/v2"
	sigsjson "sigs.k8s.io/json"

	"github.com/fakecloud/fakecloud-csi/internal/fieldnames"
	"github.com/fakecloud/fakecloud-csi/pkg/cloud"
)

// throttleRetryAfter is the Retry-After the cloud sends with Throttled.
const throttleRetryAfter = time.Second

// reply is what a handler returns: the status, the JSON body and, when rev > 0, the revision
// for the ETag header.
type reply struct {
	status int
	body   any
	rev    uint64
	// serve, when set, writes the answer itself (GET /metrics: promhttp, with its content
	// negotiation); status and body are then unused.
	serve http.Handler
	// header is added to the answer, an error answer included: a handler that returns an
	// error may return a reply for its header and route alone.
	header http.Header
	// route, when set, names the request in the metrics and the log instead of the route's
	// name: a wait (GET /v1/volumes/{id}?waitFor=) is waitVolume, so that its seconds do
	// not count as getVolume's latency.
	route string
}

// routeOpts are a route's options.
type routeOpts struct {
	// body: the route reads a JSON body; any other route refuses one.
	body bool
	// heavy: the answer grows with the fleet; it is rendered and written in a turn of
	// Server.heavy.
	heavy bool
	// ifMatch: the handler honours If-Match; any other route refuses the header, since it
	// would apply the request whatever the revision (a PUT of an instance's health did).
	ifMatch bool
	// query: the query parameters the route takes, in the order the docs list them; a
	// request with any other (or one given twice, or a query that does not parse) is 400
	// InvalidArgument naming it, with the one it was likely meant to be (checkQuery). None:
	// the route takes no query.
	query []string
	// pattern is the route's method and path template, "GET /v1/events", for messages.
	pattern string
}

func ok(body any, rev uint64) *reply { return &reply{status: http.StatusOK, body: body, rev: rev} }

func created(body any, rev uint64) *reply {
	return &reply{status: http.StatusCreated, body: body, rev: rev}
}

// handlerFunc is a route's logic: it reads the request and returns a reply or an error, and
// never writes to the response itself.
type handlerFunc func(r *http.Request, c caller) (*reply, error)

// route adapts a handler: request ID, authentication, body limit (and no body at all unless
// body is set), path variables checked as identifiers, the JSON or error answer, logging and
// metrics, all in one place for every route.
func (s *Server) route(name string, need Role, opts routeOpts, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		reqID := newRequestID()
		w.Header().Set("X-Request-Id", reqID)
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		}
		var rep *reply
		c, err := s.authenticate(r, need)
		// A declared length over the limit is refused before a byte of the body is read, so
		// that a client sending "Expect: 100-continue" never sends it and always reads the
		// 413 (one that sends anyway may see the connection reset after the answer).
		if err == nil && r.ContentLength > s.cfg.MaxBodyBytes {
			err = cloud.NewError(cloud.CodePayloadTooLarge, "request body over %d bytes", s.cfg.MaxBodyBytes)
		}
		if err == nil && !opts.body {
			err = noBody(r)
		}
		if err == nil && !opts.ifMatch && r.Header.Get("If-Match") != "" {
			err = cloud.NewError(cloud.CodeInvalidArgument,
				"%s does not take If-Match (only PATCH /v1/quotas and PATCH /v1/instances/{id} do): it would apply whatever the revision", name)
		}
		if err == nil {
			err = checkPathVars(r)
		}
		if err == nil {
			err = checkQuery(r, opts.pattern, opts.query)
		}
		leave := func() {}
		if err == nil && opts.heavy {
			// Held until the answer is written: what it bounds is the memory of
			// renderings held at once.
			leave, err = s.heavy.enter(r.Context())
		}
		if err == nil {
			rep, err = h(r, c)
		}
		status := s.write(w, r, reqID, rep, err)
		if leave != nil {
			leave()
		}
		routeName := name
		if rep != nil && rep.route != "" {
			routeName = rep.route
		}
		s.metrics.observe(routeName, status, cloud.CodeOf(err), s.now().Sub(start))
		s.logRequest(klog.FromContext(r.Context()), r.Method, mux.Vars(r)["id"], routeName, status, reqID, s.now().Sub(start), err)
	})
}

// logRequest logs one served request: a server fault always; at -v=4 every request; else,
// through the request log's bounds, one short line per change or error and a summary of the
// successful reads every readSummaryPeriod when the period had more than reads, or at -v=2
// (what `make run` shows in the terminal). method is the request's; id is its path's {id} as
// sent (escaped), "" for a route without one.
func (s *Server) logRequest(logger klog.Logger, method, id, name string, status int, reqID string, took time.Duration, err error) {
	switch {
	case status >= 500 && cloud.CodeOf(err) != cloud.CodeUnavailable:
		logger.Error(err, "Request failed", "route", name, "status", status, "requestID", reqID)
	case logger.V(4).Enabled():
		logger.V(4).Info("Request served", "route", name, "status", status, "requestID", reqID, "ms", took.Milliseconds(), "err", err)
	case method == http.MethodGet && status < 400:
		s.reqlog.read(name)
	case s.reqlog.allow():
		kv := []any{"route", name, "status", status, "ms", took.Milliseconds()}
		if id != "" {
			if len(id) > cloud.MaxQuotedBytes { // an ID refused for its length: its start only
				id = cloud.Quote(id)
			}
			kv = append(kv, "id", id)
		}
		if err != nil {
			kv = append(kv, "code", cloud.CodeOf(err), "err", cloud.TruncateMessage(err.Error()))
		}
		logger.Info("Request", kv...)
	}
	if reads, dropped, period := s.reqlog.summary(logger.V(2).Enabled()); period > 0 {
		logger.Info("Requests summed up", "period", period, "reads", reads, "linesNotShown", dropped)
	}
}

// write sends rep as JSON, or err in the single error shape, and returns the status sent.
func (s *Server) write(w http.ResponseWriter, r *http.Request, reqID string, rep *reply, err error) int {
	if rep != nil {
		for k, v := range rep.header {
			w.Header()[k] = v
		}
	}
	if err != nil {
		return writeError(w, reqID, err)
	}
	if rep.serve != nil {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		rep.serve.ServeHTTP(sw, r)
		return sw.status
	}
	if rep.rev > 0 {
		w.Header().Set("ETag", etag(rep.rev))
	}
	writeJSON(w, rep.status, rep.body)
	return rep.status
}

// writeError writes err as {"code","message","retryable","requestId"} (answerError) with the
// code's status. Throttled carries Retry-After.
func writeError(w http.ResponseWriter, reqID string, err error) int {
	body := answerError(reqID, err)
	status := body.Code.HTTPStatus()
	if body.Code == cloud.CodeThrottled {
		w.Header().Set("Retry-After", strconv.Itoa(int(throttleRetryAfter.Seconds())))
	}
	w.Header().Set("X-Request-Id", reqID)
	writeJSON(w, status, body)
	return status
}

// answerError is err as an error answer's body says it: its code, its message bounded
// (cloud.TruncateMessage; the code when it has none), whether it is retryable and the
// request's ID. Errors that are not cloud errors are InternalError.
func answerError(reqID string, err error) cloud.Error {
	var ce *cloud.Error
	if !errors.As(err, &ce) {
		ce = cloud.NewError(cloud.CodeInternalError, "%v", err)
	}
	body := cloud.Error{Code: ce.Code, Message: cloud.TruncateMessage(ce.Message), Retryable: ce.Code.Retryable(), RequestID: reqID}
	if body.Message == "" {
		body.Message = string(ce.Code)
	}
	return body
}

// writeJSON writes body as JSON and a newline. HTML characters are written as they are, not
// escaped (">=", not "\u003e="): the answers are JSON for programs and people reading them
// in a terminal, never HTML; X-Content-Type-Options: nosniff keeps a browser from reading
// one as HTML all the same.
func writeJSON(w http.ResponseWriter, status int, body any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	var data []byte
	if err := enc.Encode(body); err != nil {
		// Only our own types are marshalled; failing here is a programming error.
		status = http.StatusInternalServerError
		data = []byte(`{"code":"InternalError","message":"encode response","retryable":true}` + "\n")
	} else {
		data = buf.Bytes() // Encode ends it with a newline
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(data)
}

// decode reads exactly one JSON value into v, as strictly as Kubernetes reads objects
// (sigs.k8s.io/json UnmarshalStrict): field names match case-sensitively, and unknown or
// duplicate fields, malformed JSON, an empty body and trailing data are InvalidArgument; a
// body over the limit is PayloadTooLarge. A refused body changes nothing: handlers act only
// on a decoded request.
func decode(r *http.Request, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeBytes(data, v)
}

// readBody reads the whole request body (bounded by the route's MaxBytesReader).
func readBody(r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, bodyError(err)
	}
	return data, nil
}

// decodeBytes is decode of a body already read. Its errors speak of the API's fields, never
// of Go's types (decodeError, strictMessage).
func decodeBytes(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return bodyError(io.EOF)
	}
	strict, err := sigsjson.UnmarshalStrict(data, v, sigsjson.DisallowDuplicateFields, sigsjson.DisallowUnknownFields)
	if err != nil {
		return cloud.NewError(cloud.CodeInvalidArgument, "invalid JSON body: %s", decodeError(err))
	}
	if len(strict) > 0 {
		// Each strict error names a field of the input ("unknown field \"...\""): quote a
		// bounded prefix of each, and only the first few, so the message never echoes the body.
		const shown = 3
		parts := make([]string, 0, shown+1)
		for _, e := range strict[:min(len(strict), shown)] {
			parts = append(parts, strictMessage(e, v))
		}
		if more := len(strict) - shown; more > 0 {
			parts = append(parts, fmt.Sprintf("and %d more", more))
		}
		return cloud.NewError(cloud.CodeInvalidArgument, "invalid JSON body: %s", strings.Join(parts, "; "))
	}
	return nil
}

// strictMessage is a strict decoding error of a body decoded into v: the field as written,
// bounded, and for an unknown field the field of v's type it was likely meant to be
// (fieldnames.Suggest, the suggestion the project's YAML files get), e.g.
// `unknown field "atachLimit"; did you mean "attachLimit"?`.
func strictMessage(err error, v any) string {
	var fe sigsjson.FieldError
	if !errors.As(err, &fe) {
		return bounded(err.Error())
	}
	path := fe.FieldPath()
	kind, _, _ := strings.Cut(err.Error(), ` "`) // "unknown field" or "duplicate field"
	msg := kind + " " + cloud.Quote(path)
	if kind != "unknown field" {
		return msg
	}
	parent, field := "", path
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		parent, field = path[:i], path[i+1:]
	}
	if s := fieldnames.Suggest(v, parent, field); s != "" {
		msg += "; did you mean " + strconv.Quote(s) + "?"
	}
	return msg
}

// decodeError is a decoding error's text in the API's words: a value of the wrong JSON type
// names the field and what it wants, `field "outOfBandSlots": want a whole number, got a
// string`, not Go's struct and type names; anything else (malformed JSON) is the decoder's
// own text, which names no Go type.
func decodeError(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "json: ")
	}
	var fields []string // te.Field without the Go names of embedded structs
	for f := range strings.SplitSeq(te.Field, ".") {
		if f != "" && (f[0] < 'A' || f[0] > 'Z') { // the API's JSON names are lowerCamelCase
			fields = append(fields, f)
		}
	}
	msg := "want " + jsonWant(te.Type) + ", got " + jsonGot(te.Value)
	if len(fields) == 0 {
		return "the body: " + msg
	}
	return "field " + cloud.Quote(strings.Join(fields, ".")) + ": " + msg
}

// jsonWant says what a value of Go type t is in JSON.
func jsonWant(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number, 0 or more"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	default:
		return "another value"
	}
}

// jsonGot says what the decoder got, from UnmarshalTypeError.Value: "string", "bool",
// "array", "object", "number", or "number " and the number when it is one the field cannot
// hold (4.5 for a whole number, -1 for one of 0 or more).
func jsonGot(value string) string {
	if n, ok := strings.CutPrefix(value, "number "); ok {
		return bounded(n)
	}
	switch value {
	case "bool":
		return "true or false"
	case "array", "object":
		return "an " + value
	case "":
		return "another value"
	default:
		return "a " + value
	}
}

func bodyError(err error) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return cloud.NewError(cloud.CodePayloadTooLarge, "request body over %d bytes", tooBig.Limit)
	case errors.Is(err, io.EOF):
		return cloud.NewError(cloud.CodeInvalidArgument, "request body is empty; want a JSON object")
	default:
		return cloud.NewError(cloud.CodeInvalidArgument, "invalid JSON body: %v", err)
	}
}

// ifMatch parses If-Match: absent or "*" is nil (no precondition), `"5"` (the ETag as sent)
// is revision 5. A weak tag, `W/"5"`, is well formed but never matches: If-Match uses the
// strong comparison (RFC 9110 §13.1.1), so it is PreconditionFailed, as a stale tag is.
// Anything else, an unquoted `5` included, is InvalidArgument.
func ifMatch(r *http.Request) (*uint64, error) {
	h := strings.TrimSpace(r.Header.Get("If-Match"))
	if h == "" || h == "*" {
		return nil, nil
	}
	tag, weak := strings.CutPrefix(h, "W/")
	rev, ok := quotedRevision(tag)
	switch {
	case !ok && isRevision(tag):
		// Printed bare: quoting it, as below, made `4` read as the valid `"4"`.
		return nil, cloud.NewError(cloud.CodeInvalidArgument,
			"If-Match %s lacks the quotes of an ETag: send \"%s\" (quotes included), as the ETag header gave it", tag, tag)
	case !ok:
		return nil, cloud.NewError(cloud.CodeInvalidArgument, "If-Match %s is not a revision ETag like \"12\" (quotes included)", cloud.Quote(h))
	case weak:
		return nil, cloud.NewError(cloud.CodePreconditionFailed,
			"If-Match %s is a weak tag, which never matches (If-Match compares strongly, RFC 9110 section 13.1.1); send the ETag as given, like \"12\"", cloud.Quote(h))
	}
	return &rev, nil
}

// isRevision reports whether s is a bare revision, 12: digits only, at most a uint64.
func isRevision(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// quotedRevision reads an entity tag that is a revision in double quotes, `"12"`.
func quotedRevision(tag string) (uint64, bool) {
	if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
		return 0, false
	}
	rev, err := strconv.ParseUint(tag[1:len(tag)-1], 10, 64)
	return rev, err == nil
}

// etag is the quoted revision, "12". Built by hand: it is on every answer.
func etag(rev uint64) string {
	b := make([]byte, 0, 22)
	b = append(b, '"')
	b = strconv.AppendUint(b, rev, 10)
	return string(append(b, '"'))
}

// newRequestID is req- and 16 lowercase hex digits, built by hand (fmt costs more than the
// rest of an answer's headers): it is on every request.
func newRequestID() string {
	const hex = "0123456789abcdef"
	var b [20]byte
	copy(b[:], "req-")
	v := rand.Uint64()
	for i := 19; i >= 4; i-- {
		b[i] = hex[v&0xf]
		v >>= 4
	}
	return string(b[:])
}

// checkQuery refuses a query the route does not take, with 400 InvalidArgument before the
// handler runs: a parameter not in params (with the one of params it was likely meant to be,
// fieldnames.Closest: sinceseq is sinceSeq), one given twice, or a query that does not parse.
// url.ParseQuery, not URL.Query, which drops a pair with a semicolon without a word: a
// "waitFor=attached;instanceId=x" read as a plain GET. pattern names the route in the message.
func checkQuery(r *http.Request, pattern string, params []string) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return cloud.NewError(cloud.CodeInvalidArgument, "the query %s does not parse (separate parameters with &, not ;): %v",
			cloud.Quote(r.URL.RawQuery), err)
	}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(params, name) {
			msg := "unknown query parameter " + cloud.Quote(name)
			if s := fieldnames.Closest(name, params); s != "" {
				msg += "; did you mean " + strconv.Quote(s) + "?"
			}
			if len(params) == 0 {
				return cloud.NewError(cloud.CodeInvalidArgument, "%s (%s takes no query parameters)", msg, pattern)
			}
			return cloud.NewError(cloud.CodeInvalidArgument, "%s (%s takes %s)", msg, pattern, strings.Join(params, ", "))
		}
		if n := len(q[name]); n > 1 {
			return cloud.NewError(cloud.CodeInvalidArgument, "query parameter %s given %d times; give it once", name, n)
		}
	}
	return nil
}

// queryInt parses an optional non-negative integer query parameter (InvalidArgument if bad).
func queryInt(r *http.Request, name string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, cloud.NewError(cloud.CodeInvalidArgument, "%s must be a non-negative integer, got %s", name, cloud.Quote(v))
	}
	return n, nil
}

func queryUint(r *http.Request, name string) (uint64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, cloud.NewError(cloud.CodeInvalidArgument, "%s must be a non-negative integer, got %s", name, cloud.Quote(v))
	}
	return n, nil
}

// queryID reads an optional query parameter holding an identifier or a page token:
// InvalidArgument when it is not one (cloud.CheckID), before anything uses it.
// pageQuery reads a list route's page parameters: maxResults (0 when absent; the list clamps
// it) and pageToken (an ID-shaped token, empty for the first page), each 400 InvalidArgument
// when malformed.
func pageQuery(r *http.Request) (maxResults int, token string, err error) {
	if maxResults, err = queryInt(r, "maxResults"); err != nil {
		return 0, "", err
	}
	if token, err = queryID(r, "pageToken"); err != nil {
		return 0, "", err
	}
	return maxResults, token, nil
}

func queryID(r *http.Request, name string) (string, error) {
	v := r.URL.Query().Get(name)
	if err := cloud.CheckOptionalID(name, v); err != nil {
		return "", cloud.NewError(cloud.CodeInvalidArgument, "%v", err)
	}
	return v, nil
}

// pathVar is a path variable of the route, unescaped (routes match the escaped path).
// checkPathVars has checked every one already, so it is an identifier.
func pathVar(r *http.Request, name string) string {
	v, err := url.PathUnescape(mux.Vars(r)[name])
	if err != nil {
		return ""
	}
	return v
}

// checkPathVars refuses a request whose path variables are not identifiers (cloud.CheckID:
// at most cloud.MaxIDBytes, no control character, not "." or "..") or not valid escapes,
// with InvalidArgument, before a handler uses, logs or stores them.
func checkPathVars(r *http.Request) error {
	for name, raw := range mux.Vars(r) {
		if len(raw) > 3*cloud.MaxIDBytes {
			return cloud.NewError(cloud.CodeInvalidArgument, "path %s is %d bytes long, at most %d allowed", name, len(raw), cloud.MaxIDBytes)
		}
		v, err := url.PathUnescape(raw)
		if err != nil {
			return cloud.NewError(cloud.CodeInvalidArgument, "path %s %s is not a valid escaped path segment", name, cloud.Quote(raw))
		}
		if err := cloud.CheckID("path "+name, v); err != nil {
			return cloud.NewError(cloud.CodeInvalidArgument, "%v", err)
		}
	}
	return nil
}

// noBody refuses a request to a route that takes no body but carries one (400
// InvalidArgument): a body is read only as far as its first byte. An empty body
// (Content-Length: 0, or none) is fine.
func noBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	var one [1]byte
	n, err := io.ReadFull(r.Body, one[:])
	if n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return nil
	}
	if n == 0 && err != nil {
		return bodyError(err)
	}
	return cloud.NewError(cloud.CodeInvalidArgument, "%s %s takes no request body; send none", r.Method, cloud.Quote(r.URL.EscapedPath()))
}

// methodNotAllowedHandler answers 405 MethodNotAllowed like statusHandler, with the Allow
// header RFC 9110 §15.5.6 requires: the methods r serves for the request's path, sorted and
// comma-separated (e.g. "GET, POST"). r is read at request time, so routes added after the
// handler is built count.
func (s *Server) methodNotAllowedHandler(r *mux.Router) http.Handler {
	next := s.statusHandler("methodNotAllowed", cloud.CodeMethodNotAllowed)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if allow := allowedMethods(r, req); len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
		}
		next.ServeHTTP(w, req)
	})
}

// allowedMethods returns the sorted methods of r's routes whose path matches req: a route
// whose only failing matcher is the method sets ErrMethodMismatch (gorilla/mux).
func allowedMethods(r *mux.Router, req *http.Request) []string {
	seen := map[string]bool{}
	_ = r.Walk(func(route *mux.Route, _ *mux.Router, _ []*mux.Route) error {
		var m mux.RouteMatch
		if !route.Match(req, &m) && !errors.Is(m.MatchErr, mux.ErrMethodMismatch) {
			return nil
		}
		methods, err := route.GetMethods()
		if err != nil {
			return nil //nolint:nilerr // a route without a method matcher allows any method; none here
		}
		for _, method := range methods {
			seen[method] = true
		}
		return nil
	})
	return slices.Sorted(maps.Keys(seen))
}

// bounded is v as it is when it is short, else a quoted bounded prefix (cloud.Quote).
func bounded(v string) string {
	if len(v) <= cloud.MaxQuotedBytes {
		return v
	}
	return cloud.Quote(v)
}

// statusHandler answers routes no handler owns (404 NotFound, 405 MethodNotAllowed) in the
// same error shape.
func (s *Server) statusHandler(name string, code cloud.Code) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.now()
		err := cloud.NewError(code, "%s %s: %s", bounded(r.Method), bounded(r.URL.EscapedPath()), strings.ToLower(http.StatusText(code.HTTPStatus())))
		status := writeError(w, newRequestID(), err)
		s.metrics.observe(name, status, code, s.now().Sub(start))
	})
}

// statusWriter records the status a handler of reply.serve wrote, for the request metrics
// and log.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
