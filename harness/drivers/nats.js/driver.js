"use strict";
// nats-conformance-driver/2 for npm `nats` (the nats.js v2 line).
// The package has no "exports" map, so its internal modules are reachable by path.
const nats = require("nats");
const { runDriver } = require("./driver-core");

const JS_TIMEOUT_MS = 5000; // how long a JetStream API request may take
// An internal module: under lib/jetstream/ since 2.18, lib/nats-base-client/ before; {} when the
// release has none (no kv before 2.2.0, no object store before 2.8.0), so what it lacks is not
// declared.
function internal(name) {
  for (const dir of ["jetstream", "nats-base-client"]) {
    try {
      return require(`nats/lib/${dir}/${name}`);
    } catch (err) {
      if (err.code !== "MODULE_NOT_FOUND") {
        throw err;
      }
    }
  }
  return {};
}
const jsutil = internal("jsutil");
const kv = internal("kv");
const objectStore = internal("objectstore");
// js.views (2.3.0), through which the driver creates buckets: 2.2.0 has kv's Bucket but no views.
const { JetStreamClientImpl } = internal("jsclient");
const views = Boolean(JetStreamClientImpl && "views" in JetStreamClientImpl.prototype);
// The node transport's TLS-first handshake (2.22.0 has it, 2.18.0 not): its tlsFirst method.
const { NodeTransport } = require("nats/lib/src/node_transport");

// NatsError codes (nats.ErrorCode) by protocol error type: the ones the library raises in its
// own checks, before writing anything, are `refused`.
const KIND_BY_CODE = new Map(Object.entries({
  TIMEOUT: "timeout",
  503: "no_responders",
  CONNECTION_CLOSED: "connection",
  CONNECTION_DRAINING: "connection",
  CONNECTION_REFUSED: "connection",
  CONNECTION_TIMEOUT: "connection",
  DISCONNECT: "connection",
  BAD_AUTHENTICATION: "refused",
  BAD_CREDS: "refused",
  BAD_HEADER: "refused",
  BAD_JSON: "refused",
  BAD_PAYLOAD: "refused",
  BAD_SUBJECT: "refused",
  INVALID_OPTION: "refused",
  INVALID_PAYLOAD: "refused",
  MAX_PAYLOAD_EXCEEDED: "refused",
  SERVER_OPT_NA: "refused",
  ACCOUNT_EXPIRED: "protocol",
  AUTHENTICATION_EXPIRED: "protocol",
  AUTHENTICATION_TIMEOUT: "protocol",
  AUTHORIZATION_VIOLATION: "protocol",
  NATS_PROTOCOL_ERR: "protocol",
  PERMISSIONS_VIOLATION: "protocol",
}));

runDriver({
  library: "nats",
  version: require("nats/package.json").version,
  connect: nats.connect,
  headers: () => nats.headers(),
  decodeHeaders: (bytes) => nats.MsgHdrsImpl.decode(bytes),
  errorKind: (err) => (err instanceof nats.NatsError ? KIND_BY_CODE.get(err.code) || null : null),
  // v2 reports a server -ERR on nc.status() by its code alone (no text), plus the operation
  // and subject of a permissions violation.
  statusEvent(status) {
    if (status.type !== nats.Events.Error) {
      return null;
    }
    const context = status.permissionContext;
    return {
      type: KIND_BY_CODE.get(status.data) || "other",
      message: context ? `${status.data}: ${context.operation} ${JSON.stringify(context.subject)}` : String(status.data),
    };
  },
  // Match (2.1.0): 2.0.0's MsgHdrs has only a `mime` flag.
  match: nats.Match ? { sensitive: nats.Match.Exact, insensitive: nats.Match.IgnoreCase } : null,
  tlsFirst: typeof NodeTransport.prototype.tlsFirst === "function",
  // The v2 line's node transport has no WebSocket (that is the separate nats.ws package).
  wsconnect: null,
  // nc.jetstreamManager() and nc.jetstream() (2.0.0), and its views js.views.kv (2.3.0) and
  // js.views.os (2.8.0, with the object store) where the release has them.
  capabilities: [
    "jetstream",
    ...(views && kv.Bucket ? ["kv"] : []),
    ...(views && objectStore.ObjectStoreImpl ? ["object_store"] : []),
  ],
  // jetstream_create/delete: nc.jetstreamManager(), and the views, which create a bucket unless
  // bindOnly; the server's API error is the NatsError's api_error.
  jetstream: {
    manager: (nc) => nc.jetstreamManager({ timeout: JS_TIMEOUT_MS }),
    kv: (nc, name) => nc.jetstream({ timeout: JS_TIMEOUT_MS }).views.kv(name),
    openKv: (nc, name) => nc.jetstream({ timeout: JS_TIMEOUT_MS }).views.kv(name, { bindOnly: true }),
    os: (nc, name) => nc.jetstream({ timeout: JS_TIMEOUT_MS }).views.os(name),
    openOs: (nc, name) => nc.jetstream({ timeout: JS_TIMEOUT_MS }).views.os(name, { bindOnly: true }),
    apiError: (err) => (err instanceof nats.NatsError && err.api_error) || null,
  },
  // The checks the library applies before it talks to the server (those the release exports).
  names: Object.fromEntries(Object.entries({
    "stream-name": jsutil.validateStreamName,
    "durable-name": jsutil.validateDurableName,
    "consumer-name": jsutil.minValidation && ((name) => jsutil.minValidation("name", name)),
    "kv-bucket-name": kv.validateBucket,
    "kv-key-name": kv.validateKey,
    "os-bucket-name": objectStore.ObjectStoreImpl && kv.validateBucket,
  }).filter(([, check]) => typeof check === "function")),
});
