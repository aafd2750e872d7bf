#!/usr/bin/env node
// nats-conformance-driver/2 for the npm library ts-nats (1.x), kept outside the suite.
// JSON lines: requests on stdin, responses and events on stdout; logs go to stderr.
'use strict';
const readline = require('readline');
const nats = require('ts-nats');

const PROTOCOL = 'nats-conformance-driver/2';
// What ts-nats 1.x really has: no headers (no HPUB/HMSG), no no_responders, no subject or
// name checks of its own, no header parser or type, no JetStream. Its flush waits for PONG.
const CAPABILITIES = [
  'queue_groups', 'request', 'unsubscribe_max', 'drain',
  'verbose', 'pedantic', 'echo', 'user_password', 'token', 'flush_roundtrip',
];

function write(obj) { process.stdout.write(JSON.stringify(obj) + '\n'); }
function log(...a) { process.stderr.write(a.join(' ') + '\n'); }

class DriverError extends Error {
  constructor(type, message) { super(message); this.type = type; }
}
const unsupported = (m) => new DriverError('unsupported', m);
const invalid = (m) => new DriverError('invalid', m);

function errorType(err) {
  if (err instanceof DriverError) return err.type;
  const code = err && err.code;
  switch (code) {
    case 'BAD_SUBJECT': case 'BAD_REPLY': case 'BAD_JSON': case 'BAD_MSG':
    case 'INVALID_ENCODING': case 'API_ERROR': case 'SUB_CLOSED': case 'SUB_DRAINING':
      return 'refused';
    case 'CONN_CLOSED': case 'CONN_ERR': case 'CONN_DRAINING': case 'UNABLE_TO_CONNECT':
    case 'STALE CONNECTION': case 'SSL_ERR':
      return 'connection';
    case 'REQ_TIMEOUT': case 'CONN_TIMEOUT': case 'SUB_TIMEOUT':
      return 'timeout';
    case 'BAD_AUTHENTICATION': case 'AUTHORIZATION_VIOLATION': case 'NATS_PROTOCOL_ERR':
    case 'PERMISSIONS_VIOLATION':
      return 'protocol';
    default:
      return 'other';
  }
}

function b64(buf) { return Buffer.from(buf || []).toString('base64'); }
function unb64(s) {
  if (typeof s !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(s)) throw invalid('payload_b64 is not base64');
  return Buffer.from(s, 'base64');
}
function need(req, key, type) {
  if (!(key in req)) throw invalid(`missing argument ${key}`);
  const v = req[key];
  if (type === 'string?' ? !(v === null || typeof v === 'string') : typeof v !== type) {
    throw invalid(`argument ${key} must be ${type}`);
  }
  return v;
}

let nc = null;          // the connection connect opened
let subs = new Map();   // handle -> ts-nats Subscription
let nextSub = 1;

function messageFields(m) {
  return {
    subject: m.subject,
    reply: m.reply ? m.reply : null,
    headers: null,           // ts-nats has no headers
    status: null,
    description: null,
    payload_b64: b64(m.data),
  };
}

function handshake(c, timeoutMs) {
  return new Promise((resolve, reject) => {
    const done = (err) => {
      clearTimeout(timer);
      c.removeListener('connect', onConnect);
      c.removeListener('close', onClose);
      c.removeListener('error', onError);
      if (err) { try { c.close(); } catch (e) { /* closed */ } reject(err); } else resolve();
    };
    const onConnect = () => done();
    const onClose = () => done(new DriverError('connection', 'connection closed during the handshake'));
    const onError = (err) => done(err);
    const timer = setTimeout(() => done(new DriverError('timeout', 'no handshake in time')),
      Math.max(1, timeoutMs || 5000));
    c.on('connect', onConnect);
    c.on('close', onClose);
    c.on('error', onError);
  });
}

function requireConnection() {
  if (!nc || nc.isClosed()) throw new DriverError('connection', 'not connected');
  return nc;
}

const commands = {
  async hello() {
    return {
      protocol: PROTOCOL,
      library: 'ts-nats',
      version: nats.VERSION,
      language: `Node.js ${process.version}`,
      capabilities: CAPABILITIES,
    };
  },

  async connect(req) {
    const url = need(req, 'url', 'string');
    const o = need(req, 'options', 'object') || {};
    if (o.headers) throw unsupported('ts-nats has no headers');
    if (o.no_responders) throw unsupported('ts-nats has no no_responders option');
    if (nc && !nc.isClosed()) nc.close();
    subs = new Map();
    const opts = { url, payload: nats.Payload.BINARY, reconnect: !!o.reconnect,
      maxReconnectAttempts: o.reconnect ? 10 : 0 };
    if (o.name !== undefined) opts.name = o.name;
    if (o.verbose !== undefined) opts.verbose = o.verbose;
    if (o.pedantic !== undefined) opts.pedantic = o.pedantic;
    if (o.echo === false) opts.noEcho = true;
    if (o.user !== undefined) opts.user = o.user;
    if (o.pass !== undefined) opts.pass = o.pass;
    if (o.token !== undefined) opts.token = o.token;
    if (o.timeout_ms !== undefined) opts.timeout = Math.max(1, o.timeout_ms);
    const c = await nats.connect(opts);
    // ts-nats resolves connect() when the socket opens, before INFO/CONNECT/PING/PONG; a SUB
    // made before the handshake ends is sent twice (once pending, once by sendSubscriptions).
    // Answer when the library reports 'connect' (the server's PONG came back), as it documents.
    await handshake(c, o.timeout_ms);
    c.on('error', (err) => write({ event: 'error', type: errorType(err), message: String(err && err.message) }));
    c.on('permissionError', (err) => write({ event: 'error', type: 'protocol', message: String(err && err.message) }));
    c.on('close', () => { if (c === nc) write({ event: 'closed' }); });
    nc = c;
    return {};
  },

  async publish(req) {
    const subject = need(req, 'subject', 'string');
    const reply = need(req, 'reply', 'string?');
    if (req.headers !== null && req.headers !== undefined) throw unsupported('ts-nats has no headers');
    const data = unb64(req.payload_b64);
    requireConnection().publish(subject, data, reply === null ? undefined : reply);
    return {};
  },

  async subscribe(req) {
    const subject = need(req, 'subject', 'string');
    const queue = need(req, 'queue', 'string?');
    const c = requireConnection();
    const handle = String(nextSub++);
    const opts = queue === null ? {} : { queue };
    const sub = await c.subscribe(subject, (err, m) => {
      if (err) { write({ event: 'error', type: errorType(err), message: String(err.message) }); return; }
      write({ event: 'message', sub: handle, ...messageFields(m) });
    }, opts);
    subs.set(handle, sub);
    return { sub: handle };
  },

  async unsubscribe(req) {
    const handle = need(req, 'sub', 'string');
    const max = req.max;
    if (max !== null && (typeof max !== 'number' || max < 0)) throw invalid('max must be null or >= 0');
    const sub = subs.get(handle);
    if (!sub) throw invalid(`no subscription ${handle}`);
    requireConnection();
    if (max === null) sub.unsubscribe(); else sub.unsubscribe(max);
    return {};
  },

  async request(req) {
    const subject = need(req, 'subject', 'string');
    if (req.headers !== null && req.headers !== undefined) throw unsupported('ts-nats has no headers');
    const data = unb64(req.payload_b64);
    const timeout = need(req, 'timeout_ms', 'number');
    const c = requireConnection();
    // ts-nats 1.x drops a pending request without settling it when the connection closes
    // (its close clears the request's timer): race it with the close and a timer of our own.
    let timer;
    let onClose;
    try {
      const m = await Promise.race([
        c.request(subject, Math.max(1, timeout), data),
        new Promise((_, rej) => {
          onClose = () => rej(new DriverError('connection', 'connection closed during the request'));
          c.once('close', onClose);
        }),
        new Promise((_, rej) => {
          timer = setTimeout(() => rej(new DriverError('timeout', 'request timed out')), Math.max(1, timeout) + 250);
        }),
      ]);
      return { message: messageFields(m) };
    } finally {
      clearTimeout(timer);
      c.removeListener('close', onClose);
    }
  },

  async flush(req) {
    const timeout = need(req, 'timeout_ms', 'number');
    const c = requireConnection();
    let timer;
    let onClose;
    try {
      await Promise.race([
        c.flush(),
        new Promise((_, rej) => {
          onClose = () => rej(new DriverError('connection', 'connection closed during the flush'));
          c.once('close', onClose);
        }),
        new Promise((_, rej) => { timer = setTimeout(() => rej(new DriverError('timeout', 'flush timed out')), Math.max(1, timeout)); }),
      ]);
    } finally { clearTimeout(timer); c.removeListener('close', onClose); }
    return {};
  },

  async close(req) {
    const drain = need(req, 'drain', 'boolean');
    if (!nc || nc.isClosed()) return {};
    if (drain) await nc.drain(); else nc.close();
    return {};
  },

  async exit() { return {}; },
};

async function handle(line) {
  let req;
  try { req = JSON.parse(line); } catch (e) { req = null; }
  if (!req || typeof req !== 'object' || Array.isArray(req) || !Number.isInteger(req.id) || req.id < 0 || typeof req.cmd !== 'string') {
    write({ id: null, ok: false, error: { type: 'invalid', message: 'not a request' } });
    return false;
  }
  const fn = Object.prototype.hasOwnProperty.call(commands, req.cmd) ? commands[req.cmd] : null;
  if (!fn) {
    write({ id: req.id, ok: false, error: { type: 'unsupported', message: `ts-nats driver has no command ${req.cmd}` } });
    return false;
  }
  try {
    const result = await fn(req);
    write({ id: req.id, ok: true, result });
  } catch (err) {
    write({ id: req.id, ok: false, error: { type: errorType(err), message: String((err && err.message) || err) } });
  }
  return req.cmd === 'exit';
}

function shutdown() {
  try { if (nc && !nc.isClosed()) nc.close(); } catch (e) { /* gone */ }
  process.exit(0);
}

process.on('uncaughtException', (err) => {
  log('uncaught:', err && err.stack);
  write({ event: 'error', type: 'other', message: String((err && err.message) || err) });
});
process.on('unhandledRejection', (err) => log('unhandled rejection:', err && err.stack));

const rl = readline.createInterface({ input: process.stdin, terminal: false });
let queue = Promise.resolve();
rl.on('line', (line) => {
  queue = queue.then(async () => { if (await handle(line)) shutdown(); });
});
rl.on('close', () => { queue.then(shutdown); });
