// Driver for github.com/nats-io/nats.go speaking nats-conformance-driver/2:
// JSON requests on stdin, one per line; responses and events on stdout.
// nats.go's own checks before anything is written (ErrBadSubject,
// ErrMaxPayload, ...) answer `refused`; `invalid` is kept for a malformed
// request. headers_op uses nats.Header's Get/Values/Set/Del/Add, which are
// case-sensitive and keep the key as given (no canonicalising): the
// `insensitive` case is unsupported.
// The same source builds against every release of the series, the pinned
// module (module mode) and Debian's golang-github-nats-io-go-nats-dev 1.22.1
// (GOPATH mode); what differs between releases is chosen by build tags that
// tags.sh reads from the release's source (decode_*.go, subjects_*.go,
// tlsfirst_*.go, websocket_*.go).
// Transports through nats.go's own options: tls:// (and wss://) with
// nats.RootCAs(tls_ca_file), tls_first with nats.TLSHandshakeFirst(), ws://
// and wss:// URLs, ws_compression with nats.Compression(true).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

const protocolName = "nats-conformance-driver/2"

// sharedCapabilities are what every release of the series (1.22.1 and later)
// has, each added well before 1.22.1: the connect options; headers, Header's
// API (headers_op) and no_responders (1.11.0); the internal header parser and
// encoder (decode/encode_headers); JetStream (1.11.0) with KeyValue and
// ObjectStore (1.13.0); FlushTimeout, which sends PING and waits for the PONG.
// Its name checks are private and not linked: no validate_name.
var sharedCapabilities = []string{
	"headers", "no_responders", "queue_groups", "request", "unsubscribe_max", "drain",
	"verbose", "pedantic", "echo", "user_password", "token",
	"decode_headers", "encode_headers", "headers_op",
	"jetstream", "kv", "object_store", "flush_roundtrip",
}

// capabilities adds to sharedCapabilities what only some releases have, as
// the build tags found it in the release (see tags.sh). TLS with a CA file
// (RootCAs) is in every release of the series.
func capabilities() []string {
	caps := append([]string{}, sharedCapabilities...)
	if publishSubjectCheck != nil { // 1.48.0
		caps = append(caps, "validate_subject")
	}
	caps = append(caps, "tls")
	if tlsFirstOption != nil {
		caps = append(caps, "tls_first")
	}
	if compressionOption != nil {
		caps = append(caps, "websocket", "websocket_compression")
	}
	return caps
}

// Bounds for waits the protocol leaves open.
const (
	defaultFlushTimeout   = 5 * time.Second
	defaultRequestTimeout = 5 * time.Second
	closeWait             = 5 * time.Second
)

// driverError is an error already typed for the protocol.
type driverError struct {
	kind    string
	message string
}

func (e *driverError) Error() string { return e.message }

func fail(kind, format string, args ...any) error {
	return &driverError{kind: kind, message: fmt.Sprintf(format, args...)}
}

// output serialises every line written to stdout: responses come from the
// request loop, events from the library's goroutines.
type output struct {
	mu     sync.Mutex
	w      io.Writer
	muted  bool // after exit: no more events
	broken bool // stdout gone: nothing more can be said
}

func (o *output) write(v any) {
	var line bytes.Buffer
	enc := json.NewEncoder(&line) // one line, newline included
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(os.Stderr, "driver: cannot encode %#v: %v\n", v, err)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.broken {
		return
	}
	if _, err := o.w.Write(line.Bytes()); err != nil {
		o.broken = true
		fmt.Fprintf(os.Stderr, "driver: stdout: %v\n", err)
	}
}

func (o *output) event(v map[string]any) {
	o.mu.Lock()
	muted := o.muted
	o.mu.Unlock()
	if !muted {
		o.write(v)
	}
}

func (o *output) mute() {
	o.mu.Lock()
	o.muted = true
	o.mu.Unlock()
}

// connectOptions are the "options" of the connect command.
type connectOptions struct {
	Name         *string  `json:"name"`
	Verbose      *bool    `json:"verbose"`
	Pedantic     *bool    `json:"pedantic"`
	Echo         *bool    `json:"echo"`
	Headers      *bool    `json:"headers"`
	NoResponders *bool    `json:"no_responders"`
	User         *string  `json:"user"`
	Pass         *string  `json:"pass"`
	Token        *string  `json:"token"`
	TimeoutMs    *float64 `json:"timeout_ms"`
	Reconnect    *bool    `json:"reconnect"`
	TLSCAFile    *string  `json:"tls_ca_file"`
	TLSFirst     *bool    `json:"tls_first"`
	WSCompressed *bool    `json:"ws_compression"`
}

// request holds the arguments of every command; each uses its own subset.
type request struct {
	Cmd        string          `json:"cmd"`
	URL        string          `json:"url"`
	Options    *connectOptions `json:"options"`
	Subject    string          `json:"subject"`
	Use        string          `json:"use"`
	Reply      *string         `json:"reply"`
	Queue      *string         `json:"queue"`
	Headers    *[][]string     `json:"headers"`
	PayloadB64 string          `json:"payload_b64"`
	BlockB64   string          `json:"block_b64"`
	Sub        string          `json:"sub"`
	Max        *int            `json:"max"`
	TimeoutMs  *float64        `json:"timeout_ms"`
	Drain      bool            `json:"drain"`
	Case       string          `json:"case"`
	Op         string          `json:"op"`
	Key        string          `json:"key"`
	Value      *string         `json:"value"`
	Kind       string          `json:"kind"`
	Name       string          `json:"name"`
	Stream     *string         `json:"stream"`
	Subjects   []string        `json:"subjects"`
}

// connection is one nats.Conn and what the driver knows about it.
type connection struct {
	nc     *nats.Conn
	closed chan struct{} // closed by the library's ClosedHandler
}

type driver struct {
	out     *output
	conn    *connection
	subs    map[string]*nats.Subscription
	nextSub int
}

func main() {
	out := &output{w: os.Stdout}
	d := &driver{out: out, subs: map[string]*nats.Subscription{}}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if len(strings.TrimSpace(string(line))) > 0 {
			if d.handleLine(line) {
				break
			}
		}
		if err != nil {
			if err != io.EOF {
				fmt.Fprintf(os.Stderr, "driver: stdin: %v\n", err)
			}
			break
		}
	}
	d.shutdown()
	os.Exit(0)
}

// handleLine answers one request line; it reports whether the driver must exit.
func (d *driver) handleLine(line []byte) bool {
	var head map[string]json.RawMessage
	if err := json.Unmarshal(line, &head); err != nil {
		d.out.write(errorResponse(nil, fail("invalid", "malformed request: %v", err)))
		return false
	}
	var id int64
	rawID := head["id"]
	if rawID == nil || string(rawID) == "null" || json.Unmarshal(rawID, &id) != nil {
		d.out.write(errorResponse(nil, fail("invalid", "request without an integer id")))
		return false
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		d.out.write(errorResponse(&id, fail("invalid", "bad arguments: %v", err)))
		return false
	}
	if req.Cmd == "exit" {
		d.shutdown()
		d.out.write(map[string]any{"id": id, "ok": true, "result": map[string]any{}})
		return true
	}
	result, err := d.dispatch(&req)
	if err != nil {
		d.out.write(errorResponse(&id, err))
	} else {
		d.out.write(map[string]any{"id": id, "ok": true, "result": result})
	}
	return false
}

func errorResponse(id *int64, err error) map[string]any {
	kind, message := classify(err), err.Error()
	return map[string]any{"id": id, "ok": false, "error": map[string]any{"type": kind, "message": message}}
}

// dispatch runs one command; a panic inside the library becomes an `other` error.
func (d *driver) dispatch(req *request) (result map[string]any, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, fail("other", "panic in nats.go: %v", p)
		}
	}()
	switch req.Cmd {
	case "hello":
		return d.hello(), nil
	case "connect":
		return d.connect(req)
	case "publish":
		return d.publish(req)
	case "subscribe":
		return d.subscribe(req)
	case "unsubscribe":
		return d.unsubscribe(req)
	case "request":
		return d.request(req)
	case "flush":
		return d.flush(req)
	case "close":
		return d.close(req)
	case "decode_headers":
		return decodeHeaders(req)
	case "encode_headers":
		return encodeHeaders(req)
	case "headers_op":
		return headersOp(req)
	case "jetstream_create":
		return d.jetStreamCreate(req)
	case "jetstream_delete":
		return d.jetStreamDelete(req)
	case "validate_subject":
		return validateSubjectOf(req)
	case "validate_name":
		return nil, fail("unsupported", "nats.go exposes no ADR-6 name validation (its stream, consumer, bucket and key checks are private)")
	default:
		return nil, fail("unsupported", "unknown command %q", req.Cmd)
	}
}

func (d *driver) hello() map[string]any {
	return map[string]any{
		"protocol":     protocolName,
		"library":      "github.com/nats-io/nats.go",
		"version":      nats.Version,
		"language":     "Go " + strings.TrimPrefix(runtime.Version(), "go"),
		"capabilities": capabilities(),
	}
}

func (d *driver) connect(req *request) (map[string]any, error) {
	opts := nats.GetDefaultOptions()
	opts.Url = req.URL
	// A closed connection must stay visible: no reconnection unless asked.
	opts.AllowReconnect = false
	if o := req.Options; o != nil {
		// nats.go sends headers and no_responders as the server's INFO allows;
		// it has no way to turn them off.
		if o.Headers != nil && !*o.Headers {
			return nil, fail("unsupported", "nats.go cannot turn headers off (it follows the server's INFO)")
		}
		if o.NoResponders != nil && !*o.NoResponders {
			return nil, fail("unsupported", "nats.go cannot turn no_responders off (it follows the server's INFO)")
		}
		setString(&opts.Name, o.Name)
		setString(&opts.User, o.User)
		setString(&opts.Password, o.Pass)
		setString(&opts.Token, o.Token)
		setBool(&opts.Verbose, o.Verbose)
		setBool(&opts.Pedantic, o.Pedantic)
		setBool(&opts.AllowReconnect, o.Reconnect)
		if o.Echo != nil {
			opts.NoEcho = !*o.Echo
		}
		if o.TimeoutMs != nil {
			opts.Timeout = millis(*o.TimeoutMs)
		}
	}
	if err := setTransport(&opts, req.URL, req.Options); err != nil {
		return nil, err
	}
	d.dropConnection()
	conn := &connection{closed: make(chan struct{})}
	var once sync.Once
	opts.ClosedCB = func(nc *nats.Conn) {
		if err := nc.LastError(); err != nil {
			d.out.event(map[string]any{"event": "error", "type": classify(err), "message": err.Error()})
		}
		d.out.event(map[string]any{"event": "closed"})
		once.Do(func() { close(conn.closed) })
	}
	opts.AsyncErrorCB = func(_ *nats.Conn, _ *nats.Subscription, err error) {
		kind := classify(err)
		if errors.Is(err, nats.ErrBadHeaderMsg) {
			kind = "protocol" // a header block the server sent, not our argument
		}
		d.out.event(map[string]any{"event": "error", "type": kind, "message": err.Error()})
	}
	nc, err := opts.Connect()
	if err != nil {
		return nil, err
	}
	conn.nc = nc
	d.conn = conn
	return map[string]any{}, nil
}

// setTransport applies the transport the URL's scheme and the options ask
// for through nats.go's own options; unsupported where the release lacks one
// (never another transport in its place).
func setTransport(opts *nats.Options, raw string, o *connectOptions) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fail("invalid", "url: %v", err)
	}
	switch u.Scheme {
	case "nats", "tls":
	case "ws", "wss":
		if compressionOption == nil {
			return fail("unsupported", "nats.go %s has no WebSocket transport", nats.Version)
		}
	default:
		return fail("invalid", "a URL with the scheme %q", u.Scheme)
	}
	if o == nil {
		return nil
	}
	var apply []nats.Option
	if o.TLSCAFile != nil {
		apply = append(apply, nats.RootCAs(*o.TLSCAFile))
	}
	if o.TLSFirst != nil && *o.TLSFirst {
		if tlsFirstOption == nil {
			return fail("unsupported", "nats.go %s has no TLSHandshakeFirst", nats.Version)
		}
		apply = append(apply, tlsFirstOption())
	}
	if o.WSCompressed != nil && *o.WSCompressed {
		if compressionOption == nil {
			return fail("unsupported", "nats.go %s has no Compression option", nats.Version)
		}
		apply = append(apply, compressionOption(true))
	}
	for _, option := range apply {
		if err := option(opts); err != nil {
			return err
		}
	}
	return nil
}

// dropConnection closes a previous connection before a new connect.
func (d *driver) dropConnection() {
	if d.conn != nil && !d.conn.nc.IsClosed() {
		d.conn.nc.Close()
		waitClosed(d.conn)
	}
	d.conn = nil
	d.subs = map[string]*nats.Subscription{}
}

func (d *driver) current() (*nats.Conn, error) {
	if d.conn == nil {
		return nil, fail("connection", "not connected")
	}
	return d.conn.nc, nil
}

func (d *driver) publish(req *request) (map[string]any, error) {
	nc, err := d.current()
	if err != nil {
		return nil, err
	}
	msg, err := buildMsg(req)
	if err != nil {
		return nil, err
	}
	if req.Reply != nil {
		msg.Reply = *req.Reply
	}
	return map[string]any{}, nc.PublishMsg(msg)
}

func (d *driver) subscribe(req *request) (map[string]any, error) {
	nc, err := d.current()
	if err != nil {
		return nil, err
	}
	d.nextSub++
	handle := "s" + strconv.Itoa(d.nextSub)
	deliver := func(m *nats.Msg) {
		ev := messageFields(m)
		ev["event"] = "message"
		ev["sub"] = handle
		d.out.event(ev)
	}
	var sub *nats.Subscription
	if req.Queue != nil {
		sub, err = nc.QueueSubscribe(req.Subject, *req.Queue, deliver)
	} else {
		sub, err = nc.Subscribe(req.Subject, deliver)
	}
	if err != nil {
		return nil, err
	}
	d.subs[handle] = sub
	return map[string]any{"sub": handle}, nil
}

func (d *driver) unsubscribe(req *request) (map[string]any, error) {
	sub, ok := d.subs[req.Sub]
	if !ok {
		return nil, fail("invalid", "unknown subscription handle %q", req.Sub)
	}
	if req.Max != nil {
		return map[string]any{}, sub.AutoUnsubscribe(*req.Max)
	}
	delete(d.subs, req.Sub)
	return map[string]any{}, sub.Unsubscribe()
}

func (d *driver) request(req *request) (map[string]any, error) {
	nc, err := d.current()
	if err != nil {
		return nil, err
	}
	msg, err := buildMsg(req)
	if err != nil {
		return nil, err
	}
	timeout := defaultRequestTimeout
	if req.TimeoutMs != nil {
		timeout = millis(*req.TimeoutMs)
	}
	resp, err := nc.RequestMsg(msg, timeout)
	if err != nil {
		return nil, err
	}
	return map[string]any{"message": messageFields(resp)}, nil
}

func (d *driver) flush(req *request) (map[string]any, error) {
	nc, err := d.current()
	if err != nil {
		return nil, err
	}
	timeout := defaultFlushTimeout
	if req.TimeoutMs != nil {
		timeout = millis(*req.TimeoutMs)
	}
	return map[string]any{}, nc.FlushTimeout(timeout)
}

// close answers after the library has reported the connection closed, so
// the `closed` event comes before the response.
func (d *driver) close(req *request) (map[string]any, error) {
	if d.conn == nil || d.conn.nc.IsClosed() {
		return map[string]any{}, nil
	}
	nc := d.conn.nc
	if req.Drain {
		if err := nc.Drain(); err != nil {
			return nil, err
		}
		// Drain finishes asynchronously, bounded by the library's DrainTimeout.
		select {
		case <-d.conn.closed:
		case <-time.After(nc.Opts.DrainTimeout + closeWait):
			return nil, fail("timeout", "drain did not finish")
		}
		return map[string]any{}, nil
	}
	nc.Close()
	waitClosed(d.conn)
	return map[string]any{}, nil
}

func waitClosed(c *connection) {
	select {
	case <-c.closed:
	case <-time.After(closeWait):
		fmt.Fprintln(os.Stderr, "driver: no ClosedHandler call after Close")
	}
}

// shutdown closes the connection without reporting anything more.
func (d *driver) shutdown() {
	d.out.mute()
	if d.conn != nil {
		d.conn.nc.Close()
	}
}

// buildMsg makes the nats.Msg of publish and request.
func buildMsg(req *request) (*nats.Msg, error) {
	data, err := base64.StdEncoding.DecodeString(req.PayloadB64)
	if err != nil {
		return nil, fail("invalid", "payload_b64: %v", err)
	}
	msg := &nats.Msg{Subject: req.Subject, Data: data}
	if req.Headers != nil {
		if msg.Header, err = toHeader(*req.Headers); err != nil {
			return nil, err
		}
	}
	return msg, nil
}

// messageFields is the protocol's view of a received message.
func messageFields(m *nats.Msg) map[string]any {
	status, description, headers := splitHeader(m.Header)
	var reply any
	if m.Reply != "" {
		reply = m.Reply
	}
	return map[string]any{
		"subject":     m.Subject,
		"reply":       reply,
		"headers":     headers,
		"status":      status,
		"description": description,
		"payload_b64": base64.StdEncoding.EncodeToString(m.Data),
	}
}

func decodeHeaders(req *request) (map[string]any, error) {
	block, err := base64.StdEncoding.DecodeString(req.BlockB64)
	if err != nil {
		return nil, fail("invalid", "block_b64: %v", err)
	}
	h, err := decodeHeaderBlock(block)
	if err != nil {
		// The parser refused the block, whatever its error value (1.22.1 can
		// return textproto's io.EOF, which is no connection trouble here).
		return nil, fail("refused", "%v", err)
	}
	status, description, headers := splitHeader(h)
	if headers == nil {
		headers = [][]string{}
	}
	return map[string]any{"status": status, "description": description, "headers": headers}, nil
}

func encodeHeaders(req *request) (map[string]any, error) {
	if req.Headers == nil {
		return nil, fail("invalid", "encode_headers needs headers")
	}
	h, err := toHeader(*req.Headers)
	if err != nil {
		return nil, err
	}
	block, err := encodeHeaderBlock(h)
	if err != nil {
		return nil, fail("refused", "%v", err)
	}
	return map[string]any{"block_b64": base64.StdEncoding.EncodeToString(block)}, nil
}

// validateSubjectOf answers with the release's own publish-subject check; a
// release without one is never asked (the check would be the driver's).
func validateSubjectOf(req *request) (map[string]any, error) {
	if publishSubjectCheck == nil {
		return nil, fail("unsupported", "nats.go %s has no subject validation (publish subjects are checked from 1.48.0)", nats.Version)
	}
	if req.Use != "publish" {
		return nil, fail("unsupported", "nats.go validates publish subjects only, not %q ones", req.Use)
	}
	return map[string]any{"valid": publishSubjectCheck(req.Subject) == nil}, nil
}

// headersOp does one operation through nats.Header's own methods.
func headersOp(req *request) (map[string]any, error) {
	if req.Headers == nil {
		return nil, fail("invalid", "headers_op needs headers")
	}
	if req.Case != "sensitive" {
		return nil, fail("unsupported", "nats.Header matches keys case-sensitively only")
	}
	h, err := toHeader(*req.Headers)
	if err != nil {
		return nil, err
	}
	value := ""
	if req.Value != nil {
		value = *req.Value
	}
	switch req.Op {
	case "get":
		if h.Values(req.Key) == nil { // Get gives "" for an absent key too
			return map[string]any{"value": nil}, nil
		}
		return map[string]any{"value": h.Get(req.Key)}, nil
	case "values":
		values := h.Values(req.Key)
		if values == nil {
			values = []string{}
		}
		return map[string]any{"values": values}, nil
	case "set":
		h.Set(req.Key, value)
	case "delete":
		h.Del(req.Key)
	case "append":
		h.Add(req.Key, value)
	default:
		return nil, fail("invalid", "unknown headers_op op %q", req.Op)
	}
	_, _, pairs := splitHeader(h)
	return map[string]any{"headers": pairs}, nil
}

// toHeader builds a nats.Header with Add, the library's case-preserving append.
func toHeader(pairs [][]string) (nats.Header, error) {
	h := nats.Header{}
	for _, kv := range pairs {
		if len(kv) != 2 {
			return nil, fail("invalid", "a header must be [name, value], got %q", kv)
		}
		h.Add(kv[0], kv[1])
	}
	return h, nil
}

// Keys under which nats.go stores a header block's status line.
const (
	statusKey      = "Status"
	descriptionKey = "Description"
)

// splitHeader turns the library's Header map into status, description and a
// list of pairs. nats.go has no status field: its parser appends the status
// line's code and text to the map under "Status" and "Description", and the
// library reads them back with Header.Get. The driver reads them the same
// way (so a real "Status" header counts as a status, as it does for nats.go)
// and leaves the values it used out of the list. A Go map has no order:
// keys are listed in byte order, each key's values in the library's order.
func splitHeader(h nats.Header) (status any, description any, headers [][]string) {
	if h == nil {
		return nil, nil, nil
	}
	skip := map[string]bool{}
	if code, err := strconv.Atoi(h.Get(statusKey)); err == nil {
		status = code
		skip[statusKey] = true
		if text := h.Get(descriptionKey); text != "" {
			description = text
			skip[descriptionKey] = true
		}
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	headers = [][]string{}
	for _, k := range keys {
		values := h[k]
		if skip[k] {
			values = values[1:] // Get returned the first
		}
		for _, v := range values {
			headers = append(headers, []string{k, v})
		}
	}
	return status, description, headers
}

func setString(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func setBool(dst *bool, v *bool) {
	if v != nil {
		*dst = *v
	}
}

func millis(ms float64) time.Duration {
	return time.Duration(ms * float64(time.Millisecond))
}

// classify maps a nats.go error to a protocol error type.
func classify(err error) string {
	var de *driverError
	if errors.As(err, &de) {
		return de.kind
	}
	is := func(targets ...error) bool {
		for _, t := range targets {
			if errors.Is(err, t) {
				return true
			}
		}
		return false
	}
	var netErr net.Error
	switch {
	case is(nats.ErrTimeout, context.DeadlineExceeded):
		return "timeout"
	case is(nats.ErrNoResponders):
		return "no_responders"
	case is(nats.ErrBadSubject, nats.ErrBadQueueName, nats.ErrBadHeaderMsg, nats.ErrInvalidMsg,
		nats.ErrInvalidArg, nats.ErrMaxPayload, nats.ErrBadTimeout, nats.ErrHeadersNotSupported,
		nats.ErrNoEchoNotSupported, nats.ErrBadSubscription):
		// nats.go's own checks, made before it writes anything.
		return "refused"
	case is(nats.ErrConnectionClosed, nats.ErrNoServers, nats.ErrInvalidConnection,
		nats.ErrConnectionDraining, nats.ErrConnectionReconnecting, nats.ErrDisconnected,
		nats.ErrStaleConnection, nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked,
		nats.ErrMaxConnectionsExceeded, nats.ErrSecureConnRequired, nats.ErrSecureConnWanted,
		io.EOF, io.ErrUnexpectedEOF, net.ErrClosed):
		return "connection"
	case is(nats.ErrDrainTimeout):
		return "timeout"
	case is(nats.ErrSlowConsumer, nats.ErrMaxMessages, nats.ErrReconnectBufExceeded):
		return "other"
	case errors.As(err, &netErr):
		if netErr.Timeout() {
			return "timeout"
		}
		return "connection"
	}
	// What is left with the library's "nats: " prefix is protocol trouble:
	// an -ERR from the server (nats.go makes "nats: <text>" of it, with no
	// exported value to compare; ErrPermissionViolation is newer than 1.22),
	// a missing INFO, an unexpected reply to CONNECT.
	text := strings.ToLower(err.Error())
	switch {
	case strings.Contains(text, "authorization violation"):
		return "connection"
	case strings.HasPrefix(text, "nats: "):
		return "protocol"
	}
	return "other"
}
