//! nats-conformance-driver/2 for the async-nats crate: JSON lines on stdin (requests), JSON lines
//! on stdout (responses and events). Requests are handled one at a time; subscription messages
//! and connection events are written by other tasks through the same locked, flushed writer.
//! The crate's own checks before anything is written (an invalid subject, queue name, header
//! name or value, a payload over the maximum, an unparsable URL) answer `refused`; `invalid` is
//! kept for a malformed request. Messages carry the status line in their own status and
//! description fields. headers_op uses HeaderMap get/get_all/insert/append, which match names
//! exactly (HeaderName's derived equality): `insensitive` is unsupported, and so is `delete`
//! (HeaderMap has no remove).

use std::collections::HashMap;
use std::io::Write;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod jetstream;

use async_nats::client::FlushErrorKind;
use async_nats::{
    Auth, AuthError, Client, ClientError, ConnectErrorKind, ConnectOptions, Event, HeaderMap,
    HeaderName, HeaderValue, Message, PublishErrorKind, Request, RequestErrorKind, Subject,
    SubscribeErrorKind, Subscriber,
};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use futures_util::StreamExt;
use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

const PROTOCOL: &str = "nats-conformance-driver/2";
/// What async-nats supports through this driver. Not verbose or pedantic (CONNECT hard-codes
/// them false); jetstream, kv and object_store through its jetstream Context (the crate features
/// of those names, see Cargo.toml, and jetstream.rs); not flush_roundtrip: Client::flush resolves once the connection task has
/// flushed its write buffer to the socket, with no PING/PONG. validate_subject answers for the
/// subscribe use only (Subject::validated); decode/encode_headers are unreachable.
/// async-nats has no release series here: the crate features jetstream, kv and object-store
/// exist from 0.46.0 (before, that API was always built in), so an older release fails to
/// resolve in cargo (a build error) rather than being judged without the API.
/// Transports: TLS after INFO for a tls:// URL (ConnectOptions::add_root_certificates with the CA
/// file, require_tls), TLS first (ConnectOptions::tls_first), ws:// and wss:// URLs (the crate
/// feature `websockets`, through tokio-websockets, which has no permessage-deflate: no
/// websocket_compression).
const CAPABILITIES: [&str; 17] = [
    "headers",
    "no_responders",
    "queue_groups",
    "request",
    "unsubscribe_max",
    "drain",
    "echo",
    "user_password",
    "token",
    "validate_subject",
    "headers_op",
    "jetstream",
    "kv",
    "object_store",
    "tls",
    "tls_first",
    "websocket",
];
const LIBRARY: &str = "async-nats";
// Set by build.sh from Cargo.lock and `rustc --version`; the crate keeps its own VERSION private.
const LIBRARY_VERSION: &str = match option_env!("DRIVER_LIBRARY_VERSION") {
    Some(v) => v,
    None => "unknown",
};
const RUSTC_VERSION: &str = match option_env!("DRIVER_RUSTC_VERSION") {
    Some(v) => v,
    None => "rustc (unknown version)",
};
const DEFAULT_TIMEOUT_MS: u64 = 5000;
// How long `close` waits for a drain to finish, and for the library to report the connection
// closed once every handle is dropped (it never does while it is busy reconnecting).
const DRAIN_WAIT: Duration = Duration::from_secs(10);
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// The shared stdout: one JSON object per line, flushed after every line.
#[derive(Clone)]
struct Out(Arc<Mutex<std::io::Stdout>>);

impl Out {
    fn line(&self, value: &Value) {
        let text = value.to_string();
        let mut out = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // A closed stdout means the harness is gone; nothing useful is left to do with the error.
        let _ = writeln!(out, "{text}").and_then(|()| out.flush());
    }

    fn error_event(&self, kind: &str, message: String) {
        self.line(&json!({"event": "error", "type": kind, "message": message}));
    }
}

/// An `ok: false` answer: the protocol's error type and the library's text.
struct Failure {
    kind: &'static str,
    message: String,
}

fn fail(kind: &'static str, message: impl ToString) -> Failure {
    Failure {
        kind,
        message: message.to_string(),
    }
}

type Outcome = Result<Value, Failure>;

// ---- argument access -------------------------------------------------------------------------

fn arg_str<'a>(req: &'a Value, key: &str) -> Result<&'a str, Failure> {
    req.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| fail("invalid", format!("missing or non-string argument `{key}`")))
}

fn opt_str<'a>(req: &'a Value, key: &str) -> Result<Option<&'a str>, Failure> {
    match req.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(fail(
            "invalid",
            format!("argument `{key}` must be a string or null"),
        )),
    }
}

fn opt_u64(req: &Value, key: &str) -> Result<Option<u64>, Failure> {
    match req.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or_else(|| {
            fail(
                "invalid",
                format!("argument `{key}` must be a non-negative integer"),
            )
        }),
    }
}

fn opt_bool(obj: &Value, key: &str) -> Result<Option<bool>, Failure> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(_) => Err(fail("invalid", format!("option `{key}` must be a boolean"))),
    }
}

fn timeout_arg(req: &Value) -> Result<Duration, Failure> {
    Ok(Duration::from_millis(
        opt_u64(req, "timeout_ms")?.unwrap_or(DEFAULT_TIMEOUT_MS),
    ))
}

/// The payload bytes; async-nats takes `bytes::Bytes`, which converts from `Vec<u8>`.
fn payload_arg(req: &Value) -> Result<Vec<u8>, Failure> {
    let text = match req.get("payload_b64") {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => return Err(fail("invalid", "argument `payload_b64` must be a string")),
    };
    B64.decode(text)
        .map_err(|e| fail("invalid", format!("payload_b64 is not base64: {e}")))
}

/// Builds the library's HeaderMap with its fallible constructors (the `&str` conversions panic on
/// invalid input), appending so that repeated names keep every value in order.
fn headers_arg(req: &Value) -> Result<Option<HeaderMap>, Failure> {
    let pairs = match req.get("headers") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(pairs)) => pairs,
        Some(_) => return Err(fail("invalid", "argument `headers` must be a list or null")),
    };
    let mut map = HeaderMap::new();
    for pair in pairs {
        let (name, value) = match pair.as_array().map(Vec::as_slice) {
            Some([Value::String(n), Value::String(v)]) => (n, v),
            _ => {
                return Err(fail(
                    "invalid",
                    "each header must be a [name, value] pair of strings",
                ))
            }
        };
        // The crate's own checks of a header name and value: a local refusal.
        let name = HeaderName::from_str(name).map_err(|e| fail("refused", e))?;
        let value = HeaderValue::from_str(value).map_err(|e| fail("refused", e))?;
        map.append(name, value);
    }
    Ok(Some(map))
}

// ---- library values to protocol JSON ---------------------------------------------------------

/// Header pairs in the order the HeaderMap iterator presents them (a HashMap: the name order is
/// unspecified), each name's values in insertion order.
fn headers_json(headers: &HeaderMap) -> Value {
    let mut pairs = Vec::new();
    for (name, values) in headers.iter() {
        for value in values {
            pairs.push(json!([name.to_string(), value.as_str()]));
        }
    }
    Value::Array(pairs)
}

fn message_json(message: &Message) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("subject".into(), json!(message.subject.as_str()));
    m.insert(
        "reply".into(),
        json!(message.reply.as_ref().map(|r| r.as_str())),
    );
    m.insert(
        "headers".into(),
        message.headers.as_ref().map_or(Value::Null, headers_json),
    );
    m.insert("status".into(), json!(message.status.map(|s| s.as_u16())));
    m.insert("description".into(), json!(message.description));
    m.insert("payload_b64".into(), json!(B64.encode(&message.payload)));
    m
}

// ---- subscriptions ---------------------------------------------------------------------------

enum SubControl {
    Unsubscribe {
        max: Option<u64>,
        reply: oneshot::Sender<Result<(), String>>,
    },
}

struct SubHandle {
    control: mpsc::Sender<SubControl>,
    task: JoinHandle<()>,
}

/// Owns one Subscriber: writes every message it yields as an event and carries out unsubscribe
/// requests. It keeps the Subscriber after its stream ends so a later unsubscribe still reaches
/// the library; it returns once the stream has ended and the driver has dropped its handle.
async fn pump(
    mut sub: Subscriber,
    handle: String,
    mut control: mpsc::Receiver<SubControl>,
    out: Out,
) {
    let (mut stream_open, mut control_open) = (true, true);
    while stream_open || control_open {
        tokio::select! {
            message = sub.next(), if stream_open => match message {
                Some(message) => {
                    let mut event = message_json(&message);
                    event.insert("event".into(), json!("message"));
                    event.insert("sub".into(), json!(handle));
                    out.line(&Value::Object(event));
                }
                None => stream_open = false,
            },
            command = control.recv(), if control_open => match command {
                Some(SubControl::Unsubscribe { max, reply }) => {
                    let result = match max {
                        Some(max) => sub.unsubscribe_after(max).await,
                        None => sub.unsubscribe().await,
                    };
                    let _ = reply.send(result.map_err(|e| e.to_string()));
                }
                None => control_open = false,
            },
        }
    }
}

// ---- connection ------------------------------------------------------------------------------

struct Connection {
    client: Client,
    // Becomes true when the library reports the connection closed (or gives up reconnecting).
    closed: watch::Receiver<bool>,
}

/// State an event callback shares with the driver.
struct EventSink {
    out: Out,
    generation: u64,
    current: Arc<AtomicU64>,
    reconnect: bool,
    closed: watch::Sender<bool>,
    // With reconnect off, set from `Disconnected` until the library gives up: the failures of the
    // one reconnect attempt the library insists on are artefacts of the driver, not reported.
    reconnecting: AtomicBool,
}

impl EventSink {
    fn report(&self, event: Event) {
        // Events of a connection the driver has since replaced are only logged.
        if self.current.load(Ordering::SeqCst) != self.generation {
            eprintln!("async-nats (old connection {}): {event}", self.generation);
            return;
        }
        eprintln!("async-nats event: {event}");
        match event {
            Event::Closed | Event::ClientError(ClientError::MaxReconnects) => {
                if !self.closed.send_replace(true) {
                    self.out.line(&json!({"event": "closed"}));
                }
            }
            Event::Disconnected if !self.reconnect => {
                self.reconnecting.store(true, Ordering::SeqCst)
            }
            Event::ClientError(ClientError::Other(_))
                if self.reconnecting.load(Ordering::SeqCst) => {}
            Event::ClientError(err) => self.out.error_event("other", err.to_string()),
            Event::ServerError(err) => self.out.error_event("protocol", err.to_string()),
            Event::SlowConsumer(_) => self.out.error_event("other", event.to_string()),
            Event::Connected | Event::Disconnected | Event::LameDuckMode | Event::Draining => {}
        }
    }
}

/// async-nats cannot switch reconnection off: `max_reconnects(0)` means "no limit" and the
/// attempt counter restarts at zero after every successful connect, so `max_reconnects(1)` still
/// makes one attempt. That attempt is made to fail before CONNECT is sent: the auth callback
/// (called once per connect) answers the first call with the requested credentials and refuses
/// every later one. The library then reports MaxReconnects and stops its connection task.
fn no_reconnect_options(auth: Auth) -> ConnectOptions {
    let calls = Arc::new(AtomicUsize::new(0));
    ConnectOptions::with_auth_callback(move |_nonce| {
        let first = calls.fetch_add(1, Ordering::SeqCst) == 0;
        let auth = auth.clone();
        async move {
            if first {
                Ok(auth)
            } else {
                Err(AuthError::new(
                    "reconnection disabled by the conformance driver",
                ))
            }
        }
    })
    .max_reconnects(1)
    .reconnect_delay_callback(|_| Duration::ZERO)
}

/// The CONNECT fields async-nats hard-codes (verbose, pedantic, headers, no_responders): asking
/// for the other value is `unsupported`.
fn require_fixed(options: &Value, key: &str, fixed: bool) -> Result<(), Failure> {
    match opt_bool(options, key)? {
        Some(wanted) if wanted != fixed => Err(fail(
            "unsupported",
            format!("async-nats always sends {key}={fixed} and has no option to change it"),
        )),
        _ => Ok(()),
    }
}

/// The transport options: the CA file the server is verified against, TLS required for a tls://
/// URL, the TLS-first handshake (on TCP only: the crate's WebSocket path would ignore it), and
/// no compression (tokio-websockets offers no permessage-deflate).
fn transport_options(
    mut opts: ConnectOptions,
    url: &str,
    options: &Value,
) -> Result<ConnectOptions, Failure> {
    let websocket = url.starts_with("ws://") || url.starts_with("wss://");
    if let Some(ca) = opt_str(options, "tls_ca_file")? {
        opts = opts.add_root_certificates(ca.into());
    }
    if url.starts_with("tls://") {
        opts = opts.require_tls(true);
    }
    if opt_bool(options, "tls_first")? == Some(true) {
        if websocket {
            return Err(fail(
                "unsupported",
                "async-nats has no TLS-first handshake on a WebSocket",
            ));
        }
        opts = opts.tls_first();
    }
    if opt_bool(options, "ws_compression")? == Some(true) {
        return Err(fail(
            "unsupported",
            "async-nats's WebSocket (tokio-websockets) offers no permessage-deflate",
        ));
    }
    Ok(opts)
}

fn connect_error(err: async_nats::ConnectError) -> Failure {
    let kind = match err.kind() {
        ConnectErrorKind::ServerParse => "refused", // the crate could not parse the URL
        ConnectErrorKind::TimedOut => "timeout",
        _ => "connection",
    };
    fail(kind, err)
}

// ---- the driver ------------------------------------------------------------------------------

struct Driver {
    out: Out,
    conn: Option<Connection>,
    subs: HashMap<String, SubHandle>,
    next_sub: u64,
    generation: Arc<AtomicU64>,
}

impl Driver {
    fn client(&self) -> Result<&Client, Failure> {
        self.conn
            .as_ref()
            .map(|c| &c.client)
            .ok_or_else(|| fail("connection", "not connected"))
    }

    async fn dispatch(&mut self, cmd: &str, req: &Value) -> Outcome {
        match cmd {
            "hello" => Ok(json!({
                "protocol": PROTOCOL,
                "library": LIBRARY,
                "version": LIBRARY_VERSION,
                "language": format!("Rust ({RUSTC_VERSION})"),
                "capabilities": CAPABILITIES,
            })),
            "headers_op" => headers_op(req),
            "connect" => self.connect(req).await,
            "publish" => self.publish(req).await,
            "subscribe" => self.subscribe(req).await,
            "unsubscribe" => self.unsubscribe(req).await,
            "request" => self.request(req).await,
            "flush" => self.flush(req).await,
            "close" => self.close(req).await,
            "validate_subject" => validate_subject(req),
            "decode_headers" | "encode_headers" => Err(fail(
                "unsupported",
                "async-nats keeps its header parser (Connection::try_read_op) and serializer \
                 (HeaderMap::to_bytes) crate-private; neither is reachable without a server",
            )),
            "validate_name" => Err(fail(
                "unsupported",
                "async-nats exposes no name validation (its JetStream/KV/object-store checks are \
                 crate-private)",
            )),
            "jetstream_create" => jetstream::create(self.client()?, req).await,
            "jetstream_delete" => jetstream::delete(self.client()?, req).await,
            "exit" => Ok(json!({})),
            other => Err(fail("unsupported", format!("unknown command `{other}`"))),
        }
    }

    async fn connect(&mut self, req: &Value) -> Outcome {
        let url = arg_str(req, "url")?;
        let empty = json!({});
        let options = match req.get("options") {
            None | Some(Value::Null) => &empty,
            Some(o @ Value::Object(_)) => o,
            Some(_) => return Err(fail("invalid", "`options` must be an object")),
        };
        const KNOWN: [&str; 14] = [
            "name",
            "verbose",
            "pedantic",
            "echo",
            "headers",
            "no_responders",
            "user",
            "pass",
            "token",
            "timeout_ms",
            "reconnect",
            "tls_ca_file",
            "tls_first",
            "ws_compression",
        ];
        if let Some(key) = options
            .as_object()
            .and_then(|o| o.keys().find(|k| !KNOWN.contains(&k.as_str())))
        {
            return Err(fail(
                "unsupported",
                format!("unknown connect option `{key}`"),
            ));
        }
        require_fixed(options, "verbose", false)?;
        require_fixed(options, "pedantic", false)?;
        require_fixed(options, "headers", true)?;
        require_fixed(options, "no_responders", true)?;

        let mut auth = Auth::new();
        auth.username = opt_str(options, "user")?.map(str::to_owned);
        auth.password = opt_str(options, "pass")?.map(str::to_owned);
        auth.token = opt_str(options, "token")?.map(str::to_owned);
        if auth.username.is_some() != auth.password.is_some() {
            return Err(fail(
                "unsupported",
                "async-nats takes user and pass only together",
            ));
        }
        let reconnect = opt_bool(options, "reconnect")?.unwrap_or(false);

        let mut opts = if reconnect {
            let mut opts = ConnectOptions::new();
            if let (Some(user), Some(pass)) = (auth.username.clone(), auth.password.clone()) {
                opts = opts.user_and_password(user, pass);
            }
            if let Some(token) = auth.token.clone() {
                opts = opts.token(token);
            }
            opts
        } else {
            no_reconnect_options(auth)
        };
        if let Some(name) = opt_str(options, "name")? {
            opts = opts.name(name);
        }
        if opt_bool(options, "echo")? == Some(false) {
            opts = opts.no_echo();
        }
        if let Some(ms) = opt_u64(options, "timeout_ms")? {
            opts = opts.connection_timeout(Duration::from_millis(ms));
        }
        opts = transport_options(opts, url, options)?;

        // A new connect replaces the previous connection; its events are no longer reported.
        self.drop_connection().await;
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let (closed_tx, closed_rx) = watch::channel(false);
        let sink = Arc::new(EventSink {
            out: self.out.clone(),
            generation,
            current: self.generation.clone(),
            reconnect,
            closed: closed_tx,
            reconnecting: AtomicBool::new(false),
        });
        opts = opts.event_callback(move |event| {
            let sink = sink.clone();
            async move { sink.report(event) }
        });

        let client = opts.connect(url).await.map_err(connect_error)?;
        self.conn = Some(Connection {
            client,
            closed: closed_rx,
        });
        Ok(json!({}))
    }

    async fn publish(&mut self, req: &Value) -> Outcome {
        let subject = arg_str(req, "subject")?.to_owned();
        let reply = opt_str(req, "reply")?.map(str::to_owned);
        let headers = headers_arg(req)?;
        let payload = payload_arg(req)?.into();
        let client = self.client()?;
        let result = match (reply, headers) {
            (None, None) => client.publish(subject, payload).await,
            (Some(r), None) => client.publish_with_reply(subject, r, payload).await,
            (None, Some(h)) => client.publish_with_headers(subject, h, payload).await,
            (Some(r), Some(h)) => {
                client
                    .publish_with_reply_and_headers(subject, r, h, payload)
                    .await
            }
        };
        result.map(|()| json!({})).map_err(|err| {
            let kind = match err.kind() {
                PublishErrorKind::InvalidSubject | PublishErrorKind::MaxPayloadExceeded => {
                    "refused"
                }
                PublishErrorKind::Send => "connection",
            };
            fail(kind, err)
        })
    }

    async fn subscribe(&mut self, req: &Value) -> Outcome {
        let subject = arg_str(req, "subject")?.to_owned();
        let queue = opt_str(req, "queue")?.map(str::to_owned);
        let client = self.client()?;
        let result = match queue {
            Some(queue) => client.queue_subscribe(subject, queue).await,
            None => client.subscribe(subject).await,
        };
        let sub = result.map_err(|err| {
            let kind = match err.kind() {
                SubscribeErrorKind::InvalidSubject | SubscribeErrorKind::InvalidQueueName => {
                    "refused"
                }
                SubscribeErrorKind::Other => "connection",
            };
            fail(kind, err)
        })?;
        self.next_sub += 1;
        let handle = self.next_sub.to_string();
        let (control, control_rx) = mpsc::channel(1);
        let task = tokio::spawn(pump(sub, handle.clone(), control_rx, self.out.clone()));
        self.subs
            .insert(handle.clone(), SubHandle { control, task });
        Ok(json!({"sub": handle}))
    }

    async fn unsubscribe(&mut self, req: &Value) -> Outcome {
        let handle = arg_str(req, "sub")?;
        let max = opt_u64(req, "max")?;
        let sub = self
            .subs
            .get(handle)
            .ok_or_else(|| fail("invalid", format!("no subscription `{handle}`")))?;
        let (reply, answer) = oneshot::channel();
        sub.control
            .send(SubControl::Unsubscribe { max, reply })
            .await
            .map_err(|_| fail("other", "subscription task is gone"))?;
        match answer.await {
            Ok(Ok(())) => Ok(json!({})),
            Ok(Err(message)) => Err(fail("connection", message)),
            Err(_) => Err(fail("other", "subscription task is gone")),
        }
    }

    async fn request(&mut self, req: &Value) -> Outcome {
        let subject = arg_str(req, "subject")?.to_owned();
        let headers = headers_arg(req)?;
        let payload = payload_arg(req)?;
        let timeout = timeout_arg(req)?;
        let client = self.client()?;
        let mut request = Request::new()
            .payload(payload.into())
            .timeout(Some(timeout));
        if let Some(headers) = headers {
            request = request.headers(headers);
        }
        match client.send_request(subject, request).await {
            Ok(message) => Ok(json!({"message": Value::Object(message_json(&message))})),
            Err(err) => {
                let kind = match err.kind() {
                    RequestErrorKind::TimedOut => "timeout",
                    RequestErrorKind::NoResponders => "no_responders",
                    RequestErrorKind::InvalidSubject | RequestErrorKind::MaxPayloadExceeded => {
                        "refused"
                    }
                    RequestErrorKind::Other if self.is_closed() => "connection",
                    RequestErrorKind::Other => "other",
                };
                Err(fail(kind, err))
            }
        }
    }

    async fn flush(&mut self, req: &Value) -> Outcome {
        let timeout = timeout_arg(req)?;
        let client = self.client()?;
        match tokio::time::timeout(timeout, client.flush()).await {
            Err(_) => Err(fail(
                "timeout",
                format!("flush took longer than {timeout:?}"),
            )),
            Ok(Ok(())) => Ok(json!({})),
            // Both kinds mean the connection task is gone: the command channel or the PONG
            // observer was dropped.
            Ok(Err(err)) => Err(fail(
                match err.kind() {
                    FlushErrorKind::SendError | FlushErrorKind::FlushError => "connection",
                },
                err,
            )),
        }
    }

    /// close {drain}: async-nats has no close call. Drain is `Client::drain`; a plain close drops
    /// every Client and Subscriber, which makes the library's connection task end (Event::Closed).
    async fn close(&mut self, req: &Value) -> Outcome {
        let drain = opt_bool(req, "drain")?.unwrap_or(false);
        let Some(conn) = self.conn.as_ref() else {
            return Ok(json!({}));
        };
        if drain && !self.is_closed() {
            conn.client
                .drain()
                .await
                .map_err(|err| fail("connection", err))?;
            let mut closed = conn.closed.clone();
            let finished = tokio::time::timeout(DRAIN_WAIT, closed.wait_for(|c| *c)).await;
            if finished.is_err() {
                return Err(fail(
                    "timeout",
                    format!("drain did not finish within {DRAIN_WAIT:?}"),
                ));
            }
            // Let every subscription task write what the drain delivered before answering.
            for (_, sub) in self.subs.drain() {
                drop(sub.control);
                let _ = tokio::time::timeout(DRAIN_WAIT, sub.task).await;
            }
        }
        let mut closed = self.drop_connection().await;
        if let Some(closed) = closed.as_mut() {
            let _ = tokio::time::timeout(CLOSE_WAIT, closed.wait_for(|c| *c)).await;
        }
        Ok(json!({}))
    }

    /// Drops the connection and its subscriptions; returns the closed flag to wait on.
    async fn drop_connection(&mut self) -> Option<watch::Receiver<bool>> {
        for (_, sub) in self.subs.drain() {
            sub.task.abort();
            let _ = sub.task.await;
        }
        self.conn.take().map(|conn| conn.closed)
    }

    fn is_closed(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| *c.closed.borrow())
    }
}

/// Subject::validated is the crate's one public subject check. It is the check subscribe applies;
/// publish applies a weaker, crate-private one (empty / whitespace only), so `publish` is
/// unsupported rather than answered with the wrong rule.
fn validate_subject(req: &Value) -> Outcome {
    let subject = arg_str(req, "subject")?;
    match arg_str(req, "use")? {
        "subscribe" => Ok(json!({"valid": Subject::validated(subject).is_ok()})),
        "publish" => Err(fail(
            "unsupported",
            "async-nats's publish-subject check (is_valid_publish_subject) is crate-private; its \
             public Subject::validated is the subscribe rule",
        )),
        other => Err(fail("invalid", format!("unknown use `{other}`"))),
    }
}

/// One operation through the crate's HeaderMap, built from the pairs with append.
fn headers_op(req: &Value) -> Outcome {
    let mut map = headers_arg(req)?.ok_or_else(|| fail("invalid", "headers_op needs headers"))?;
    match arg_str(req, "case")? {
        "sensitive" => {}
        "insensitive" => {
            return Err(fail(
                "unsupported",
                "async-nats's HeaderMap matches names exactly only",
            ))
        }
        other => return Err(fail("invalid", format!("unknown case `{other}`"))),
    }
    let key = HeaderName::from_str(arg_str(req, "key")?).map_err(|e| fail("refused", e))?;
    let value = opt_str(req, "value")?.unwrap_or("");
    match arg_str(req, "op")? {
        "get" => Ok(json!({"value": map.get(key).map(HeaderValue::as_str)})),
        "values" => Ok(json!({
            "values": map.get_all(key).map(HeaderValue::as_str).collect::<Vec<_>>()
        })),
        op @ ("set" | "append") => {
            let value = HeaderValue::from_str(value).map_err(|e| fail("refused", e))?;
            if op == "set" {
                map.insert(key, value);
            } else {
                map.append(key, value);
            }
            Ok(json!({"headers": headers_json(&map)}))
        }
        "delete" => Err(fail("unsupported", "async-nats's HeaderMap has no remove")),
        other => Err(fail("invalid", format!("unknown op `{other}`"))),
    }
}

fn respond(out: &Out, id: Value, outcome: Outcome) {
    out.line(&match outcome {
        Ok(result) => json!({"id": id, "ok": true, "result": result}),
        Err(f) => json!({"id": id, "ok": false, "error": {"type": f.kind, "message": f.message}}),
    });
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let out = Out(Arc::new(Mutex::new(std::io::stdout())));
    let mut driver = Driver {
        out: out.clone(),
        conn: None,
        subs: HashMap::new(),
        next_sub: 0,
        generation: Arc::new(AtomicU64::new(0)),
    };
    let mut input = BufReader::new(tokio::io::stdin());
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(_) => {}
            Err(err) => {
                eprintln!("stdin: {err}");
                break;
            }
        }
        let request: Value = match std::str::from_utf8(&line)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                if text.trim().is_empty() {
                    Ok(Value::Null)
                } else {
                    serde_json::from_str(text).map_err(|e| e.to_string())
                }
            }) {
            Ok(Value::Null) => continue,
            Ok(v) => v,
            Err(message) => {
                respond(&out, Value::Null, Err(fail("invalid", message)));
                continue;
            }
        };
        let (id, cmd) = match (
            request.get("id").filter(|id| id.is_i64() || id.is_u64()),
            request.get("cmd").and_then(Value::as_str),
        ) {
            (Some(id), Some(cmd)) => (id.clone(), cmd.to_owned()),
            (id, _) => {
                let message = "a request needs an integer `id` and a string `cmd`";
                respond(
                    &out,
                    id.cloned().unwrap_or(Value::Null),
                    Err(fail("invalid", message)),
                );
                continue;
            }
        };
        let outcome = driver.dispatch(&cmd, &request).await;
        respond(&out, id, outcome);
        if cmd == "exit" {
            break;
        }
    }
    std::process::exit(0);
}
