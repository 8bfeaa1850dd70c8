package io.mirrord.check;

import java.io.FileDescriptor;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
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
 * <p>{@code java -cp '<jars>/*' io.mirrord.check.ClientConfigCheck producer|consumer < file.properties}
 * prints one UTF-8 line per problem, {@code key<TAB>reason} (an empty key when Kafka names no single key),
 * and exits 0 when there is none, 1 when there are some, 2 when it cannot check (usage, unreadable
 * input, slf4j-api missing: Kafka's client classes cannot load without it).
 *
 * <p>{@code sasl.jaas.config} is parsed by Kafka's own parser ({@link JaasContext}), as the client would at its
 * first connection: a syntax error is a problem, and a clean file's login module and options are
 * printed for mirrord's librdkafka admin client, one {@code jaas<TAB>module<TAB>option<TAB>value} line
 * each (a module without options: one line with empty option and value).
 *
 * <p>{@code java ... io.mirrord.check.ClientConfigCheck producer=FILE consumer=FILE} checks several files in one
 * JVM (each kind once, in the order given; mirrord passes {@code /dev/fd/N}, files it opened itself), reading
 * each as {@link Properties#load(InputStream)} does (ISO-8859-1). Every line about a file starts with its
 * kind and a tab: on stdout the lines the one-file form prints for it (its problems, two fields, or if it
 * has none its JAAS lines, four fields), on stderr why it could not be read. The other files are checked
 * all the same. It exits 2 if a file could not be read, else 1 if a file has a problem, else 0.
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
    static final Set<String> KINDS = Set.of("producer", "consumer");
    static final String USAGE = "usage: java io.mirrord.check.ClientConfigCheck KIND=FILE... (KIND producer or consumer, "
            + "each at most once)\n   or: java io.mirrord.check.ClientConfigCheck producer|consumer < client.properties";

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
        // UTF-8, as mirrord reads it, whatever the locale: without one the JVM's own would print "caf?" for "café"
        PrintStream stdout = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
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
        if (args.length == 1 && KINDS.contains(args[0])) {
            return runOne(args[0], in, out, err);
        }
        Map<String, String> files = files(args);
        if (files == null) {
            err.println(USAGE);
            return 2;
        }
        boolean unreadable = false;
        boolean problems = false;
        for (Map.Entry<String, String> file : files.entrySet()) {
            String kind = file.getKey();
            Map<String, String> props;
            try (InputStream properties = new FileInputStream(file.getValue())) {
                props = load(properties);
            } catch (IOException | IllegalArgumentException e) {
                err.println(kind + "\tClientConfigCheck: cannot read the properties: "
                        + escape(String.valueOf(e.getMessage())));
                unreadable = true;
                continue;
            }
            List<String> lines = new ArrayList<>();
            problems |= judge(kind, props, lines);
            lines.forEach(line -> out.println(kind + "\t" + line));
        }
        out.flush();
        err.flush();
        return unreadable ? 2 : problems ? 1 : 0;
    }

    /** The one-file form: the properties on {@code in}, the lines without a kind. */
    private static int runOne(String kind, InputStream in, PrintStream out, PrintStream err) {
        Map<String, String> props;
        try {
            props = load(in);
        } catch (IOException | IllegalArgumentException e) {
            err.println("ClientConfigCheck: cannot read the properties: " + e.getMessage());
            return 2;
        }
        List<String> lines = new ArrayList<>();
        boolean problems = judge(kind, props, lines);
        lines.forEach(out::println);
        out.flush();
        return problems ? 1 : 0;
    }

    /** {@code kind=file} arguments, kind to file in their order; null unless each is one, each kind at most once. */
    private static Map<String, String> files(String[] args) {
        Map<String, String> files = new LinkedHashMap<>();
        for (String arg : args) {
            int eq = arg.indexOf('=');
            if (eq < 0 || !KINDS.contains(arg.substring(0, eq)) || eq == arg.length() - 1
                    || files.putIfAbsent(arg.substring(0, eq), arg.substring(eq + 1)) != null) {
                return null;
            }
        }
        return files.isEmpty() ? null : files;
    }

    /** The properties as {@link Properties#load(InputStream)} reads them: ISO-8859-1, as the clients' own files. */
    private static Map<String, String> load(InputStream in) throws IOException {
        Properties properties = new Properties();
        properties.load(in);
        Map<String, String> props = new TreeMap<>();
        properties.stringPropertyNames().forEach(key -> props.put(key, properties.getProperty(key)));
        return props;
    }

    /** Adds the problems of {@code props} to {@code lines}, or if there are none its JAAS lines; whether there were. */
    private static boolean judge(String kind, Map<String, String> props, List<String> lines) {
        List<String> problems = check(kind, props);
        lines.addAll(problems);
        if (problems.isEmpty() && props.containsKey(SaslConfigs.SASL_JAAS_CONFIG)) {
            lines.addAll(jaasLines(props.get(SaslConfigs.SASL_JAAS_CONFIG)));
        }
        return !problems.isEmpty();
    }

    private ClientConfigCheck() {
    }
}
