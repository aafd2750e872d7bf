"use strict";
// nats-conformance-driver/2 for `@nats-io/transport-node` (the nats.js v3 line). The name
// checks live in the line's sibling packages (@nats-io/jetstream, kv, obj), kept at their
// pinned version whatever LIBRARY_VERSION says. The build copies the shared loop
// (../nats.js/driver-core.js) beside this file.
const path = require("node:path");
const nats = require("@nats-io/transport-node");
const { runDriver } = require("./driver-core");
const jetstream = require("@nats-io/jetstream");
const { Kvm } = require("@nats-io/kv");
const { Objm } = require("@nats-io/obj");

const JS_TIMEOUT_MS = 5000; // how long a JetStream API request may take

// A module of a package by file name: the v3 packages' "exports" maps hide the modules the
// name checks are in, so they are loaded by path, next to the package's main module.
function internal(pkg, file) {
  return require(path.join(path.dirname(require.resolve(pkg)), file));
}

const jsutil = internal("@nats-io/jetstream", "jsutil.js");
const kv = internal("@nats-io/kv", "kv.js");
const objectstore = internal("@nats-io/obj", "objectstore.js");
// The node transport's TLS-first handshake: its tlsFirst method.
const { NodeTransport } = internal("@nats-io/transport-node", "lib/node_transport.js");

// Error classes by protocol error type; RequestError is classified by its cause. The library
// raises the Invalid* ones in its own checks, before writing anything: `refused`.
const { errors } = nats;
const KIND_BY_CLASS = [
  [errors.TimeoutError, "timeout"],
  [errors.NoRespondersError, "no_responders"],
  [errors.ClosedConnectionError, "connection"],
  [errors.ConnectionError, "connection"],
  [errors.DrainingConnectionError, "connection"],
  [errors.InvalidArgumentError, "refused"],
  [errors.InvalidOperationError, "refused"],
  [errors.InvalidSubjectError, "refused"],
  [errors.AuthorizationError, "protocol"],
  [errors.PermissionViolationError, "protocol"],
  [errors.ProtocolError, "protocol"],
  [errors.UserAuthenticationExpiredError, "protocol"],
];

runDriver({
  library: "@nats-io/transport-node",
  version: require("@nats-io/transport-node/package.json").version,
  connect: nats.connect,
  headers: () => nats.headers(),
  decodeHeaders: (bytes) => nats.MsgHdrsImpl.decode(bytes),
  errorKind: (err) => (KIND_BY_CLASS.find(([cls]) => err instanceof cls) || [null, null])[1],
  statusEvent(status, classify) {
    switch (status.type) {
      case "error":
        return { type: classify(status.error), message: status.error.message };
      case "slowConsumer":
        return { type: "other", message: `slow consumer: ${status.sub.getSubject()} (${status.pending} pending)` };
      default:
        return null;
    }
  },
  match: { sensitive: nats.Match.Exact, insensitive: nats.Match.IgnoreCase },
  tlsFirst: typeof NodeTransport.prototype.tlsFirst === "function",
  // wsconnect (re-exported from @nats-io/nats-core) over the platform's global WebSocket, where
  // Node.js has one (20.x: with --experimental-websocket, which the run script passes).
  wsconnect: typeof nats.wsconnect === "function" && typeof globalThis.WebSocket === "function" ? nats.wsconnect : null,
  // From the line's sibling packages the driver loads: @nats-io/jetstream, kv and obj.
  capabilities: ["jetstream", "kv", "object_store"],
  // jetstream_create/delete: jetstreamManager, Kvm and Objm; the server's API error is a
  // JetStreamApiError.
  jetstream: {
    manager: (nc) => jetstream.jetstreamManager(nc, { timeout: JS_TIMEOUT_MS }),
    kv: (nc, name) => new Kvm(nc, { timeout: JS_TIMEOUT_MS }).create(name),
    openKv: (nc, name) => new Kvm(nc, { timeout: JS_TIMEOUT_MS }).open(name),
    os: (nc, name) => new Objm(nc, { timeout: JS_TIMEOUT_MS }).create(name),
    openOs: (nc, name) => new Objm(nc, { timeout: JS_TIMEOUT_MS }).open(name),
    apiError: (err) => (err instanceof jetstream.JetStreamApiError ? err.apiError() : null),
  },
  // The checks the library applies before it talks to the server.
  names: {
    "stream-name": jsutil.validateStreamName,
    "durable-name": jsutil.validateDurableName,
    "consumer-name": (name) => jsutil.minValidation("name", name),
    "kv-bucket-name": kv.validateBucket,
    "kv-key-name": kv.validateKey,
    "os-bucket-name": objectstore.validateBucket,
  },
});
