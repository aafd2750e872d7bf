package nats.conformance;

import io.nats.client.Connection;
import io.nats.client.JetStreamApiException;
import io.nats.client.api.AckPolicy;
import io.nats.client.api.ConsumerConfiguration;
import io.nats.client.api.KeyValueConfiguration;
import io.nats.client.api.ObjectStoreConfiguration;
import io.nats.client.api.StreamConfiguration;

import java.io.IOException;
import java.util.List;
import java.util.Set;

/**
 * jetstream_create and jetstream_delete through jnats's JetStreamManagement, KeyValueManagement
 * and ObjectStoreManagement. The configuration builders check names before anything is sent
 * (IllegalArgumentException: the driver answers {@code refused}); the server's API errors are
 * JetStreamApiException ({@code protocol}).
 */
final class JetStreamNames {
    static final Set<String> KINDS = Set.of("stream", "consumer", "durable", "kv", "object_store");

    private JetStreamNames() {
    }

    /** Create {@code name} as a {@code kind} (one of KINDS); the name jnats reports for it. */
    static String create(Connection nc, String kind, String name, String stream, List<String> subjects)
            throws IOException, JetStreamApiException {
        return switch (kind) {
            case "stream" -> nc.jetStreamManagement()
                .addStream(StreamConfiguration.builder().name(name).subjects(subjects).build())
                .getConfiguration().getName();
            case "consumer", "durable" -> {
                ConsumerConfiguration.Builder config = ConsumerConfiguration.builder().ackPolicy(AckPolicy.Explicit);
                config = kind.equals("consumer") ? config.name(name) : config.durable(name);
                yield nc.jetStreamManagement().addOrUpdateConsumer(stream, config.build()).getName();
            }
            case "kv" -> nc.keyValueManagement()
                .create(KeyValueConfiguration.builder().name(name).build()).getBucketName();
            default -> nc.objectStoreManagement()
                .create(ObjectStoreConfiguration.builder().name(name).build()).getBucketName();
        };
    }

    /** Delete what create made (a consumer from its stream). */
    static void delete(Connection nc, String kind, String name, String stream)
            throws IOException, JetStreamApiException {
        switch (kind) {
            case "stream" -> nc.jetStreamManagement().deleteStream(name);
            case "consumer", "durable" -> nc.jetStreamManagement().deleteConsumer(stream, name);
            case "kv" -> nc.keyValueManagement().delete(name);
            default -> nc.objectStoreManagement().delete(name);
        }
    }
}
