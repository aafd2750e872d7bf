// java-nats-streaming driver: nats-conformance-stan-driver/1 on stdin/stdout (see ../README.md,
// "NATS Streaming drivers", and schemas/stan-driver-protocol.schema.json). Logs go to stderr.
package nats.conformance;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.nats.streaming.Message;
import io.nats.streaming.NatsStreaming;
import io.nats.streaming.Options;
import io.nats.streaming.StreamingConnection;
import io.nats.streaming.Subscription;
import io.nats.streaming.SubscriptionOptions;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

public final class StanDriver {
    static final String PROTOCOL = "nats-conformance-stan-driver/1";
    static final List<String> CAPABILITIES = List.of("queue_group", "durable_name", "manual_ack",
        "ack_wait", "max_in_flight", "start_sequence", "start_time_delta", "start_last_received",
        "start_first", "start_new_only");
    static final ObjectMapper JSON = new ObjectMapper();
    static final PrintStream OUT = new PrintStream(System.out, false, StandardCharsets.UTF_8);

    /** An error with its protocol error type. */
    static final class Failure extends Exception {
        final String type;
        Failure(String type, String message) { super(message); this.type = type; }
    }

    static final class Sub {
        Subscription sub;
        final Map<Long, Message> pending = new ConcurrentHashMap<>();
    }

    private StreamingConnection conn;
    private final Map<String, Sub> subs = new HashMap<>();
    private int nextSub;

    static synchronized void write(ObjectNode node) {
        OUT.print(node.toString() + "\n");
        OUT.flush();
    }

    /** The version of the java-nats-streaming jar actually loaded (its file name). */
    static String loadedVersion() {
        String jar = StreamingConnection.class.getProtectionDomain().getCodeSource().getLocation().getPath();
        String name = jar.substring(jar.lastIndexOf('/') + 1);
        return name.replaceFirst("^java-nats-streaming-", "").replaceFirst("\\.jar$", "");
    }

    StreamingConnection connected() throws Failure {
        if (conn == null) throw new Failure("connection", "not connected");
        return conn;
    }

    Sub handle(String name) throws Failure {
        Sub s = subs.get(name);
        if (s == null) throw new Failure("invalid", "no subscription " + name);
        return s;
    }

    static SubscriptionOptions options(JsonNode r) throws Failure {
        SubscriptionOptions.Builder b = new SubscriptionOptions.Builder();
        if (r.get("manual_ack").asBoolean()) b.manualAcks();
        if (!r.get("ack_wait_s").isNull()) b.ackWait(Duration.ofSeconds(r.get("ack_wait_s").asLong()));
        if (!r.get("max_in_flight").isNull()) b.maxInFlight(r.get("max_in_flight").asInt());
        if (!r.get("durable_name").isNull()) b.durableName(r.get("durable_name").asText());
        JsonNode start = r.get("start");
        switch (start.get("position").asText()) {
            case "NewOnly": break;
            case "LastReceived": b.startWithLastReceived(); break;
            case "First": b.deliverAllAvailable(); break;
            case "SequenceStart": b.startAtSequence(start.get("sequence").asLong()); break;
            case "TimeDeltaStart":
                b.startAtTimeDelta(Duration.ofMillis(start.get("time_delta_ms").asLong()));
                break;
            default: throw new Failure("invalid", "unknown start position " + start.get("position"));
        }
        return b.build();
    }

    ObjectNode run(JsonNode r) throws Exception {
        ObjectNode result = JSON.createObjectNode();
        switch (r.get("cmd").asText()) {
            case "hello":
                result.put("protocol", PROTOCOL).put("library", "java-nats-streaming")
                    .put("version", loadedVersion())
                    .put("language", "Java " + System.getProperty("java.version"));
                CAPABILITIES.forEach(result.putArray("capabilities")::add);
                return result;
            case "connect": {
                Options options = new Options.Builder().natsUrl(r.get("url").asText())
                    .clusterId(r.get("cluster_id").asText()).clientId(r.get("client_id").asText())
                    .connectWait(Duration.ofMillis(r.get("timeout_ms").asLong()))
                    .connectionLostHandler((c, e) -> write(JSON.createObjectNode().put("event", "error")
                        .put("type", "connection").put("message", String.valueOf(e))))
                    .build();
                try {
                    conn = NatsStreaming.connect(r.get("cluster_id").asText(), r.get("client_id").asText(), options);
                } catch (java.io.IOException e) {
                    throw new Failure("connection", String.valueOf(e));
                }
                return result;
            }
            case "publish": {
                byte[] data = Base64.getDecoder().decode(r.get("data_b64").asText());
                CompletableFuture<String> acked = new CompletableFuture<>();
                connected().publish(r.get("subject").asText(), data, (guid, err) -> {
                    if (err != null) acked.completeExceptionally(err); else acked.complete(guid);
                });
                try {
                    return result.put("guid", acked.get(r.get("timeout_ms").asLong(), TimeUnit.MILLISECONDS));
                } catch (TimeoutException e) {
                    throw new Failure("timeout", "no PubAck");
                } catch (ExecutionException e) {
                    throw new Failure("protocol", String.valueOf(e.getCause()));
                }
            }
            case "subscribe": {
                String name = Integer.toString(++nextSub);
                Sub s = new Sub();
                io.nats.streaming.MessageHandler handler = m -> {
                    s.pending.put(m.getSequence(), m);
                    // MsgProto.sequence is a uint64 that Java's long holds signed: written unsigned.
                    write(JSON.createObjectNode().put("event", "message").put("sub", name)
                        .put("sequence", new BigInteger(Long.toUnsignedString(m.getSequence()))).put("subject", m.getSubject())
                        .put("data_b64", Base64.getEncoder().encodeToString(m.getData()))
                        .put("redelivered", m.isRedelivered()).put("timestamp", m.getTimestamp()));
                };
                SubscriptionOptions opts = options(r);
                String subject = r.get("subject").asText();
                s.sub = r.get("queue").isNull()
                    ? connected().subscribe(subject, handler, opts)
                    : connected().subscribe(subject, r.get("queue").asText(), handler, opts);
                subs.put(name, s);
                return result.put("sub", name);
            }
            case "ack": {
                Message m = handle(r.get("sub").asText()).pending.get(r.get("sequence").asLong());
                if (m == null) throw new Failure("invalid", "no message " + r.get("sequence") + " on " + r.get("sub"));
                m.ack();
                return result;
            }
            case "unsubscribe":
                handle(r.get("sub").asText()).sub.unsubscribe();
                subs.remove(r.get("sub").asText());
                return result;
            case "close": {
                StreamingConnection c = connected();
                conn = null;
                c.close();
                return result;
            }
            case "exit":
                return result;
            default:
                throw new Failure("unsupported", "unknown command " + r.get("cmd").asText());
        }
    }

    public static void main(String[] args) throws Exception {
        StanDriver driver = new StanDriver();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            JsonNode request;
            try {
                request = JSON.readTree(line);
                if (request == null || !request.has("id") || !request.has("cmd")) throw new IllegalArgumentException("no id or cmd");
            } catch (Exception e) {
                ObjectNode response = JSON.createObjectNode().putNull("id").put("ok", false);
                response.putObject("error").put("type", "invalid").put("message", String.valueOf(e));
                write(response);
                continue;
            }
            ObjectNode response = JSON.createObjectNode();
            response.set("id", request.get("id"));
            try {
                response.put("ok", true).set("result", driver.run(request));
            } catch (Failure e) {
                response.put("ok", false).putObject("error").put("type", e.type).put("message", e.getMessage());
            } catch (Exception e) {
                response.put("ok", false).putObject("error").put("type", "other").put("message", String.valueOf(e));
            }
            write(response);
            if ("exit".equals(request.get("cmd").asText())) break;
        }
        System.exit(0);
    }
}
