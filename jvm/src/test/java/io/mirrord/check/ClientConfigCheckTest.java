package io.mirrord.check;


import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ClientConfigCheckTest {
    static final String BOOTSTRAP = "bootstrap.servers";

    @Test
    void aKeyTheProducerDoesNotKnowIsReported() {
        assertEquals(List.of("lingr.ms\tnot a property of Kafka's Java producer"),
                ClientConfigCheck.check("producer", Map.of(BOOTSTRAP, "target:9092", "lingr.ms", "5")));
    }

    @Test
    void everyValueTheProducerRejectsIsReportedWithKafkasMessage() {
        assertEquals(List.of("acks\tInvalid value most for configuration acks: String must be one of: all, -1, 0, 1",
                        "linger.ms\tInvalid value soon for configuration linger.ms: Not a number of type LONG"),
                ClientConfigCheck.check("producer", Map.of(BOOTSTRAP, "target:9092", "linger.ms", "soon", "acks", "most",
                        "batch.size", "65536")));
    }

    @Test
    void aRuleOverSeveralKeysIsReportedWithoutAKey() {
        List<String> problems = ClientConfigCheck.check("producer",
                Map.of(BOOTSTRAP, "target:9092", "enable.idempotence", "true", "acks", "1"));
        assertEquals(1, problems.size(), problems.toString());
        assertTrue(problems.get(0).startsWith("\tMust set acks to all"), problems.get(0));
    }

    @Test
    void theValueOfAKeyThatMayHoldASecretIsNeverShown() {
        for (String key : List.of("ssl.keystore.password", "sasl.jaas.config", "sasl.oauthbearer.client.SECRET",
                "delegation.token.x", "aws.credentials")) {
            String problem = ClientConfigCheck.problem(new ConfigException(key, "hunter2", "hunter2 is too short"));
            assertEquals(key + "\t" + ClientConfigCheck.SECRET_HIDDEN, problem);
        }
        assertEquals(List.of("ssl.keystore.pasword\tnot a property of Kafka's Java consumer"),
                ClientConfigCheck.check("consumer", Map.of("ssl.keystore.pasword", "hunter2", "ssl.key.password", "x")));
    }

    @Test
    void mirrordsOwnKeysArePassedOver() {
        assertEquals(List.of(), ClientConfigCheck.check("producer", Map.of(BOOTSTRAP, "target:9092",
                "mirrord.offset.syncs.topic", "mm2-offset-syncs.target.internal", "mirrord.anything", "?")));
    }

    @Test
    void aCleanFileHasNoProblems() {
        assertEquals(List.of(), ClientConfigCheck.check("producer", Map.of(BOOTSTRAP, "a:9092,b:9092", "acks", "all",
                "linger.ms", "5", "compression.type", "zstd", "security.protocol", "SASL_SSL", "sasl.mechanism",
                "SCRAM-SHA-512", "sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer")));
        assertEquals(List.of(), ClientConfigCheck.check("consumer", Map.of("group.id", "g", "isolation.level",
                "read_committed", "auto.offset.reset", "earliest")));
    }

    @Test
    void theConsumerIsCheckedAsAConsumer() {
        assertEquals(List.of("auto.offset.reset\tInvalid value sometimes for configuration auto.offset.reset: "
                                + "String must be one of: latest, earliest, none",
                        "linger.ms\tnot a property of Kafka's Java consumer"),
                ClientConfigCheck.check("consumer", Map.of(BOOTSTRAP, "source:9092", "auto.offset.reset", "sometimes",
                        "linger.ms", "5")));
    }

    @Test
    void anythingButProducerOrConsumerIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> ClientConfigCheck.check("admin", Map.of()));
    }

    @Test
    void runReadsPropertiesPrintsOneLinePerProblemAndExitsOneIfAny() {
        String file = "# target\nbootstrap.servers = x:1\nlingr.ms=5\nacks=most\nclient.id=caf\\u00e9\n";
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int status = ClientConfigCheck.run(new String[] {"producer"},
                new ByteArrayInputStream(file.getBytes(StandardCharsets.ISO_8859_1)), print(out), print(new ByteArrayOutputStream()));
        assertEquals(1, status);
        assertEquals("acks\tInvalid value most for configuration acks: String must be one of: all, -1, 0, 1\n"
                + "lingr.ms\tnot a property of Kafka's Java producer\n", out.toString(StandardCharsets.UTF_8));
    }

    @Test
    void runExitsZeroForACleanFileAndTwoForAUsageError() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        assertEquals(0, ClientConfigCheck.run(new String[] {"consumer"},
                new ByteArrayInputStream("group.id=g\n".getBytes(StandardCharsets.ISO_8859_1)), print(out), print(err)));
        assertEquals(2, ClientConfigCheck.run(new String[] {}, new ByteArrayInputStream(new byte[0]), print(out), print(err)));
        assertEquals(2, ClientConfigCheck.run(new String[] {"broker"}, new ByteArrayInputStream(new byte[0]), print(out),
                print(err)));
        assertEquals("", out.toString(StandardCharsets.UTF_8));
        assertFalse(err.toString(StandardCharsets.UTF_8).isEmpty());
    }

    @Test
    void aProblemIsOneLineWhateverTheValueHolds() {
        List<String> problems = ClientConfigCheck.check("producer", Map.of("linger.ms", "5\nsoon", "lin\tger", "1"));
        assertEquals(List.of("lin\\tger\tnot a property of Kafka's Java producer",
                "linger.ms\tInvalid value 5\\nsoon for configuration linger.ms: Not a number of type LONG"), problems);
    }

    @Test
    void jaasIsParsedByKafkasOwnParserAndItsOptionsPrintedForACleanFile() {
        String file = "bootstrap.servers=x:1\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
                + "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"mirror\" "
                + "password=\"p\\\\\"w;d\";\n";
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        assertEquals(0, ClientConfigCheck.run(new String[] {"producer"},
                new ByteArrayInputStream(file.getBytes(StandardCharsets.ISO_8859_1)), print(out), print(new ByteArrayOutputStream())));
        String module = "org.apache.kafka.common.security.scram.ScramLoginModule";
        assertEquals("jaas\t" + module + "\tpassword\tp\"w;d\njaas\t" + module + "\tusername\tmirror\n",
                out.toString(StandardCharsets.UTF_8));
    }

    @Test
    void badJaasSyntaxIsAProblemThatDoesNotShowTheSecret() {
        List<String> problems = ClientConfigCheck.check("consumer", Map.of(BOOTSTRAP, "x:1", "group.id", "g",
                "sasl.jaas.config", "org.example.Login required password=\"hunter2\""));
        assertEquals(1, problems.size());
        assertTrue(problems.get(0).startsWith("sasl.jaas.config\tnot a valid JAAS configuration: "), problems.get(0));
        assertFalse(problems.get(0).contains("hunter2"), problems.get(0));
    }

    @Test
    void oneRunChecksEveryFileEachLinePrefixedByItsKindInTheOrderGiven(@TempDir Path dir) throws IOException {
        Path producer = write(dir, "producer.properties", "bootstrap.servers=x:1\nlingr.ms=5\nacks=most\n");
        Path consumer = write(dir, "consumer.properties", "bootstrap.servers=x:2\ngroup.id=g\nfetch.max.bytes=lots\n");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        assertEquals(1, ClientConfigCheck.run(new String[] {"producer=" + producer, "consumer=" + consumer},
                new ByteArrayInputStream(new byte[0]), print(out), print(err)));
        assertEquals("producer\tacks\tInvalid value most for configuration acks: String must be one of: all, -1, 0, 1\n"
                + "producer\tlingr.ms\tnot a property of Kafka's Java producer\n"
                + "consumer\tfetch.max.bytes\tInvalid value lots for configuration fetch.max.bytes: Not a number of "
                + "type INT\n", out.toString(StandardCharsets.UTF_8));
        assertEquals("", err.toString(StandardCharsets.UTF_8));
        out.reset();
        assertEquals(1, ClientConfigCheck.run(new String[] {"consumer=" + consumer, "producer=" + producer},
                new ByteArrayInputStream(new byte[0]), print(out), print(err)));
        assertTrue(out.toString(StandardCharsets.UTF_8).startsWith("consumer\tfetch.max.bytes\t"), out.toString());
    }

    @Test
    void aCleanFileNextToOneWithProblemsGivesItsJaasLinesAndTheFilesAreReadAsIso88591(@TempDir Path dir)
            throws IOException {
        String module = "org.apache.kafka.common.security.plain.PlainLoginModule";
        Path producer = write(dir, "producer.properties", "bootstrap.servers=x:1\nclient.id=caf\u00e9\n"
                + "sasl.mechanism=PLAIN\nsasl.jaas.config=" + module + " required username=\"m\u00e9\" password=\"p\";\n");
        Path consumer = write(dir, "consumer.properties", "bootstrap.servers=x:2\ngroup.id=g\ncaf\u00e9.ms=1\n");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        assertEquals(1, ClientConfigCheck.run(new String[] {"producer=" + producer, "consumer=" + consumer},
                new ByteArrayInputStream(new byte[0]), print(out), print(new ByteArrayOutputStream())));
        assertEquals("producer\tjaas\t" + module + "\tpassword\tp\n"
                + "producer\tjaas\t" + module + "\tusername\tm\u00e9\n"
                + "consumer\tcaf\u00e9.ms\tnot a property of Kafka's Java consumer\n", out.toString(StandardCharsets.UTF_8));
        out.reset();
        assertEquals(0, ClientConfigCheck.run(new String[] {"producer=" + producer},
                new ByteArrayInputStream(new byte[0]), print(out), print(new ByteArrayOutputStream())));
        assertEquals(2, out.toString(StandardCharsets.UTF_8).lines().count());
    }

    @Test
    void aFileThatCannotBeReadIsNamedByItsKindOnStderrAndTheOthersAreStillChecked(@TempDir Path dir) throws IOException {
        Path producer = write(dir, "producer.properties", "bootstrap.servers=x:1\nlingr.ms=5\n");
        Path malformed = write(dir, "consumer.properties", "group.id=\\u00zz\n");
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        assertEquals(2, ClientConfigCheck.run(new String[] {"consumer=" + dir.resolve("absent\nfile"), "producer=" + producer},
                new ByteArrayInputStream(new byte[0]), print(out), print(err)));
        assertEquals("producer\tlingr.ms\tnot a property of Kafka's Java producer\n", out.toString(StandardCharsets.UTF_8));
        List<String> errors = err.toString(StandardCharsets.UTF_8).lines().toList();
        assertEquals(1, errors.size(), errors.toString());
        assertTrue(errors.get(0).startsWith("consumer\tClientConfigCheck: cannot read the properties: "), errors.get(0));
        assertTrue(errors.get(0).contains("absent\\nfile"), errors.get(0));
        out.reset();
        err.reset();
        assertEquals(2, ClientConfigCheck.run(new String[] {"consumer=" + malformed}, new ByteArrayInputStream(new byte[0]),
                print(out), print(err)));
        assertEquals("", out.toString(StandardCharsets.UTF_8));
        assertTrue(err.toString(StandardCharsets.UTF_8).startsWith("consumer\tClientConfigCheck: cannot read the "
                + "properties: Malformed \\\\uxxxx encoding"), err.toString(StandardCharsets.UTF_8));  // escaped
    }

    @Test
    void eachArgumentMustBeAKindOnceAndAFile() {
        for (String[] args : List.of(new String[] {"producer=a", "producer=b"}, new String[] {"admin=a"},
                new String[] {"producer="}, new String[] {"producer", "consumer"}, new String[] {"producer=a", "consumer"})) {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            assertEquals(2, ClientConfigCheck.run(args, new ByteArrayInputStream(new byte[0]), print(out), print(err)),
                    List.of(args).toString());
            assertEquals("", out.toString(StandardCharsets.UTF_8));
            assertEquals(ClientConfigCheck.USAGE + "\n", err.toString(StandardCharsets.UTF_8));
        }
    }

    @Test
    void theUsageIsNotTheOneAJarWithoutTheKindFileFormGives() {
        // mirrord (flow.py) takes that line, alone, for a jar that checks one file per JVM, and falls back to it
        assertFalse(ClientConfigCheck.USAGE.lines().anyMatch(
                "usage: java io.mirrord.check.ClientConfigCheck producer|consumer < client.properties"::equals));
    }

    private static Path write(Path dir, String name, String text) throws IOException {
        return Files.write(dir.resolve(name), text.getBytes(StandardCharsets.ISO_8859_1));
    }

    private static PrintStream print(ByteArrayOutputStream bytes) {
        return new PrintStream(bytes, true, StandardCharsets.UTF_8);
    }
}
