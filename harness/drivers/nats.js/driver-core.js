"use strict";
// nats-conformance-driver/2 for the nats.js family: the JSON-lines loop and every command.
// The library's own checks before anything is written (a bad subject, header or option)
// answer `refused` (each driver.js maps the library's errors); `invalid` is only for a
// malformed request. headers_op goes through MsgHdrs get/values/set/delete/append with the
// library's Match: `sensitive` is Match.Exact (keys kept as given), `insensitive`
// Match.IgnoreCase.
// Both nats.js lines (npm `nats` 2.x and `@nats-io/transport-node` 3.x) share this file;
// each driver.js injects what differs between them (see runDriver's `lib` argument).
const readline = require("node:readline");

// stdout carries the protocol only: the library's own console output (it logs a parse error
// with console.log when its reader stops) goes to stderr with the driver's log.
console.log = console.info = console.debug = console.error;

const PROTOCOL = "nats-conformance-driver/2";
// What every release of both lines supports through this driver: the connect options below,
// MsgHdrs with its parser and encoder, flush(), which sends PING and resolves on the PONG, and
// TLS after INFO with the node transport's `tls: {caFile}`.
// headers_op and validate_name are declared where the loaded release has their API (lib.match,
// lib.names); each driver.js adds what only its line or release has (lib.capabilities).
const CAPABILITIES = [
  "headers", "no_responders", "queue_groups", "request", "unsubscribe_max", "drain",
  "verbose", "pedantic", "echo", "user_password", "token",
  "decode_headers", "encode_headers", "flush_roundtrip", "tls",
];
// The capability each jetstream_create/delete kind needs.
const JETSTREAM_KINDS = {
  stream: "jetstream", consumer: "jetstream", durable: "jetstream", kv: "kv", object_store: "object_store",
};
// The connect options of the protocol; anything else is refused rather than ignored.
const CONNECT_OPTIONS = new Set([
  "name", "verbose", "pedantic", "echo", "headers", "no_responders",
  "user", "pass", "token", "timeout_ms", "reconnect", "tls_ca_file", "tls_first", "ws_compression",
]);

// An error the driver itself raises (bad arguments, no connection), as opposed to the library's.
class DriverError extends Error {
  constructor(type, message) {
    super(message);
    this.type = type;
  }
}

function write(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function emitError(type, message) {
  write({ event: "error", type, message });
}

function toBase64(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");
}

// A private copy: Buffer.from may hand out a slice of a shared pool.
function fromBase64(text) {
  return new Uint8Array(Buffer.from(text, "base64"));
}

function arg(req, name, type, optional = false) {
  const value = req[name];
  if ((value === undefined || value === null) && optional) {
    return null;
  }
  if (typeof value !== type) {
    throw new DriverError("invalid", `argument '${name}' must be a ${type}`);
  }
  return value;
}

// Headers as the library's MsgHdrs presents them: keys in its iteration order, each key's
// values in order. The libraries use code 0 / description "" for "no status line".
function headerView(h) {
  if (!h) {
    return { status: null, description: null, headers: null };
  }
  const headers = [];
  for (const [key, values] of h) {
    for (const value of values) {
      headers.push([key, value]);
    }
  }
  return {
    status: h.code > 0 ? h.code : null,
    description: h.description !== "" ? h.description : null,
    headers,
  };
}

function messageView(msg) {
  const view = headerView(msg.headers);
  return {
    subject: msg.subject,
    reply: msg.reply ? msg.reply : null,
    headers: view.headers,
    status: view.status,
    description: view.description,
    payload_b64: toBase64(msg.data),
  };
}

function withTimeout(promise, ms, what) {
  let timer;
  const expired = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new DriverError("timeout", `${what} timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, expired]).finally(() => clearTimeout(timer));
}

/**
 * Run the driver loop until `exit` or EOF.
 *
 * lib: {
 *   library, version: package name and the version actually loaded,
 *   connect(opts): the library's connect,
 *   headers(): a new empty MsgHdrs, decodeHeaders(bytes): the library's header parser,
 *   errorKind(err): a protocol error type for one error object, or null if it cannot tell,
 *   statusEvent(status, classify): {type, message} for an nc.status() entry worth reporting,
 *     else null (classify(err) gives the protocol error type of a library error),
 *   names: {production: validator that throws on an invalid name} (those the release has),
 *   match: {sensitive, insensitive}: the library's Match values for headers_op, or null when
 *     the release has no Match (its MsgHdrs then matches one way only: not declared),
 *   capabilities: what the line has beyond CAPABILITIES (e.g. jetstream),
 *   tlsFirst: whether the release's node transport has the TLS-first handshake
 *     (`tls: {handshakeFirst}`; an older release ignores the field, so it is never passed there),
 *   wsconnect: the line's WebSocket connect over the platform's WebSocket, or null,
 * }
 */
function runDriver(lib) {
  let nc = null;
  let nextSub = 1;
  const subs = new Map();
  const capabilities = [
    ...CAPABILITIES,
    ...(lib.match ? ["headers_op"] : []),
    ...(Object.keys(lib.names).length > 0 ? ["validate_name"] : []),
    ...lib.capabilities,
    ...(lib.tlsFirst ? ["tls_first"] : []),
    ...(lib.wsconnect ? ["websocket", "websocket_compression"] : []),
  ];

  // jetstream_create/delete of a kind whose API the release lacks answers unsupported: the
  // driver never calls a missing API (its TypeError would read as the library's refusal).
  function needKind(kind) {
    const needed = JETSTREAM_KINDS[kind];
    if (needed !== undefined && !capabilities.includes(needed)) {
      throw new DriverError("unsupported", `${lib.library} ${lib.version} has no ${needed} API`);
    }
  }

  // The error type for err: the first of err and its causes the library lets us classify.
  function classify(err) {
    if (err instanceof DriverError) {
      return err.type;
    }
    for (let e = err; e; e = e.cause) {
      const kind = lib.errorKind(e);
      if (kind) {
        return kind;
      }
    }
    return "other";
  }

  function makeHeaders(pairs) {
    if (pairs === null || pairs === undefined) {
      return undefined;
    }
    if (!Array.isArray(pairs)) {
      throw new DriverError("invalid", "argument 'headers' must be a list of [name, value] pairs");
    }
    const h = lib.headers();
    for (const pair of pairs) {
      if (!Array.isArray(pair) || pair.length !== 2 || !pair.every((s) => typeof s === "string")) {
        throw new DriverError("invalid", "argument 'headers' must be a list of [name, value] string pairs");
      }
      h.append(pair[0], pair[1]);
    }
    return h;
  }

  function connection() {
    if (!nc) {
      throw new DriverError("connection", "not connected");
    }
    return nc;
  }

  // The library's connect for the URL's transport, and the options that make it: the node
  // transport for nats:// and tls:// (TLS required, verified against tls_ca_file, TLS first
  // where asked), wsconnect for ws:// and wss://. Both lines take any scheme in `servers` and
  // strip it, so the scheme is never left to decide.
  function transport(url, options, opts) {
    const websocket = /^wss?:\/\//.test(url);
    if (!websocket) {
      if (options.ws_compression === true) {
        throw new DriverError("unsupported", "ws_compression asks for a WebSocket URL");
      }
      if (options.tls_first === true && !lib.tlsFirst) {
        throw new DriverError("unsupported", `${lib.library} ${lib.version} has no TLS-first handshake`);
      }
      if (url.startsWith("tls://") || options.tls_ca_file || options.tls_first === true) {
        opts.tls = {};
        if (options.tls_ca_file) {
          opts.tls.caFile = options.tls_ca_file;
        }
        if (options.tls_first === true) {
          opts.tls.handshakeFirst = true;
        }
      }
      return lib.connect;
    }
    if (!lib.wsconnect) {
      throw new DriverError("unsupported", `${lib.library} ${lib.version} has no WebSocket transport on Node.js`);
    }
    if (options.tls_first === true) {
      throw new DriverError("unsupported", `${lib.library} has no TLS-first handshake on a WebSocket`);
    }
    if (options.tls_ca_file) {
      // wsconnect refuses `tls` options, and the platform's WebSocket takes no CA file.
      throw new DriverError("unsupported", `${lib.library}'s wsconnect cannot verify a server against a CA file`);
    }
    if (options.ws_compression !== true) {
      // Node.js's WebSocket (undici) offers permessage-deflate on every connection.
      throw new DriverError("unsupported", "the platform's WebSocket always offers permessage-deflate");
    }
    return lib.wsconnect;
  }

  function connectOptions(url, options) {
    const opts = { servers: url, reconnect: options.reconnect === true };
    for (const key of Object.keys(options)) {
      if (!CONNECT_OPTIONS.has(key)) {
        throw new DriverError("unsupported", `connect option '${key}' is not supported`);
      }
    }
    // Both lines switch headers and no_responders on from the server's INFO; no option turns them off.
    for (const key of ["headers", "no_responders"]) {
      if (options[key] === false) {
        throw new DriverError("unsupported", `${lib.library} has no option to turn '${key}' off`);
      }
    }
    const direct = {
      name: "name", verbose: "verbose", pedantic: "pedantic",
      user: "user", pass: "pass", token: "token", timeout_ms: "timeout",
    };
    for (const [key, name] of Object.entries(direct)) {
      if (options[key] !== undefined && options[key] !== null) {
        opts[name] = options[key];
      }
    }
    if (options.echo === false) {
      opts.noEcho = true;
    }
    return opts;
  }

  async function watch(conn) {
    conn.closed().then((err) => {
      if (err) {
        emitError(classify(err), err.message);
      }
      write({ event: "closed" });
    });
    for await (const status of conn.status()) {
      process.stderr.write(`status: ${JSON.stringify(status, (k, v) => (k === "sub" ? undefined : v))}\n`);
      const event = lib.statusEvent(status, classify);
      if (event) {
        emitError(event.type, event.message);
      }
    }
  }

  const commands = {
    hello: () => ({
      protocol: PROTOCOL,
      library: lib.library,
      version: lib.version,
      language: `JavaScript (Node.js ${process.version})`,
      capabilities,
    }),

    async connect(req) {
      const url = arg(req, "url", "string");
      const options = arg(req, "options", "object", true) || {};
      const opts = connectOptions(url, options);
      const connect = transport(url, options, opts);
      if (nc && !nc.isClosed()) {
        await nc.close();
      }
      nc = null;
      subs.clear();
      try {
        nc = await connect(opts);
      } catch (err) {
        // The platform's own errors (a TLS certificate that does not verify, a socket error)
        // reach the driver unwrapped: failing to connect is a connection error.
        throw classify(err) === "other" ? new DriverError("connection", err.message) : err;
      }
      watch(nc).catch((err) => process.stderr.write(`status watch: ${err}\n`));
      return {};
    },

    publish(req) {
      const subject = arg(req, "subject", "string");
      const reply = arg(req, "reply", "string", true);
      const payload = fromBase64(arg(req, "payload_b64", "string"));
      const options = { headers: makeHeaders(req.headers) };
      if (reply !== null) {
        options.reply = reply;
      }
      connection().publish(subject, payload, options);
      return {};
    },

    subscribe(req) {
      const subject = arg(req, "subject", "string");
      const queue = arg(req, "queue", "string", true);
      const handle = `s${nextSub++}`;
      const opts = {
        callback: (err, msg) => {
          if (err) {
            emitError(classify(err), err.message);
          } else {
            write({ event: "message", sub: handle, ...messageView(msg) });
          }
        },
      };
      if (queue !== null) {
        opts.queue = queue;
      }
      subs.set(handle, connection().subscribe(subject, opts));
      return { sub: handle };
    },

    unsubscribe(req) {
      const handle = arg(req, "sub", "string");
      const max = arg(req, "max", "number", true);
      const sub = subs.get(handle);
      if (!sub) {
        throw new DriverError("invalid", `unknown subscription '${handle}'`);
      }
      sub.unsubscribe(max === null ? undefined : max);
      return {};
    },

    async request(req) {
      const subject = arg(req, "subject", "string");
      const payload = fromBase64(arg(req, "payload_b64", "string"));
      const timeout = arg(req, "timeout_ms", "number");
      const msg = await connection().request(subject, payload, { timeout, headers: makeHeaders(req.headers) });
      return { message: messageView(msg) };
    },

    async flush(req) {
      const timeout = arg(req, "timeout_ms", "number");
      await withTimeout(connection().flush(), timeout, "flush");
      return {};
    },

    async close(req) {
      const conn = connection();
      if (req.drain === true) {
        await conn.drain();
      } else {
        await conn.close();
      }
      return {};
    },

    decode_headers(req) {
      const h = lib.decodeHeaders(fromBase64(arg(req, "block_b64", "string")));
      return headerView(h);
    },

    encode_headers(req) {
      const h = makeHeaders(arg(req, "headers", "object"));
      return { block_b64: toBase64(h.encode()) };
    },

    headers_op(req) {
      const h = makeHeaders(arg(req, "headers", "object")) || lib.headers();
      if (!lib.match) {
        throw new DriverError("unsupported", `${lib.library} ${lib.version} has no Match for its headers`);
      }
      const match = lib.match[arg(req, "case", "string")];
      if (match === undefined) {
        throw new DriverError("invalid", "argument 'case' must be sensitive or insensitive");
      }
      const key = arg(req, "key", "string");
      const value = arg(req, "value", "string", true);
      switch (arg(req, "op", "string")) {
        case "get":
          // get gives "" for an absent key too: has tells them apart.
          return { value: h.has(key, match) ? h.get(key, match) : null };
        case "values":
          return { values: h.values(key, match) };
        case "set":
          h.set(key, value === null ? "" : value, match);
          break;
        case "delete":
          h.delete(key, match);
          break;
        case "append":
          h.append(key, value === null ? "" : value, match);
          break;
        default:
          throw new DriverError("invalid", `unknown headers_op op '${req.op}'`);
      }
      return { headers: headerView(h).headers };
    },

    validate_subject() {
      throw new DriverError("unsupported", `${lib.library} exposes no subject validation`);
    },

    validate_name(req) {
      const production = arg(req, "production", "string");
      const name = arg(req, "name", "string");
      const validate = lib.names[production];
      if (!validate) {
        throw new DriverError("unsupported", `${lib.library} exposes no validation for '${production}'`);
      }
      try {
        validate(name);
      } catch (err) {
        process.stderr.write(`validate_name ${production} ${JSON.stringify(name)}: ${err.message}\n`);
        return { valid: false };
      }
      return { valid: true };
    },

    // lib.jetstream: manager(nc) (a JetStreamManager), kv(nc, name) / os(nc, name) create a
    // bucket, openKv / openOs bind to one, apiError(err) is the server's API error or null.
    async jetstream_create(req) {
      const kind = arg(req, "kind", "string");
      const name = arg(req, "name", "string");
      needKind(kind);
      return jetstreamCall(async () => {
        const js = lib.jetstream;
        switch (kind) {
          case "stream": {
            const subjects = Array.isArray(req.subjects) ? req.subjects : undefined;
            const info = await (await js.manager(connection())).streams.add({ name, subjects });
            return { created: info.config.name };
          }
          case "consumer":
          case "durable": {
            const field = kind === "consumer" ? "name" : "durable_name";
            const jsm = await js.manager(connection());
            const config = { [field]: name, ack_policy: "explicit" };
            return { created: (await jsm.consumers.add(arg(req, "stream", "string"), config)).name };
          }
          case "kv":
            return { created: (await (await js.kv(connection(), name)).status()).bucket };
          case "object_store":
            return { created: (await (await js.os(connection(), name)).status()).bucket };
          default:
            throw new DriverError("invalid", `unknown kind '${kind}'`);
        }
      });
    },

    async jetstream_delete(req) {
      const kind = arg(req, "kind", "string");
      const name = arg(req, "name", "string");
      needKind(kind);
      return jetstreamCall(async () => {
        const js = lib.jetstream;
        switch (kind) {
          case "stream":
            await (await js.manager(connection())).streams.delete(name);
            break;
          case "consumer":
          case "durable":
            await (await js.manager(connection())).consumers.delete(arg(req, "stream", "string"), name);
            break;
          case "kv":
            await (await js.openKv(connection(), name)).destroy();
            break;
          case "object_store":
            await (await js.openOs(connection(), name)).destroy();
            break;
          default:
            throw new DriverError("invalid", `unknown kind '${kind}'`);
        }
        return {};
      });
    },

    exit: () => ({}),
  };

  // A JetStream call, its errors typed: the server's API error is `protocol` ("<code> <err_code>
  // <description>"); an error the library's classes name keeps its type; any other is one of
  // the library's checks before sending (both lines throw a plain Error for a bad name): `refused`.
  async function jetstreamCall(call) {
    try {
      return await call();
    } catch (err) {
      const api = err instanceof DriverError ? null : lib.jetstream.apiError(err);
      if (api) {
        throw new DriverError("protocol", `${api.code} ${api.err_code} ${api.description}`);
      }
      if (err instanceof DriverError || classify(err) !== "other") {
        throw err;
      }
      throw new DriverError("refused", String(err && err.message));
    }
  }

  function failure(id, type, message) {
    return { response: { id, ok: false, error: { type, message } }, exit: false };
  }

  // The response to one request line, and whether the driver exits after writing it.
  async function handle(line) {
    let req;
    try {
      req = JSON.parse(line);
    } catch (err) {
      return failure(null, "invalid", `malformed request: ${err.message}`);
    }
    const isObject = req !== null && typeof req === "object" && !Array.isArray(req);
    if (!isObject || !Number.isInteger(req.id) || typeof req.cmd !== "string") {
      const id = req && Number.isInteger(req.id) ? req.id : null;
      return failure(id, "invalid", "a request is an object with an integer 'id' and a string 'cmd'");
    }
    const command = Object.hasOwn(commands, req.cmd) ? commands[req.cmd] : null;
    if (!command) {
      return failure(req.id, "unsupported", `unknown command '${req.cmd}'`);
    }
    try {
      return { response: { id: req.id, ok: true, result: await command(req) }, exit: req.cmd === "exit" };
    } catch (err) {
      return failure(req.id, classify(err), String(err && err.message));
    }
  }

  // A library error thrown outside any request becomes an error event, never a crash.
  process.on("uncaughtException", (err) => emitError(classify(err), String(err && err.message)));
  process.on("unhandledRejection", (err) => emitError(classify(err), String(err && err.message)));

  (async () => {
    const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      const { response, exit } = await handle(line);
      write(response);
      if (exit) {
        break;
      }
    }
    process.stdout.write("", () => process.exit(0));
  })();
}

module.exports = { runDriver };
