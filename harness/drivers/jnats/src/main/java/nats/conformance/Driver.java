package nats.conformance;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.nats.client.Connection;
import io.nats.client.ConnectionListener;
import io.nats.client.Dispatcher;
import io.nats.client.ErrorListener;
import io.nats.client.JetStreamApiException;
import io.nats.client.JetStreamStatusException;
import io.nats.client.Message;
import io.nats.client.Nats;
import io.nats.client.Options;
import io.nats.client.Subscription;
import io.nats.client.impl.Headers;
import io.nats.client.support.IncomingHeadersProcessor;
import io.nats.client.support.NatsRequestCompletableFuture;
import io.nats.client.support.Status;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Consumer;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * nats-conformance-driver/2 for io.nats:jnats: one JSON request per stdin line, one response per
 * request and asynchronous events on stdout. One long-lived process, so the JVM starts once.
 * jnats's own checks before anything is written (IllegalArgumentException on a subject, header or
 * option) answer {@code refused}; {@code invalid} is kept for a malformed request. A status line is
 * jnats's Message.getStatus(), apart from the headers. headers_op uses Headers: getFirst, get, put,
 * remove and add match keys exactly; the {@code insensitive} case has getIgnoreCase for get and
 * values only (Headers has no case-insensitive put, remove or add: unsupported).
 */
public final class Driver implements ErrorListener, ConnectionListener {
    private static final String PROTOCOL = "nats-conformance-driver/2";
    /**
     * What jnats supports through this driver: the Options.Builder settings connect uses, Headers
     * and IncomingHeadersProcessor, the Validator checks in Validation, JetStream, KeyValue and
     * ObjectStore (Connection.jetStream(), keyValue(), objectStore()), and flush(), which sends
     * PING and waits for the PONG. jnats has no release series here: every release this driver
     * compiles against has all of them (2.20.0 checked); an older one fails to compile (2.17.0
     * has no Options.Builder.useTimeoutException), so no missing API is ever called. Transports:
     * TLS after INFO with Options.Builder.sslContext (a tls:// URL; the context trusts the CA file),
     * TLS first with Options.Builder.tlsFirst(), ws:// and wss:// URLs (SocketDataPort's WebSocket);
     * its WebSocket offers no permessage-deflate, so ws_compression is unsupported.
     */
    private static final List<String> CAPABILITIES = List.of(
        "headers", "no_responders", "queue_groups", "request", "unsubscribe_max", "drain",
        "verbose", "pedantic", "echo", "user_password", "token",
        "validate_subject", "validate_name", "decode_headers", "encode_headers", "headers_op",
        "jetstream", "kv", "object_store", "flush_roundtrip", "tls", "tls_first", "websocket");
    private static final ObjectMapper JSON =
        new ObjectMapper().enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
    // Waits the protocol gives no timeout for (drain, a request's grace past its own timeout).
    private static final long DEFAULT_TIMEOUT_MS = 5000;

    /** A request the driver answers with {"ok": false, "error": {type, message}}. */
    private static final class Failure extends Exception {
        final String type;

        Failure(String type, String message) {
            super(message);
            this.type = type;
        }
    }

    private final OutputStream out;
    private final Map<String, Subscription> subscriptions = new HashMap<>();
    private Connection connection;
    private Dispatcher dispatcher;
    private int subscriptionCount;
    // Set by exit: the process is going away, so the connection's last events are not reported.
    private volatile boolean exiting;

    private Driver(OutputStream out) {
        this.out = out;
    }

    public static void main(String[] args) throws IOException {
        // stdout carries only the protocol; anything a library prints goes to the log.
        OutputStream protocol = new FileOutputStream(FileDescriptor.out);
        System.setOut(System.err);
        Driver driver = new Driver(protocol);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && driver.handle(line)) {
            // handle() answers the request; false after exit
        }
        driver.shutdown();
        // Library threads (dispatcher, timers) must not keep the JVM alive.
        System.exit(0);
    }

    // ---- protocol framing ----

    private synchronized void write(ObjectNode line) {
        try {
            out.write(JSON.writeValueAsBytes(line));
            out.write('\n');
            out.flush();
        } catch (IOException e) {
            // Nobody reads us any more.
            System.exit(0);
        }
    }

    /** Answers one request line; false when the driver should stop reading. */
    private boolean handle(String line) {
        JsonNode request;
        try {
            request = JSON.readTree(line);
        } catch (JsonProcessingException e) {
            respondError(null, "invalid", "malformed request: " + e.getOriginalMessage());
            return true;
        }
        if (request == null || !request.isObject()) {
            respondError(null, "invalid", "a request is a JSON object");
            return true;
        }
        JsonNode id = request.get("id");
        if (id == null || !id.isIntegralNumber()) {
            respondError(null, "invalid", "a request needs an integer id");
            return true;
        }
        JsonNode cmd = request.get("cmd");
        if (cmd == null || !cmd.isTextual()) {
            respondError(id, "invalid", "a request needs a string cmd");
            return true;
        }
        try {
            ObjectNode result = run(cmd.textValue(), request);
            ObjectNode response = NODES.objectNode();
            response.set("id", id);
            response.put("ok", true);
            response.set("result", result);
            write(response);
        } catch (Failure f) {
            respondError(id, f.type, f.getMessage());
        } catch (RuntimeException e) {
            respondError(id, classify(e), text(e));
        }
        return !"exit".equals(cmd.textValue());
    }

    private void respondError(JsonNode id, String type, String message) {
        ObjectNode response = NODES.objectNode();
        response.set("id", id == null ? NODES.nullNode() : id);
        response.put("ok", false);
        response.set("error", error(type, message));
        write(response);
    }

    private static ObjectNode error(String type, String message) {
        ObjectNode error = NODES.objectNode();
        error.put("type", type);
        error.put("message", message);
        return error;
    }

    /** The protocol's error type for an exception jnats threw. */
    private String classify(Throwable e) {
        if (e instanceof JetStreamStatusException jse && jse.getStatus().getCode() == Status.NO_RESPONDERS_CODE) {
            return "no_responders";
        }
        if (e instanceof IllegalArgumentException) {
            return "refused"; // jnats refuses bad subjects, headers and options this way, locally
        }
        if (e instanceof IOException) {
            return "connection"; // connect failures, a lost socket
        }
        if (e instanceof IllegalStateException) {
            // "Connection is Closed" on a closed connection; on an open one a misuse such as
            // "Subscription is not managed by this Dispatcher".
            boolean open = connection != null && connection.getStatus() == Connection.Status.CONNECTED;
            return open ? "refused" : "connection";
        }
        if (e instanceof TimeoutException) {
            return "timeout";
        }
        return "other";
    }

    private static String text(Throwable e) {
        return e.getMessage() != null ? e.getMessage() : e.getClass().getName();
    }

    // ---- commands ----

    private ObjectNode run(String cmd, JsonNode request) throws Failure {
        return switch (cmd) {
            case "hello" -> hello();
            case "connect" -> connect(request);
            case "publish" -> publish(request);
            case "subscribe" -> subscribe(request);
            case "unsubscribe" -> unsubscribe(request);
            case "request" -> request(request);
            case "flush" -> flush(request);
            case "close" -> close(request);
            case "decode_headers" -> decodeHeaders(request);
            case "encode_headers" -> encodeHeaders(request);
            case "headers_op" -> headersOp(request);
            case "validate_subject" -> validate(
                Validation.SUBJECT_USES, "use", string(request, "use"), string(request, "subject"));
            case "validate_name" -> validate(
                Validation.PRODUCTIONS, "production", string(request, "production"), string(request, "name"));
            case "jetstream_create" -> jetStream(request, true);
            case "jetstream_delete" -> jetStream(request, false);
            case "exit" -> exit();
            default -> throw new Failure("unsupported", "unknown command: " + cmd);
        };
    }

    private static ObjectNode hello() {
        ObjectNode result = NODES.objectNode();
        result.put("protocol", PROTOCOL);
        result.put("library", "io.nats:jnats");
        result.put("version", Nats.CLIENT_VERSION);
        result.put("language", "Java " + Runtime.version());
        ArrayNode capabilities = result.putArray("capabilities");
        CAPABILITIES.forEach(capabilities::add);
        return result;
    }

    private ObjectNode connect(JsonNode request) throws Failure {
        String url = string(request, "url");
        JsonNode options = request.path("options");
        Options.Builder builder = new Options.Builder()
            .server(url)
            .errorListener(this)
            .connectionListener(this)
            // A 503 answer fails the request future (no_responders) instead of cancelling it.
            .reportNoResponders()
            // A request the library times out fails with TimeoutException, not a cancellation.
            .useTimeoutException();
        if (!options.path("reconnect").asBoolean(false)) {
            builder.noReconnect();
        }
        if (options.hasNonNull("name")) {
            builder.connectionName(options.get("name").asText());
        }
        if (options.path("verbose").asBoolean(false)) {
            builder.verbose();
        }
        if (options.path("pedantic").asBoolean(false)) {
            builder.pedantic();
        }
        if (!options.path("echo").asBoolean(true)) {
            builder.noEcho();
        }
        boolean headers = options.path("headers").asBoolean(true);
        if (!headers) {
            builder.noHeaders();
        }
        // jnats asks for no_responders even without headers, which the server refuses (-ERR "no
        // responders requires headers support"); so headers off implies no_responders off unless asked.
        if (!options.path("no_responders").asBoolean(headers)) {
            builder.noNoResponders();
        }
        if (options.hasNonNull("user")) {
            builder.userInfo(options.get("user").asText(), options.path("pass").asText(""));
        }
        if (options.hasNonNull("token")) {
            builder.token(options.get("token").asText().toCharArray());
        }
        if (options.hasNonNull("timeout_ms")) {
            builder.connectionTimeout(Duration.ofMillis(options.get("timeout_ms").asLong()));
        }
        boolean websocket = url.startsWith("ws://") || url.startsWith("wss://");
        if (options.hasNonNull("tls_ca_file")) {
            builder.sslContext(trusting(options.get("tls_ca_file").asText()));
        }
        if (options.path("tls_first").asBoolean(false)) {
            if (websocket) {
                // jnats's WebSocket path never makes the TLS-first handshake: it would be ignored.
                throw new Failure("unsupported", "jnats has no TLS-first handshake on a WebSocket");
            }
            builder.tlsFirst();
        }
        if (options.path("ws_compression").asBoolean(false)) {
            throw new Failure("unsupported", "jnats's WebSocket offers no permessage-deflate");
        }
        closeQuietly(); // a second connect replaces the first connection
        subscriptions.clear();
        try {
            connection = Nats.connect(builder.build());
        } catch (IOException e) {
            throw new Failure("connection", text(e));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("other", text(e));
        }
        dispatcher = connection.createDispatcher();
        return NODES.objectNode();
    }

    private ObjectNode publish(JsonNode request) throws Failure {
        connected().publish(
            string(request, "subject"), optionalString(request, "reply"), headers(request), payload(request));
        return NODES.objectNode();
    }

    private ObjectNode subscribe(JsonNode request) throws Failure {
        connected();
        String subject = string(request, "subject");
        String queue = optionalString(request, "queue");
        String handle = Integer.toString(++subscriptionCount);
        Subscription subscription = queue == null
            ? dispatcher.subscribe(subject, message -> onMessage(handle, message))
            : dispatcher.subscribe(subject, queue, message -> onMessage(handle, message));
        subscriptions.put(handle, subscription);
        ObjectNode result = NODES.objectNode();
        result.put("sub", handle);
        return result;
    }

    private ObjectNode unsubscribe(JsonNode request) throws Failure {
        connected();
        String handle = string(request, "sub");
        Subscription subscription = subscriptions.get(handle);
        if (subscription == null) {
            throw new Failure("invalid", "no subscription " + handle);
        }
        JsonNode max = request.get("max");
        if (max == null || max.isNull()) {
            dispatcher.unsubscribe(subscription);
            subscriptions.remove(handle);
        } else if (max.canConvertToInt()) {
            dispatcher.unsubscribe(subscription, max.intValue());
        } else {
            throw new Failure("invalid", "max must be an integer or null");
        }
        return NODES.objectNode();
    }

    private ObjectNode request(JsonNode request) throws Failure {
        long timeoutMs = request.path("timeout_ms").asLong(DEFAULT_TIMEOUT_MS);
        CompletableFuture<Message> reply = connected().requestWithTimeout(
            string(request, "subject"), headers(request), payload(request), Duration.ofMillis(timeoutMs));
        try {
            // jnats sweeps timed-out requests only every requestCleanupInterval (5 s), so wait here.
            Message message = reply.get(timeoutMs, TimeUnit.MILLISECONDS);
            ObjectNode result = NODES.objectNode();
            result.set("message", message(message));
            return result;
        } catch (TimeoutException e) {
            reply.cancel(true);
            throw new Failure("timeout", "no reply within " + timeoutMs + " ms");
        } catch (ExecutionException e) {
            throw new Failure(classify(e.getCause()), text(e.getCause()));
        } catch (CancellationException e) {
            boolean closing = reply instanceof NatsRequestCompletableFuture f && f.wasCancelledClosing();
            throw new Failure(closing ? "connection" : "timeout", text(e));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("other", text(e));
        }
    }

    private ObjectNode flush(JsonNode request) throws Failure {
        long timeoutMs = request.path("timeout_ms").asLong(DEFAULT_TIMEOUT_MS);
        try {
            connected().flush(Duration.ofMillis(timeoutMs));
        } catch (TimeoutException e) {
            // jnats also reports a flush on a closed connection as a TimeoutException.
            boolean closed = connection.getStatus() == Connection.Status.CLOSED;
            throw new Failure(closed ? "connection" : "timeout", text(e));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("other", text(e));
        }
        return NODES.objectNode();
    }

    private ObjectNode close(JsonNode request) throws Failure {
        if (connection == null || connection.getStatus() == Connection.Status.CLOSED) {
            return NODES.objectNode(); // closing a closed connection is a no-op in jnats too
        }
        try {
            if (request.path("drain").asBoolean(false)) {
                long timeoutMs = request.path("timeout_ms").asLong(DEFAULT_TIMEOUT_MS);
                boolean drained = connection.drain(Duration.ofMillis(timeoutMs))
                    .get(timeoutMs + DEFAULT_TIMEOUT_MS, TimeUnit.MILLISECONDS);
                if (!drained) {
                    connection.close();
                    throw new Failure("timeout", "drain did not finish within " + timeoutMs + " ms");
                }
            }
            connection.close();
        } catch (TimeoutException e) {
            throw new Failure("timeout", text(e));
        } catch (ExecutionException e) {
            throw new Failure(classify(e.getCause()), text(e.getCause()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new Failure("other", text(e));
        }
        return NODES.objectNode();
    }

    /** jetstream_create ({@code create}) or jetstream_delete, through JetStreamNames. */
    private ObjectNode jetStream(JsonNode request, boolean create) throws Failure {
        String kind = string(request, "kind");
        String name = string(request, "name");
        String stream = optionalString(request, "stream");
        if (!JetStreamNames.KINDS.contains(kind)) {
            throw new Failure("invalid", "unknown kind " + kind);
        }
        ObjectNode result = NODES.objectNode();
        try {
            if (create) {
                List<String> subjects = new java.util.ArrayList<>();
                request.path("subjects").forEach(subject -> subjects.add(subject.asText()));
                result.put("created", JetStreamNames.create(connected(), kind, name, stream, subjects));
            } else {
                JetStreamNames.delete(connected(), kind, name, stream);
            }
        } catch (JetStreamApiException e) {
            throw new Failure("protocol",
                e.getErrorCode() + " " + e.getApiErrorCode() + " " + e.getErrorDescription());
        } catch (IOException | RuntimeException e) {
            throw new Failure(classify(e), text(e));
        }
        return result;
    }

    private static ObjectNode decodeHeaders(JsonNode request) throws Failure {
        byte[] block = base64(request, "block_b64");
        IncomingHeadersProcessor parsed;
        try {
            // The parser jnats runs on every HMSG header block.
            parsed = new IncomingHeadersProcessor(block);
        } catch (IllegalArgumentException e) {
            throw new Failure("refused", text(e));
        }
        ObjectNode result = NODES.objectNode();
        putStatus(result, parsed.getStatus());
        Headers headers = parsed.getHeaders();
        result.set("headers", headers == null ? NODES.arrayNode() : headerPairs(headers));
        return result;
    }

    private static ObjectNode encodeHeaders(JsonNode request) throws Failure {
        Headers headers = headers(request);
        byte[] block = (headers == null ? new Headers() : headers).getSerialized();
        ObjectNode result = NODES.objectNode();
        result.put("block_b64", Base64.getEncoder().encodeToString(block));
        return result;
    }

    private static ObjectNode headersOp(JsonNode request) throws Failure {
        Headers headers = headers(request);
        if (headers == null) {
            throw new Failure("invalid", "headers must be a list of [name, value] pairs");
        }
        String match = string(request, "case");
        String op = string(request, "op");
        String key = string(request, "key");
        String value = optionalString(request, "value");
        boolean exact = switch (match) {
            case "sensitive" -> true;
            case "insensitive" -> false;
            default -> throw new Failure("invalid", "case must be sensitive or insensitive");
        };
        ObjectNode result = NODES.objectNode();
        if (op.equals("get") || op.equals("values")) {
            List<String> values = exact ? headers.get(key) : headers.getIgnoreCase(key);
            boolean absent = values == null || values.isEmpty();
            if (op.equals("get")) {
                // getFirst is what a user calls; getIgnoreCase has no first-value form.
                result.put("value", absent ? null : exact ? headers.getFirst(key) : values.get(0));
            } else {
                ArrayNode list = result.putArray("values");
                if (!absent) {
                    values.forEach(list::add);
                }
            }
            return result;
        }
        if (!exact) {
            throw new Failure("unsupported", "jnats Headers has no case-insensitive " + op);
        }
        String given = value == null ? "" : value;
        switch (op) {
            case "set" -> headers.put(key, given);
            case "delete" -> headers.remove(key);
            case "append" -> headers.add(key, given);
            default -> throw new Failure("invalid", "unknown headers_op op " + op);
        }
        result.set("headers", headerPairs(headers));
        return result;
    }

    private static ObjectNode validate(
            Map<String, Consumer<String>> checks, String field, String kind, String name) throws Failure {
        Consumer<String> check = checks.get(kind);
        if (check == null) {
            throw new Failure("unsupported", "jnats has no validation for " + field + " " + kind);
        }
        ObjectNode result = NODES.objectNode();
        result.put("valid", Validation.accepts(check, name));
        return result;
    }

    private ObjectNode exit() {
        exiting = true;
        closeQuietly();
        return NODES.objectNode();
    }

    private void shutdown() {
        exiting = true;
        closeQuietly();
    }

    private void closeQuietly() {
        if (connection != null) {
            try {
                connection.close();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RuntimeException e) {
                System.err.println("close: " + e);
            }
        }
    }

    // ---- asynchronous events (library threads) ----

    private void onMessage(String handle, Message message) {
        ObjectNode event = NODES.objectNode();
        event.put("event", "message");
        event.put("sub", handle);
        event.setAll(message(message));
        event(event);
    }

    private void event(ObjectNode event) {
        if (!exiting) {
            write(event);
        }
    }

    private void errorEvent(String type, String message) {
        ObjectNode event = NODES.objectNode();
        event.put("event", "error");
        event.setAll(error(type, message));
        event(event);
    }

    @Override
    public void errorOccurred(Connection conn, String error) {
        errorEvent("protocol", error); // the text of a server -ERR
    }

    @Override
    public void exceptionOccurred(Connection conn, Exception exp) {
        errorEvent(classify(exp), text(exp));
    }

    @Override
    public void slowConsumerDetected(Connection conn, io.nats.client.Consumer consumer) {
        errorEvent("other", "slow consumer detected");
    }

    @Override
    public void socketWriteTimeout(Connection conn) {
        errorEvent("connection", "socket write timeout");
    }

    @Override
    @SuppressWarnings("deprecation") // the four-argument form is missing from older jnats versions
    public void connectionEvent(Connection conn, Events type) {
        if (type == Events.CLOSED) {
            ObjectNode event = NODES.objectNode();
            event.put("event", "closed");
            event(event);
        }
    }

    // ---- JSON <-> jnats values ----

    private static ObjectNode message(Message message) {
        ObjectNode json = NODES.objectNode();
        json.put("subject", message.getSubject());
        String reply = message.getReplyTo();
        json.put("reply", reply == null || reply.isEmpty() ? null : reply);
        json.set("headers", message.hasHeaders() ? headerPairs(message.getHeaders()) : NODES.nullNode());
        putStatus(json, message.getStatus());
        byte[] data = message.getData();
        json.put("payload_b64", Base64.getEncoder().encodeToString(data == null ? new byte[0] : data));
        return json;
    }

    private static void putStatus(ObjectNode json, Status status) {
        if (status == null) {
            json.putNull("status");
            json.putNull("description");
        } else {
            json.put("status", status.getCode());
            json.put("description", status.getMessage());
        }
    }

    /** Headers in the order jnats's API presents them: its key iteration order, values in order. */
    private static ArrayNode headerPairs(Headers headers) {
        ArrayNode pairs = NODES.arrayNode();
        for (Map.Entry<String, List<String>> entry : headers.entrySet()) {
            for (String value : entry.getValue()) {
                pairs.addArray().add(entry.getKey()).add(value);
            }
        }
        return pairs;
    }

    /** The request's "headers" as jnats Headers (Headers.add per pair), or null when absent. */
    private static Headers headers(JsonNode request) throws Failure {
        JsonNode pairs = request.get("headers");
        if (pairs == null || pairs.isNull()) {
            return null;
        }
        if (!pairs.isArray()) {
            throw new Failure("invalid", "headers must be a list of [name, value] pairs");
        }
        Headers headers = new Headers();
        for (JsonNode pair : pairs) {
            if (!pair.isArray() || pair.size() != 2 || !pair.get(0).isTextual() || !pair.get(1).isTextual()) {
                throw new Failure("invalid", "headers must be a list of [name, value] pairs");
            }
            headers.add(pair.get(0).textValue(), pair.get(1).textValue());
        }
        return headers;
    }

    private Connection connected() throws Failure {
        if (connection == null) {
            throw new Failure("connection", "not connected");
        }
        return connection;
    }

    /** An SSLContext that trusts the certificates of a PEM file (the JDK's CertificateFactory). */
    private static SSLContext trusting(String caFile) throws Failure {
        try (InputStream in = new FileInputStream(caFile)) {
            KeyStore store = KeyStore.getInstance(KeyStore.getDefaultType());
            store.load(null, null);
            int index = 0;
            for (Certificate certificate : CertificateFactory.getInstance("X.509").generateCertificates(in)) {
                store.setCertificateEntry("ca" + index++, certificate);
            }
            TrustManagerFactory trust =
                TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            trust.init(store);
            SSLContext context = SSLContext.getInstance("TLS");
            context.init(null, trust.getTrustManagers(), null);
            return context;
        } catch (IOException | GeneralSecurityException e) {
            throw new Failure("invalid", "tls_ca_file " + caFile + ": " + text(e));
        }
    }

    private static String string(JsonNode request, String field) throws Failure {
        JsonNode value = request.get(field);
        if (value == null || !value.isTextual()) {
            throw new Failure("invalid", field + " must be a string");
        }
        return value.textValue();
    }

    private static String optionalString(JsonNode request, String field) throws Failure {
        JsonNode value = request.get(field);
        return value == null || value.isNull() ? null : string(request, field);
    }

    private static byte[] payload(JsonNode request) throws Failure {
        return request.hasNonNull("payload_b64") ? base64(request, "payload_b64") : new byte[0];
    }

    private static byte[] base64(JsonNode request, String field) throws Failure {
        try {
            return Base64.getDecoder().decode(string(request, field));
        } catch (IllegalArgumentException e) {
            throw new Failure("invalid", field + ": " + text(e));
        }
    }
}
