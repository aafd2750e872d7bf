// The NATS Streaming scenario the suite runs with node-nats-streaming: one JSON line per step
// on stdout, {"step": ..., "ok": bool, ...}. Arguments: URL CLUSTER_ID CLIENT_ID.
'use strict';
const stan = require('node-nats-streaming');

const [url, clusterId, clientId] = process.argv.slice(2);
const report = (step, fields) => process.stdout.write(JSON.stringify({ step, ...fields }) + '\n');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const version = require('node-nats-streaming/package.json').version;

function publish(sc, subject, data) {
  return new Promise((resolve) => {
    sc.publish(subject, data, (err, guid) => resolve({ guid, error: err ? String(err) : null }));
  });
}

async function collect(sc, name, configure) {
  const opts = configure(sc.subscriptionOptions().setManualAckMode(true).setAckWait(30000));
  const sub = sc.subscribe('orders', opts);
  const got = [];
  sub.on('message', (msg) => {
    got.push({ sequence: msg.getSequence(), data: msg.getData().toString(), redelivered: msg.isRedelivered() });
    msg.ack();
  });
  sub.on('error', (err) => report(`start-position.${name}`, { ok: false, error: String(err) }));
  await sleep(400);
  await new Promise((resolve) => {
    sub.on('unsubscribed', resolve);
    sub.on('error', resolve);
    sub.unsubscribe();
  });
  report(`start-position.${name}`, { ok: true, messages: got });
}

async function main() {
  report('hello', { ok: true, library: 'node-nats-streaming', version });
  const sc = stan.connect(clusterId, clientId, { url, connectTimeout: 3000, maxReconnectAttempts: 0 });
  sc.on('error', (err) => report('error', { ok: false, error: String(err) }));
  await new Promise((resolve, reject) => {
    sc.on('connect', resolve);
    sc.on('error', reject);
  });
  report('connect', { ok: true });
  const acks = [await publish(sc, 'orders', 'm1')];
  await sleep(1200); // so a time delta can tell m1 from m2 and m3
  acks.push(await publish(sc, 'orders', 'm2'), await publish(sc, 'orders', 'm3'));
  report('publish', { ok: acks.every((a) => !a.error), acks });
  // time-delta first: its one-second window must still hold m2 and m3 but not m1
  await collect(sc, 'time-delta', (o) => o.setStartAtTimeDelta(1000));
  await collect(sc, 'new-only', (o) => o);
  await collect(sc, 'last-received', (o) => o.setStartWithLastReceived());
  await collect(sc, 'sequence', (o) => o.setStartAtSequence(2));
  await collect(sc, 'first', (o) => o.setDeliverAllAvailable());
  await new Promise((resolve) => {
    sc.on('close', resolve);
    sc.close();
  });
  report('close', { ok: true });
}

main().then(
  () => process.exit(0),
  (err) => {
    report('failed', { ok: false, error: String(err) });
    process.exit(1);
  },
);
