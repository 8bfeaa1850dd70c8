package io.mirrord;

import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.types.Password;
import org.apache.kafka.common.security.JaasContext;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Checks a Kafka Java client's properties the way the client itself does, before mirrord starts:
 * inside Spark a key the client does not know is only a warning in an executor's log, and a value it
 * rejects fails the query's first task.
 *
 * <p>{@code java -cp '<jars>/*' io.mirrord.ClientConfigCheck producer|consumer < file.properties}
 * prints one line per problem, {@code key<TAB>reason} (an empty key when Kafka names no single key),
 * and exits 0 when there is none, 1 when there are some, 2 when it cannot check (usage, unreadable
 * input, slf4j-api missing: Kafka's client classes cannot load without it).
 *
 * <p>{@code sasl.jaas.config} is parsed by Kafka's own parser ({@link JaasContext}), as the client would at its
 * first connection: a syntax error is a problem, and a clean file's login module and options are
 * printed for mirrord's librdkafka admin client, one {@code jaas<TAB>module<TAB>option<TAB>value} line
 * each (a module without options: one line with empty option and value).
 */
public final class ClientConfigCheck {
    /** mirrord's own settings, which the clients pass over. */
    static final String OWN_PREFIX = "mirrord.";
    static final String SECRET_HIDDEN = "invalid value (not shown: it may be a secret)";
    /** Keys whose values are never shown: mirrord passes its own pattern (mirrord/redact.py) as this property. */
    static final String SECRET_KEYS_PROPERTY = "mirrord.secret.keys";
    private static final Pattern SECRET = Pattern.compile(
            System.getProperty(SECRET_KEYS_PROPERTY, "password|secret|jaas|token|credential"), Pattern.CASE_INSENSITIVE);
    /** {@link ConfigException}'s own message; greedy, as the value is the user's text and the reason Kafka's. */
    private static final Pattern INVALID_VALUE = Pattern.compile("Invalid value (.*) for configuration (\\S+?)(?:: .*)?",
            Pattern.DOTALL);
    private static final String PLACEHOLDER_BOOTSTRAP = "localhost:9092";  // its absence is mirrord's to report

    /** Every problem of {@code props} for Kafka's Java {@code kind} ({@code producer} or {@code consumer}), sorted by key. */
    public static List<String> check(String kind, Map<String, String> props) {
        Set<String> names = configNames(kind);
        List<String> problems = new ArrayList<>();
        Map<String, Object> known = new HashMap<>();
        props.forEach((key, value) -> {
            if (key.startsWith(OWN_PREFIX)) {
                return;
            }
            if (names.contains(key)) {
                known.put(key, value);
            } else {
                problems.add(line(key, "not a property of Kafka's Java " + kind));
            }
        });
        known.putIfAbsent(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, PLACEHOLDER_BOOTSTRAP);
        // the client stops at the first value it rejects: drop that key and ask again, once per key at most
        for (int attempts = known.size(); attempts > 0; attempts--) {
            ConfigException rejected = rejected(kind, known);
            if (rejected == null) {
                break;
            }
            String key = rejectedKey(rejected);
            problems.add(problem(rejected));
            if (key == null || known.remove(key) == null) {
                break;  // a rule over several keys, checked after every value passed: nothing more to find
            }
        }
        String jaas = props.get(SaslConfigs.SASL_JAAS_CONFIG);
        if (jaas != null) {
            try {
                jaasEntry(jaas);
            } catch (IllegalArgumentException e) {
                problems.add(line(SaslConfigs.SASL_JAAS_CONFIG, "not a valid JAAS configuration: " + e.getMessage()));
            }
        }
        problems.sort(null);
        return problems;
    }

    /** The one login module of a {@code sasl.jaas.config} value, as Kafka's clients read it. */
    static AppConfigurationEntry jaasEntry(String value) {
        return JaasContext.loadClientContext(Map.of(SaslConfigs.SASL_JAAS_CONFIG, new Password(value)))
                .configurationEntries().get(0);  // exactly one: Kafka's parser refuses more or fewer
    }

    /** {@code jaas<TAB>module<TAB>option<TAB>value} lines for a valid {@code sasl.jaas.config}, sorted by option. */
    static List<String> jaasLines(String value) {
        AppConfigurationEntry entry = jaasEntry(value);
        String module = escape(entry.getLoginModuleName());
        List<String> lines = new ArrayList<>();
        new TreeMap<>(entry.getOptions()).forEach((option, optionValue) ->
                lines.add("jaas\t" + module + "\t" + escape(option) + "\t" + escape(String.valueOf(optionValue))));
        if (lines.isEmpty()) {
            lines.add("jaas\t" + module + "\t\t");
        }
        return lines;
    }

    /** {@code key<TAB>reason} for what the client rejected, the value left out when the key may hold a secret. */
    static String problem(ConfigException rejected) {
        String key = rejectedKey(rejected);
        if (key == null) {
            return line("", String.valueOf(rejected.getMessage()));
        }
        return line(key, SECRET.matcher(key).find() ? SECRET_HIDDEN : rejected.getMessage());
    }

    /** The key an exception is about; null if its message does not name one ({@link ConfigException} keeps no name). */
    private static String rejectedKey(ConfigException rejected) {
        Matcher m = INVALID_VALUE.matcher(String.valueOf(rejected.getMessage()));
        return m.matches() ? m.group(2) : null;
    }

    private static Set<String> configNames(String kind) {
        return switch (kind) {
            case "producer" -> ProducerConfig.configNames();
            case "consumer" -> ConsumerConfig.configNames();
            default -> throw new IllegalArgumentException("not a Kafka client kind: " + kind + " (producer or consumer)");
        };
    }

    /** What building the client's config throws, or null; (de)serializers are mirrord's, never the file's. */
    private static ConfigException rejected(String kind, Map<String, Object> known) {
        Map<String, Object> config = new HashMap<>(known);
        try {
            if (kind.equals("producer")) {
                config.putIfAbsent(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                config.putIfAbsent(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
                new ProducerConfig(config);
            } else {
                config.putIfAbsent(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                config.putIfAbsent(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
                new ConsumerConfig(config);
            }
            return null;
        } catch (ConfigException e) {
            return e;
        }
    }

    /** One line, whatever the key and reason hold. */
    private static String line(String key, String reason) {
        return escape(key) + "\t" + escape(reason);
    }

    private static String escape(String s) {
        return s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r");
    }

    public static void main(String[] args) {
        PrintStream stdout = System.out;
        System.setOut(System.err);  // stdout carries the problems only, whatever a logger does
        // Kafka's log lines say nothing the problems do not: no logging backend, no slf4j notice about it
        setDefault("slf4j.provider", "org.slf4j.helpers.NOP_FallbackServiceProvider");
        setDefault("slf4j.internal.verbosity", "WARN");
        try {
            Class.forName("org.slf4j.LoggerFactory", false, ClientConfigCheck.class.getClassLoader());
        } catch (ClassNotFoundException e) {
            System.err.println("ClientConfigCheck: slf4j-api is not on the class path, and Kafka's clients need it");
            System.exit(2);
        }
        System.exit(run(args, System.in, stdout, System.err));
    }

    private static void setDefault(String property, String value) {
        if (System.getProperty(property) == null) {
            System.setProperty(property, value);
        }
    }

    /** {@link #main} without the process: the exit status. */
    static int run(String[] args, InputStream in, PrintStream out, PrintStream err) {
        if (args.length != 1 || !(args[0].equals("producer") || args[0].equals("consumer"))) {
            err.println("usage: java io.mirrord.ClientConfigCheck producer|consumer < client.properties");
            return 2;
        }
        Properties properties = new Properties();
        try {
            properties.load(in);  // ISO-8859-1, as the clients' own property files
        } catch (IOException | IllegalArgumentException e) {
            err.println("ClientConfigCheck: cannot read the properties: " + e.getMessage());
            return 2;
        }
        Map<String, String> props = new TreeMap<>();
        properties.stringPropertyNames().forEach(key -> props.put(key, properties.getProperty(key)));
        List<String> problems = check(args[0], props);
        problems.forEach(out::println);
        if (problems.isEmpty() && props.containsKey(SaslConfigs.SASL_JAAS_CONFIG)) {
            jaasLines(props.get(SaslConfigs.SASL_JAAS_CONFIG)).forEach(out::println);
        }
        out.flush();
        return problems.isEmpty() ? 0 : 1;
    }

    private ClientConfigCheck() {
    }
}
