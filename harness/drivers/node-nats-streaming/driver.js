// node-nats-streaming driver: nats-conformance-stan-driver/1 on stdin/stdout (see
// ../README.md, "NATS Streaming drivers", and schemas/stan-driver-protocol.schema.json). Logs go to stderr.
'use strict';
const readline = require('readline');
const stan = require('node-nats-streaming');

const PROTOCOL = 'nats-conformance-stan-driver/1';
const VERSION = require('node-nats-streaming/package.json').version;
const CAPABILITIES = ['queue_group', 'durable_name', 'manual_ack', 'ack_wait', 'max_in_flight',
  'start_sequence', 'start_time_delta', 'start_last_received', 'start_first', 'start_new_only'];

let sc = null;
const subs = new Map(); // handle -> {sub, pending: Map(sequence -> msg)}
let nextSub = 1;

const write = (obj) => process.stdout.write(JSON.stringify(obj) + '\n');
class Failure extends Error {
  constructor(type, message) { super(message); this.type = type; }
}
// Bounds a library callback: a promise that fails with `timeout` after ms.
function within(ms, what, start) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Failure('timeout', `${what}: no answer in ${ms} ms`)), ms);
    start((err, value) => {
      clearTimeout(timer);
      if (err) reject(err instanceof Failure ? err : new Failure('protocol', String(err)));
      else resolve(value);
    });
  });
}
function connected() {
  if (!sc) throw new Failure('connection', 'not connected');
  return sc;
}
function handle(name) {
  const entry = subs.get(name);
  if (!entry) throw new Failure('invalid', `no subscription ${name}`);
  return entry;
}

function options(req) {
  const o = connected().subscriptionOptions().setManualAckMode(req.manual_ack);
  if (req.ack_wait_s !== null) o.setAckWait(req.ack_wait_s * 1000);
  if (req.max_in_flight !== null) o.setMaxInFlight(req.max_in_flight);
  if (req.durable_name !== null) o.setDurableName(req.durable_name);
  const start = req.start;
  switch (start.position) {
    case 'NewOnly': break;
    case 'LastReceived': o.setStartWithLastReceived(); break;
    case 'First': o.setDeliverAllAvailable(); break;
    case 'SequenceStart': o.setStartAtSequence(start.sequence); break;
    case 'TimeDeltaStart': o.setStartAtTimeDelta(start.time_delta_ms); break;
    default: throw new Failure('invalid', `unknown start position ${start.position}`);
  }
  return o;
}

const commands = {
  hello: async () => ({ protocol: PROTOCOL, library: 'node-nats-streaming', version: VERSION,
    language: `Node.js ${process.versions.node}`, capabilities: CAPABILITIES }),
  connect: async (req) => {
    const conn = stan.connect(req.cluster_id, req.client_id,
      { url: req.url, connectTimeout: req.timeout_ms, maxReconnectAttempts: 0, reconnect: false });
    await within(req.timeout_ms + 1000, 'connect', (done) => {
      conn.once('connect', () => done(null));
      conn.once('error', (err) => done(new Failure('connection', String(err))));
    });
    conn.on('error', (err) => write({ event: 'error', type: 'connection', message: String(err) }));
    conn.on('close', () => write({ event: 'closed' }));
    sc = conn;
    return {};
  },
  publish: async (req) => {
    const data = Buffer.from(req.data_b64, 'base64');
    const guid = await within(req.timeout_ms, 'publish', (done) =>
      connected().publish(req.subject, data, (err, guid) => done(err, guid)));
    return { guid };
  },
  subscribe: async (req) => {
    const opts = options(req);
    const sub = req.queue === null
      ? connected().subscribe(req.subject, opts)
      : connected().subscribe(req.subject, req.queue, opts);
    const name = String(nextSub++);
    const entry = { sub, pending: new Map() };
    sub.on('message', (msg) => {
      entry.pending.set(msg.getSequence(), msg);
      write({ event: 'message', sub: name, sequence: msg.getSequence(), subject: msg.getSubject(),
        data_b64: msg.getRawData().toString('base64'), redelivered: msg.isRedelivered(),
        timestamp: msg.getTimestampRaw() });
    });
    await within(5000, 'subscribe', (done) => {
      sub.once('ready', () => done(null));
      sub.once('error', (err) => done(err));
    });
    subs.set(name, entry);
    return { sub: name };
  },
  ack: async (req) => {
    const entry = handle(req.sub);
    const msg = entry.pending.get(req.sequence);
    if (!msg) throw new Failure('invalid', `no message ${req.sequence} on subscription ${req.sub}`);
    msg.ack();
    return {};
  },
  unsubscribe: async (req) => {
    const { sub } = handle(req.sub);
    await within(5000, 'unsubscribe', (done) => {
      sub.once('unsubscribed', () => done(null));
      sub.once('error', (err) => done(err));
      sub.unsubscribe();
    });
    subs.delete(req.sub);
    return {};
  },
  close: async () => {
    const conn = connected();
    sc = null; // closed either way: the library hands a CloseResponse's error to 'close'
    await within(5000, 'close', (done) => {
      conn.once('close', (err) => done(err ? new Failure('protocol', String(err)) : null));
      conn.close();
    });
    return {};
  },
  exit: async () => ({}),
};

async function main() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    let req;
    try {
      req = JSON.parse(line);
    } catch (err) {
      write({ id: null, ok: false, error: { type: 'invalid', message: `not JSON: ${err}` } });
      continue;
    }
    const command = commands[req.cmd];
    if (!command) {
      write({ id: req.id, ok: false, error: { type: 'unsupported', message: `unknown command ${req.cmd}` } });
      continue;
    }
    try {
      write({ id: req.id, ok: true, result: await command(req) });
    } catch (err) {
      const type = err instanceof Failure ? err.type : 'other';
      write({ id: req.id, ok: false, error: { type, message: String(err.message || err) } });
    }
    if (req.cmd === 'exit') break;
  }
  process.exit(0);
}

main();
