package nats.conformance;

import io.nats.client.api.ObjectMeta;
import io.nats.client.support.Validator;

import java.util.Map;
import java.util.function.Consumer;

/**
 * The jnats validators behind validate_subject and validate_name. Each entry is the check jnats
 * itself applies where a user hands it that kind of name; a validator signals "invalid" by throwing
 * IllegalArgumentException. Productions jnats has no check for are absent (answered `unsupported`).
 */
final class Validation {
    private Validation() {}

    /**
     * Subject checks by use. Publish and subscribe both go through the connection's subject check,
     * which with default Options (SubjectValidationType.Lenient) is Validator.validateSubject; a reply
     * subject goes through Validator.validateReplyTo (NatsConnection.publishInternal).
     */
    static final Map<String, Consumer<String>> SUBJECT_USES = Map.of(
        "publish", s -> Validator.validateSubject(s, true),
        "subscribe", s -> Validator.validateSubject(s, true),
        "reply", s -> Validator.validateReplyTo(s, true));

    /** ADR-6 production -> the jnats check that covers it; platform and internal are not inputs to any. */
    static final Map<String, Consumer<String>> PRODUCTIONS = Map.ofEntries(
        // Validator helpers whose character classes are those of these productions.
        Map.entry("term", s -> Validator.validatePrintableExceptWildDotGt(s, "Term", true)),
        Map.entry("restricted-term", s -> Validator.validateIsRestrictedTerm(s, "Term", true)),
        Map.entry("filename-safe", s -> Validator.validatePrintableExceptWildDotGtSlashes(s, "Name", true)),
        // The full subject grammar jnats has: what SubjectValidationType.Strict applies in 2.26
        // (validateSubjectTermStrict), under the name older versions also have.
        Map.entry("message-subject", s -> Validator.validateSubject(s, "Subject", true, false)),
        Map.entry("reply-to", s -> Validator.validateReplyTo(s, true)),
        Map.entry("queue-name", s -> Validator.validateQueueName(s, true)),
        Map.entry("stream-name", s -> Validator.validateStreamName(s, true)),
        Map.entry("durable-name", s -> Validator.validateDurable(s, true)),
        Map.entry("consumer-name", s -> Validator.validateConsumerName(s, true)),
        // JetStreamOptions.Builder.prefix() checks both kinds of prefix with this one function.
        Map.entry("js-internal-prefix", s -> Validator.validatePrefixOrDomain(s, "Prefix", true)),
        Map.entry("js-user-prefix", s -> Validator.validatePrefixOrDomain(s, "Prefix", true)),
        // What KeyValue.put/get/delete apply to a key.
        Map.entry("kv-key-name", Validator::validateNonWildcardKvKeyRequired),
        // KeyValueManagement and ObjectStoreManagement both use validateBucketName.
        Map.entry("kv-bucket-name", s -> Validator.validateBucketName(s, true)),
        Map.entry("os-bucket-name", s -> Validator.validateBucketName(s, true)),
        // ObjectMeta.Builder only checks that an object name is not null.
        Map.entry("os-object-name", s -> ObjectMeta.builder(s).build()));

    /** Whether the check accepts the name; the library's reason for a refusal goes to stderr. */
    static boolean accepts(Consumer<String> check, String name) {
        try {
            check.accept(name);
            return true;
        } catch (IllegalArgumentException e) {
            System.err.println("jnats refused a name: " + e.getMessage());
            return false;
        }
    }
}
