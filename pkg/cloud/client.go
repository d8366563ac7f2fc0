package cloud

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// InstanceList is the body of GET /v1/instances, sorted by ID.
type InstanceList struct {
	Instances []Instance `json:"instances"`
}

// InstanceTypeList is the body of GET /v1/instance-types, sorted by name.
type InstanceTypeList struct {
	InstanceTypes []InstanceType `json:"instanceTypes"`
}

// FaultList is one page of GET /v1/faults?maxResults=&pageToken=, in creation (evaluation)
// order. NextPageToken is empty on the last page.
type FaultList struct {
	Faults        []FaultRule `json:"faults"`
	NextPageToken string      `json:"nextPageToken,omitempty"`
}

// EventList is one page of GET /v1/events: the retained events after the asked revision
// (or sequence number), oldest first, and the revision current when they were read.
// NextPageToken is empty on the last page.
//
// The log keeps a bounded number of events and drops the oldest. Truncated says that events
// the request asked for are gone: with sinceSeq N, events N+1 to OldestSeq-1 were dropped;
// with sinceRevision N, the oldest retained event is past revision N and older ones were
// dropped, so some after N may be gone; with a page token, events after the previous page's
// last one were dropped before this page was read (a slow reader). OldestSeq is then the seq
// of the oldest retained event. Both are absent otherwise.
type EventList struct {
	Events        []Event `json:"events"`
	Revision      uint64  `json:"revision"`
	NextPageToken string  `json:"nextPageToken,omitempty"`
	Truncated     bool    `json:"truncated,omitempty"`
	OldestSeq     uint64  `json:"oldestSeq,omitempty"`
}

// RevisionResponse is the body of mutations that return no resource (deletes, detach,
// reset, clearing faults): the global revision after the change, or the current one when
// nothing changed.
type RevisionResponse struct {
	Revision uint64 `json:"revision"`
}

// DefaultTimeout is the per-request timeout of a Client unless WithTimeout or
// WithHTTPClient says otherwise.
const DefaultTimeout = 30 * time.Second

// maxErrorBody bounds how much of an error response the client reads.
const maxErrorBody = 64 << 10

// MaxResponseBytes bounds how much of a successful answer the client decodes, in bytes: the
// largest page the cloud sends (1000 events or rules of bounded size) is well under it. A
// longer answer is an error, not an unbounded read.
const MaxResponseBytes = 16 << 20

// maxIdleConnsPerHost is how many idle keep-alive connections to the cloud a Client keeps
// (unless WithHTTPClient brings its own transport): about as many as requests it has in
// flight at once, e.g. the external-attacher's workers each publishing through the driver.
const maxIdleConnsPerHost = 64

// Client is the Go client of the fake cloud's HTTP API (docs/fakecloud-api.md) with the
// calls the CSI driver makes: volumes, attachments, snapshots, group snapshots, its
// instance's capacity and the quotas. Package admin (pkg/cloud/admin) adds the admin and
// test calls (instances, quotas, fault rules, health, events, reset, the console's relay)
// over the same transport (Do). It is safe for concurrent use. Every method returns a *Error (match it with errors.Is(err, ErrX) or
// CodeOf) for a non-2xx answer; transport failures are returned wrapped, with no cloud code,
// and context errors stay errors.Is(err, context.DeadlineExceeded / context.Canceled).
type Client struct {
	base      *url.URL
	http      *http.Client
	userAgent string
	token     string
	tokenFile string
}

// Option configures a Client.
type Option func(*Client) error

// WithToken sends "Authorization: Bearer token" on every request.
func WithToken(token string) Option {
	return func(c *Client) error {
		c.token = token
		return nil
	}
}

// WithTokenFile reads the bearer token from path (surrounding whitespace trimmed) on every
// request, so a rotated token file takes effect without a restart. The file must be readable
// when the client is created.
func WithTokenFile(path string) Option {
	return func(c *Client) error {
		if _, err := readToken(path); err != nil {
			return err
		}
		c.tokenFile = path
		return nil
	}
}

// WithHTTPClient uses hc for every request (its Timeout applies unless WithTimeout follows).
// Its CheckRedirect is replaced: the client never follows redirects.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("nil http client")
		}
		copied := *hc
		copied.CheckRedirect = noRedirects
		c.http = &copied
		return nil
	}
}

// noRedirects makes http.Client hand a 3xx answer back instead of following it. The cloud
// never redirects; a redirect would turn a POST into a GET on another route (a volume ID
// "../../etc" once did), so do treats any 3xx as an error.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// WithTimeout bounds each request, including reading the body; 0 means no bound beyond the
// context's.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d < 0 {
			return fmt.Errorf("negative timeout %v", d)
		}
		c.http.Timeout = d
		return nil
	}
}

// WithUserAgent sets the User-Agent header, e.g. "fakecloud-csi/v0.1.0".
func WithUserAgent(ua string) Option {
	return func(c *Client) error {
		c.userAgent = ua
		return nil
	}
}

// wantBaseURL says what CheckBaseURL wants, with an example on the fake cloud's default
// address.
const wantBaseURL = "want an http:// or https:// URL, e.g. http://127.0.0.1:8080"

// CheckBaseURL reports whether raw can be the fake cloud's base URL for NewClient: an
// http:// or https:// URL with a host, a port (if any) in 1-65535, no user, query or
// fragment (the token goes in its own flag; the API takes no query on its base) and no /v1 at
// the end (the client adds it). Its error
// quotes raw (at most MaxQuotedBytes of it) and says what is wanted, for a flag's message
// ("--cloud-url: ..."); given host:port without a scheme, which Go's URL parser would read as
// a scheme or refuse with its own words, or "http:" without its "//", it suggests the value
// meant.
func CheckBaseURL(raw string) error {
	q := Quote(raw)
	if raw == "" {
		return errors.New("empty: " + wantBaseURL)
	}
	if !strings.Contains(raw, "://") {
		return errors.New(q + " " + missingScheme(raw))
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its Op and URL repeat what the message says already
		}
		return fmt.Errorf("%s is not a URL (%w): %s", q, err, wantBaseURL)
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%s has the scheme %s: %s", q, Quote(u.Scheme), wantBaseURL)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%s has no host: %s", q, wantBaseURL)
	case u.User != nil:
		// Quote the URL without its user information: the message goes to logs, and a token
		// put there is usually the user name, not a password.
		hidden := *u
		hidden.User = url.User("xxxxx")
		return fmt.Errorf("%s has a user name: the cloud's token goes in its own flag, not the URL", Quote(hidden.String()))
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("%s has a query: the base URL takes none; %s", q, wantBaseURL)
	case u.Fragment != "":
		return fmt.Errorf("%s has a fragment: the base URL takes none; %s", q, wantBaseURL)
	}
	if strings.HasSuffix(u.Host, ":") {
		return fmt.Errorf("%s has an empty port: want 1-65535, or no colon for the scheme's", q)
	}
	if path := strings.TrimSuffix(u.Path, "/"); path == "/v1" || strings.HasSuffix(path, "/v1") {
		// The client adds /v1 to every route; with it in the base, every call is /v1/v1/...
		// and answers 404, which reads as a cloud that is not there.
		return fmt.Errorf("%s ends in /v1: give the cloud's base URL, e.g. %s (the client adds /v1)",
			q, Quote(strings.TrimSuffix(strings.TrimSuffix(raw, "/"), "/v1")))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s has the port %s: want 1-65535", q, Quote(p))
		}
	}
	return nil
}

// missingScheme says what a raw URL without "://" lacks, with the value meant when it can
// tell: "http:127.0.0.1:8080" lacks the "//", "localhost:8080" the whole scheme. A scheme
// mistyped some other way ("http:/x" keeps one slash) gets the "//" suggestion too.
func missingScheme(raw string) string {
	lower := strings.ToLower(raw)
	for _, scheme := range []string{"https:", "http:"} {
		if rest, ok := strings.CutPrefix(lower, scheme); ok {
			meant := scheme + "//" + strings.TrimLeft(raw[len(scheme):], "/")
			msg := `lacks the "//" after ` + Quote(raw[:len(scheme)]) + ": " + wantBaseURL
			if strings.TrimLeft(rest, "/") != "" && len(raw) <= MaxQuotedBytes {
				msg += " (did you mean " + Quote(meant) + "?)"
			}
			return msg
		}
	}
	msg := "has no scheme: " + wantBaseURL
	// host:port as the flag's value was meant, not a scheme mistyped ("ftp:/x").
	if u, err := url.Parse("http://" + raw); err == nil && u.Hostname() != "" && !strings.Contains(raw, ":/") && len(raw) <= MaxQuotedBytes {
		msg += " (did you mean " + Quote("http://"+raw) + "?)"
	}
	return msg
}

// NewClient returns a client of the fake cloud at baseURL (e.g. "http://127.0.0.1:8080").
// It makes no network calls.
func NewClient(baseURL string, opts ...Option) (*Client, error) {
	if err := CheckBaseURL(baseURL); err != nil {
		return nil, fmt.Errorf("cloud URL: %w", err)
	}
	u, err := url.Parse(baseURL)
	if err != nil { // CheckBaseURL parsed it already
		return nil, fmt.Errorf("cloud URL %s: %w", Quote(baseURL), err)
	}
	c := &Client{base: u, http: &http.Client{Timeout: DefaultTimeout, Transport: newTransport(), CheckRedirect: noRedirects}, userAgent: "fakecloud-client"}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, fmt.Errorf("cloud client: %w", err)
		}
	}
	return c, nil
}

// newTransport is http.DefaultTransport with room for maxIdleConnsPerHost idle connections:
// a Client talks to one host, and DefaultTransport keeps only 2 idle connections per host, so
// with more requests in flight most connections were closed after one request and the next
// request dialled a new one (in bench/driver, 9% of the CPU went to dialling, and every
// request left a socket in TIME_WAIT). A program that replaced http.DefaultTransport keeps
// its own.
func newTransport() http.RoundTripper {
	tr, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		return http.DefaultTransport
	}
	tr = tr.Clone()
	tr.MaxIdleConnsPerHost = maxIdleConnsPerHost
	return tr
}

func readToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// Request is one call of the fake cloud's HTTP API (docs/fakecloud-api.md) as Client.Do
// sends it: the typed methods of Client (the driver's calls) and of package admin (the admin
// and test calls) are each one Request.
type Request struct {
	// Method is the HTTP method, e.g. http.MethodPatch.
	Method string
	// Path is the route from the base URL with every ID already escaped as one segment
	// (PathSegment), e.g. "/v1/faults/fault-1".
	Path string
	// Query is the query string; nil: none.
	Query url.Values
	// Body, when non-nil, is sent encoded as JSON with Content-Type: application/json.
	Body any
	// Header holds extra request headers (If-Match); nil: none. Accept, User-Agent and
	// Authorization are the client's.
	Header http.Header
}

// Do sends r with the client's token, user agent and timeout, and decodes a 2xx JSON answer
// into out (nil: the answer's body is dropped). Any other answer is a *Error (its JSON error
// body, or a code derived from the HTTP status), wrapped with the method and path: "PATCH
// /v1/quotas: InvalidArgument: ...". An answer over MaxResponseBytes is an error, and a
// redirect is never followed (InternalError naming its Location). It is the one transport
// of the client; package admin sends its calls through it.
func (c *Client) Do(ctx context.Context, r Request, out any) error {
	return c.doHeader(ctx, r.Method, r.Path, r.Query, r.Body, out, r.Header, nil)
}

// do sends one request with an optional JSON body and decodes a 2xx JSON answer into out
// (when non-nil). Any other answer becomes a *Error through responseError.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any, header http.Header) error {
	return c.doHeader(ctx, method, path, query, in, out, header, nil)
}

// doHeader is do that also stores the answer's header in *respHeader when it is non-nil,
// for an error answer too (it stays nil when no answer came).
func (c *Client) doHeader(ctx context.Context, method, path string, query url.Values, in, out any, header http.Header, respHeader *http.Header) error {
	// path is already escaped (PathSegment), so it is appended to the URL text, not to URL.Path.
	target := strings.TrimSuffix(c.base.String(), "/") + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	token := c.token
	if c.tokenFile != "" {
		if token, err = readToken(c.tokenFile); err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
		_ = resp.Body.Close()
	}()
	if respHeader != nil {
		*respHeader = resp.Header
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s %s: %w", method, path, responseError(resp))
	}
	if out == nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("read %s %s answer: %w", method, path, err)
	}
	if len(data) > MaxResponseBytes {
		return fmt.Errorf("%s %s: answer over %d bytes", method, path, MaxResponseBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode %s %s answer: %w", method, path, err)
	}
	return nil
}

// PathSegment escapes id as one path segment of a Request after checking it is an
// identifier (CheckID, field naming it in the message, e.g. "volume ID"): a value that is not
// one is InvalidArgument ("... (refused by the client, not sent)"), and no request is sent,
// so the URL can never hold a path step, a control character or an unbounded value.
func PathSegment(field, id string) (string, error) {
	if err := CheckID(field, id); err != nil {
		return "", NewError(CodeInvalidArgument, "%v (refused by the client, not sent)", err)
	}
	return url.PathEscape(id), nil
}

// responseError turns a non-2xx response into a *Error: the JSON error body when there is
// one, otherwise a code derived from the status (e.g. a proxy's HTML 502 is Unavailable).
// A redirect (3xx, which the client never follows) is InternalError naming its Location.
// HTTPStatus and RetryAfter come from the response itself.
func responseError(resp *http.Response) *Error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var e Error
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		e = Error{Code: CodeInternalError, Retryable: false,
			Message: fmt.Sprintf("HTTP %d redirect to %s not followed: the cloud never redirects", resp.StatusCode, Quote(resp.Header.Get("Location")))}
	} else if err := json.Unmarshal(data, &e); err != nil || e.Code == "" {
		code := codeForStatus(resp.StatusCode)
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		e = Error{Code: code, Message: fmt.Sprintf("HTTP %d %s", resp.StatusCode, msg), Retryable: code.Retryable()}
	}
	if e.RequestID == "" {
		e.RequestID = resp.Header.Get("X-Request-Id")
	}
	e.Message = TruncateMessage(e.Message)
	e.HTTPStatus = resp.StatusCode
	e.RetryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	return &e
}

// codeForStatus picks the code for an answer without a cloud error body.
func codeForStatus(status int) Code {
	switch status {
	case http.StatusBadRequest:
		return CodeInvalidArgument
	case http.StatusUnauthorized:
		return CodeUnauthenticated
	case http.StatusForbidden:
		return CodeAccessDenied
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusMethodNotAllowed:
		return CodeMethodNotAllowed
	case http.StatusPreconditionFailed:
		return CodePreconditionFailed
	case http.StatusRequestEntityTooLarge:
		return CodePayloadTooLarge
	case http.StatusTooManyRequests:
		return CodeThrottled
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return CodeUnavailable
	default:
		return CodeInternalError
	}
}

// parseRetryAfter reads Retry-After as seconds or an HTTP date; 0 when absent or malformed.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// GetInstance calls GET /v1/instances/{id}. Codes: InstanceNotFound (unless the server
// auto-registers it for a driver), Unauthenticated, AccessDenied, plus faults injected on
// GetInstance (any code).
func (c *Client) GetInstance(ctx context.Context, id string) (*Instance, error) {
	seg, err := PathSegment("instance ID", id)
	if err != nil {
		return nil, err
	}
	var out Instance
	if err := c.do(ctx, http.MethodGet, "/v1/instances/"+seg, nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetCapacity calls GET /v1/instances/{id}/capacity: the raw capacity facts at one revision.
// Codes: InstanceNotFound (unless auto-registered), Unauthenticated, AccessDenied, plus faults
// injected on GetCapacity (typically Unavailable or Throttled).
func (c *Client) GetCapacity(ctx context.Context, instanceID string) (*Capacity, error) {
	seg, err := PathSegment("instance ID", instanceID)
	if err != nil {
		return nil, err
	}
	var out Capacity
	if err := c.do(ctx, http.MethodGet, "/v1/instances/"+seg+"/capacity", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateVolume calls POST /v1/volumes, idempotent on Name. Codes: InvalidArgument (see
// CreateVolumeRequest: bad name, unknown zone, size ≤ 0), AlreadyExists (same name, other parameters), SnapshotNotFound, VolumeQuotaExceeded,
// CapacityQuotaExceeded, Unauthenticated, AccessDenied, plus faults on CreateVolume.
func (c *Client) CreateVolume(ctx context.Context, req CreateVolumeRequest) (*Volume, error) {
	var out Volume
	if err := c.do(ctx, http.MethodPost, "/v1/volumes", nil, req, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetVolume calls GET /v1/volumes/{id}. Codes: VolumeNotFound, Unauthenticated,
// AccessDenied, plus faults on GetVolume.
func (c *Client) GetVolume(ctx context.Context, id string) (*Volume, error) {
	seg, err := PathSegment("volume ID", id)
	if err != nil {
		return nil, err
	}
	var out Volume
	if err := c.do(ctx, http.MethodGet, "/v1/volumes/"+seg, nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListVolumes calls GET /v1/volumes?maxResults=&pageToken= (maxResults 0: server default of
// 100; at most 1000). Codes: InvalidArgument (bad page token), Unauthenticated, AccessDenied,
// plus faults on ListVolumes.
func (c *Client) ListVolumes(ctx context.Context, maxResults int, pageToken string) (*VolumeList, error) {
	q := url.Values{}
	if maxResults != 0 {
		q.Set("maxResults", strconv.Itoa(maxResults))
	}
	if pageToken != "" {
		q.Set("pageToken", pageToken)
	}
	var out VolumeList
	if err := c.do(ctx, http.MethodGet, "/v1/volumes", q, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteVolume calls DELETE /v1/volumes/{id}. Codes: VolumeNotFound (already deleted; treat
// as success for idempotent deletion), VolumeInUse (still attached), Unauthenticated,
// AccessDenied, plus faults on DeleteVolume.
func (c *Client) DeleteVolume(ctx context.Context, id string) error {
	seg, err := PathSegment("volume ID", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1/volumes/"+seg, nil, nil, nil, nil)
}

// Attach calls POST /v1/volumes/{id}/attach, the atomic authority on capacity: the slot
// and quota are taken by this call; req.ReadOnly attaches read-only. The answer's State is
// attaching (HTTP 202) while the cloud attaches, attached (200) when done; a repeat for the
// same instance in the same mode joins the attach under way and starts no other. Poll
// GetVolume (or WaitVolume) until the State is attached. Codes: IncorrectState (detaching
// from that instance: retry once detached), AlreadyExists (attaching or attached to that
// instance in the other mode), AttachmentLimitExceeded, AttachmentQuotaExceeded (real
// capacity shortage), ZoneMismatch, VolumeInUse (attached elsewhere), VolumeNotFound,
// InstanceNotFound, InvalidArgument, Unauthenticated, AccessDenied, plus faults on
// AttachVolume.
func (c *Client) Attach(ctx context.Context, volumeID string, req AttachRequest) (*Attachment, error) {
	seg, err := PathSegment("volume ID", volumeID)
	if err != nil {
		return nil, err
	}
	var out Attachment
	if err := c.do(ctx, http.MethodPost, "/v1/volumes/"+seg+"/attach", nil, req, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// DetachVolume calls POST /v1/volumes/{id}/detach. The answer's State is detaching (HTTP
// 202) while the cloud detaches, detached (200) when done; the slot is held until then. A
// repeat joins the detach under way; detaching a volume that is not bound to instanceID
// succeeds at once (detached). Codes: VolumeNotFound, InvalidArgument, Unauthenticated,
// AccessDenied, plus faults on DetachVolume.
func (c *Client) DetachVolume(ctx context.Context, volumeID, instanceID string) (*Attachment, error) {
	seg, err := PathSegment("volume ID", volumeID)
	if err != nil {
		return nil, err
	}
	var out Attachment
	if err := c.do(ctx, http.MethodPost, "/v1/volumes/"+seg+"/detach", nil, AttachRequest{InstanceID: instanceID}, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResizeVolume calls POST /v1/volumes/{id}/resize; volumes only grow (the same size is a
// no-op). Codes: InvalidArgument (shrink, size ≤ 0), CapacityQuotaExceeded, VolumeNotFound,
// Unauthenticated, AccessDenied, plus faults on ResizeVolume.
func (c *Client) ResizeVolume(ctx context.Context, volumeID string, sizeBytes int64) (*Volume, error) {
	seg, err := PathSegment("volume ID", volumeID)
	if err != nil {
		return nil, err
	}
	var out Volume
	if err := c.do(ctx, http.MethodPost, "/v1/volumes/"+seg+"/resize", nil, ResizeRequest{SizeBytes: sizeBytes}, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateSnapshot calls POST /v1/snapshots, idempotent on Name. Codes: InvalidArgument,
// AlreadyExists (same name, other source), VolumeNotFound, Unauthenticated, AccessDenied,
// plus faults on CreateSnapshot.
func (c *Client) CreateSnapshot(ctx context.Context, req CreateSnapshotRequest) (*Snapshot, error) {
	var out Snapshot
	if err := c.do(ctx, http.MethodPost, "/v1/snapshots", nil, req, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetSnapshot calls GET /v1/snapshots/{id}. Codes: SnapshotNotFound, Unauthenticated,
// AccessDenied.
func (c *Client) GetSnapshot(ctx context.Context, id string) (*Snapshot, error) {
	seg, err := PathSegment("snapshot ID", id)
	if err != nil {
		return nil, err
	}
	var out Snapshot
	if err := c.do(ctx, http.MethodGet, "/v1/snapshots/"+seg, nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListSnapshots calls GET /v1/snapshots?snapshotId=&sourceVolumeId=&maxResults=&pageToken=.
// Codes: InvalidArgument (bad page token), Unauthenticated, AccessDenied, plus faults on
// ListSnapshots.
func (c *Client) ListSnapshots(ctx context.Context, o ListSnapshotsOptions) (*SnapshotList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"snapshotId": o.SnapshotID, "sourceVolumeId": o.SourceVolumeID, "pageToken": o.PageToken} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.MaxResults != 0 {
		q.Set("maxResults", strconv.Itoa(o.MaxResults))
	}
	var out SnapshotList
	if err := c.do(ctx, http.MethodGet, "/v1/snapshots", q, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteSnapshot calls DELETE /v1/snapshots/{id}. Codes: SnapshotNotFound (already deleted;
// treat as success for idempotent deletion), SnapshotInGroup (a group's member: delete the
// group), Unauthenticated, AccessDenied, plus faults on DeleteSnapshot.
func (c *Client) DeleteSnapshot(ctx context.Context, id string) error {
	seg, err := PathSegment("snapshot ID", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1/snapshots/"+seg, nil, nil, nil, nil)
}

// GetQuotas calls GET /v1/quotas. Codes: Unauthenticated, AccessDenied.
func (c *Client) GetQuotas(ctx context.Context) (*Quotas, error) {
	var out Quotas
	if err := c.do(ctx, http.MethodGet, "/v1/quotas", nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// ModifyVolume calls POST /v1/volumes/{id}/modify: the volume's mutable parameters (type,
// IOPS); what it has already is a success that changes nothing. Codes: InvalidArgument,
// VolumeNotFound, Unauthenticated, AccessDenied, plus faults on ModifyVolume.
func (c *Client) ModifyVolume(ctx context.Context, volumeID string, req ModifyVolumeRequest) (*Volume, error) {
	seg, err := PathSegment("volume ID", volumeID)
	if err != nil {
		return nil, err
	}
	var out Volume
	if err := c.do(ctx, http.MethodPost, "/v1/volumes/"+seg+"/modify", nil, req, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// CreateGroupSnapshot calls POST /v1/group-snapshots, idempotent on Name: every volume is
// snapshotted at one point in time, or none is. Codes: InvalidArgument (bad name, no volumes,
// more than MaxGroupSnapshotMembers, a duplicate), AlreadyExists (same name, another set of
// volumes), VolumeNotFound, ZoneMismatch (volumes in more than one zone), Unauthenticated,
// AccessDenied, plus faults on CreateGroupSnapshot.
func (c *Client) CreateGroupSnapshot(ctx context.Context, req CreateGroupSnapshotRequest) (*GroupSnapshot, error) {
	var out GroupSnapshot
	if err := c.do(ctx, http.MethodPost, "/v1/group-snapshots", nil, req, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetGroupSnapshot calls GET /v1/group-snapshots/{id}. Codes: GroupSnapshotNotFound,
// Unauthenticated, AccessDenied.
func (c *Client) GetGroupSnapshot(ctx context.Context, id string) (*GroupSnapshot, error) {
	seg, err := PathSegment("group snapshot ID", id)
	if err != nil {
		return nil, err
	}
	var out GroupSnapshot
	if err := c.do(ctx, http.MethodGet, "/v1/group-snapshots/"+seg, nil, nil, &out, nil); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteGroupSnapshot calls DELETE /v1/group-snapshots/{id}, which deletes the group and
// every member in one transaction. Codes: GroupSnapshotNotFound (already deleted; treat as
// success for idempotent deletion), Unauthenticated, AccessDenied, plus faults on
// DeleteGroupSnapshot.
func (c *Client) DeleteGroupSnapshot(ctx context.Context, id string) error {
	seg, err := PathSegment("group snapshot ID", id)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodDelete, "/v1/group-snapshots/"+seg, nil, nil, nil, nil)
}
