package io.mirrord.fencing;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.ApiVersions;
import org.apache.kafka.clients.ClientResponse;
import org.apache.kafka.clients.ClientUtils;
import org.apache.kafka.clients.DefaultHostResolver;
import org.apache.kafka.clients.ManualMetadataUpdater;
import org.apache.kafka.clients.NetworkClient;
import org.apache.kafka.clients.NetworkClientUtils;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.message.FindCoordinatorRequestData;
import org.apache.kafka.common.message.FindCoordinatorResponseData.Coordinator;
import org.apache.kafka.common.message.LeaveGroupRequestData.MemberIdentity;
import org.apache.kafka.common.message.LeaveGroupResponseData.MemberResponse;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.FindCoordinatorRequest;
import org.apache.kafka.common.requests.FindCoordinatorResponse;
import org.apache.kafka.common.requests.LeaveGroupRequest;
import org.apache.kafka.common.requests.LeaveGroupResponse;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;

/**
 * Takes dynamic members out of a consumer group by member id, as a member leaving would: a host's own member of
 * the flow's election from before its session lapsed in a target outage (docs/decisions.md §6). A coordinator
 * that restarted meanwhile reloads the group with that member in it, and the host, rejoining under a new member
 * id, would wait a whole session for it. Kafka's Admin API removes static members only (by group.instance.id), so
 * this sends the LeaveGroup request itself through Kafka's own network client, with the cluster's security
 * settings. A member the coordinator no longer knows is answered {@code UNKNOWN_MEMBER_ID}: nothing to do.
 */
public final class LapsedMembers {
    private static final long BACKOFF_MS = 100;

    private LapsedMembers() {
    }

    /**
     * Each member's answer, as {@code memberId \t ERROR} ({@code NONE}: it left), once the group's coordinator
     * answered within {@code timeoutMs}; a coordinator still loading the group is asked again meanwhile.
     * {@code config}: the cluster's Java client properties (those an Admin does not know are left out).
     */
    public static List<String> leave(Map<String, Object> config, String group, List<String> memberIds,
                                     long timeoutMs) throws Exception {
        AdminClientConfig admin = new AdminClientConfig(GroupMembers.adminConfig(config, "-leave"));
        Time time = Time.SYSTEM;
        List<Node> bootstrap = new ArrayList<>();
        for (InetSocketAddress a : ClientUtils.parseAndValidateAddresses(admin)) {
            bootstrap.add(new Node(-1 - bootstrap.size(), a.getHostString(), a.getPort()));
        }
        long deadline = time.milliseconds() + timeoutMs;
        try (Metrics metrics = new Metrics(time);
             NetworkClient client = ClientUtils.createNetworkClient(admin, "mirrord-leave", metrics,
                     admin.getString(AdminClientConfig.CLIENT_ID_CONFIG), new LogContext(), new ApiVersions(), time,
                     1, (int) timeoutMs, new ManualMetadataUpdater(bootstrap), new DefaultHostResolver())) {
            Exception last = null;
            while (time.milliseconds() < deadline) {
                try {
                    List<String> left = leaveOnce(client, bootstrap, group, memberIds, time, deadline);
                    if (left != null) {
                        return left;
                    }
                } catch (IOException e) { // a connection dropped: asked again until the deadline
                    last = e;
                }
                time.sleep(BACKOFF_MS);
            }
            throw new IOException("no answer from group " + group + "'s coordinator within " + timeoutMs + " ms"
                    + (last == null ? "" : ": " + last.getMessage()));
        }
    }

    /** The members' answers; null when the coordinator is not ready yet (loading, moved, not found). */
    private static List<String> leaveOnce(NetworkClient client, List<Node> bootstrap, String group,
                                          List<String> memberIds, Time time, long deadline) throws Exception {
        Node coordinator = coordinator(client, bootstrap, group, time, deadline);
        if (coordinator == null) {
            return null;
        }
        List<MemberIdentity> members = new ArrayList<>();
        for (String id : memberIds) {
            members.add(new MemberIdentity().setMemberId(id).setReason("its session lapsed in an outage"));
        }
        LeaveGroupResponse response = (LeaveGroupResponse) ask(client, coordinator,
                new LeaveGroupRequest.Builder(group, members), time, deadline);
        Errors top = Errors.forCode(response.data().errorCode());
        if (top == Errors.COORDINATOR_LOAD_IN_PROGRESS || top == Errors.COORDINATOR_NOT_AVAILABLE
                || top == Errors.NOT_COORDINATOR) {
            return null;
        }
        if (top != Errors.NONE) {
            throw top.exception();
        }
        List<String> answers = new ArrayList<>();
        for (MemberResponse m : response.memberResponses()) {
            answers.add(m.memberId() + "\t" + Errors.forCode(m.errorCode()).name());
        }
        return answers;
    }

    private static Node coordinator(NetworkClient client, List<Node> bootstrap, String group, Time time,
                                    long deadline) throws Exception {
        IOException failed = null;
        for (Node node : bootstrap) {
            try {
                FindCoordinatorResponse response = (FindCoordinatorResponse) ask(client, node,
                        new FindCoordinatorRequest.Builder(new FindCoordinatorRequestData()
                                .setKeyType(FindCoordinatorRequest.CoordinatorType.GROUP.id())
                                .setCoordinatorKeys(List.of(group))), time, deadline);
                for (Coordinator c : response.coordinators()) {
                    if (c.errorCode() == Errors.NONE.code()) {
                        return new Node(c.nodeId(), c.host(), c.port());
                    }
                }
                return null;
            } catch (IOException e) {
                failed = e;
            }
        }
        throw failed != null ? failed : new IOException("no bootstrap server");
    }

    private static Object ask(NetworkClient client, Node node, AbstractRequest.Builder<?> request, Time time,
                              long deadline) throws IOException {
        if (!NetworkClientUtils.awaitReady(client, node, time, Math.max(1, deadline - time.milliseconds()))) {
            throw new IOException("broker " + node + " not ready");
        }
        ClientResponse response = NetworkClientUtils.sendAndReceive(client,
                client.newClientRequest(node.idString(), request, time.milliseconds(), true), time);
        return response.responseBody();
    }
}
