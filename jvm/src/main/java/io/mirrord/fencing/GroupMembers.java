package io.mirrord.fencing;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeConsumerGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;

/**
 * A consumer group's members, as the daemon asks for them (is the flow's election held by another host; does an
 * application's group have consumers on the target before its offsets are translated there), through Kafka's
 * Java Admin. librdkafka's coordinator-bound admin requests (DescribeConsumerGroups among them) abort the whole
 * process when one fails to be sent on a connection that drops (librdkafka issue 4605: the request's
 * enqueue-once is freed twice), which is what a host cut off from its target does; Kafka's Java client fails
 * the request instead. One Admin per cluster configuration, for the JVM's life.
 */
public final class GroupMembers {
    private static final Map<Map<String, Object>, Admin> ADMINS = new ConcurrentHashMap<>();

    private GroupMembers() {
    }

    /**
     * Each member of {@code group} now, as {@code clientId \t host \t 1|0} (1: it holds partitions); an empty list
     * for a group that does not exist. {@code config}: the cluster's Java client properties (those an Admin does
     * not know are left out).
     */
    public static List<String> describe(Map<String, Object> config, String group, long timeoutMs) throws Exception {
        Admin admin = ADMINS.computeIfAbsent(new HashMap<>(config), GroupMembers::create);
        ConsumerGroupDescription described = admin.describeConsumerGroups(List.of(group),
                        new DescribeConsumerGroupsOptions().timeoutMs((int) timeoutMs))
                .describedGroups().get(group).get(timeoutMs, TimeUnit.MILLISECONDS);
        List<String> members = new ArrayList<>();
        for (MemberDescription m : described.members()) {
            boolean holds = m.assignment() != null && !m.assignment().topicPartitions().isEmpty();
            members.add(m.clientId() + "\t" + m.host() + "\t" + (holds ? "1" : "0"));
        }
        return members;
    }

    private static Admin create(Map<String, Object> config) {
        return Admin.create(adminConfig(config, "-groups"));
    }

    /** The properties an Admin knows among {@code config}'s, its client id given {@code suffix}. */
    static Map<String, Object> adminConfig(Map<String, Object> config, String suffix) {
        Map<String, Object> c = new HashMap<>();
        config.forEach((k, v) -> {
            if (AdminClientConfig.configNames().contains(k)) {
                c.put(k, v);
            }
        });
        c.put(AdminClientConfig.CLIENT_ID_CONFIG, config.getOrDefault("client.id", "mirrord") + suffix);
        return c;
    }
}
