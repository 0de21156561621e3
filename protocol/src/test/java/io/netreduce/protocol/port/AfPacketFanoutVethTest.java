package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * Ports of one fanout group (dataplane lanes) on a real veth, steered by the kernel running a
 * {@link LaneSteeringProgram}: each frame reaches exactly one member, the one its address pair names. Needs root.
 */
class AfPacketFanoutVethTest
{
    private static final InetAddress W0 = InetAddress.ofLiteral("10.99.0.1");
    private static final InetAddress W1 = InetAddress.ofLiteral("10.99.0.2");
    private static final InetAddress W2 = InetAddress.ofLiteral("10.99.0.3");
    private static final InetAddress W3 = InetAddress.ofLiteral("10.99.0.4");
    private static final InetAddress V6A = InetAddress.ofLiteral("fd00::1");
    private static final InetAddress V6B = InetAddress.ofLiteral("fd00::2");

    private static VethPair veth;

    private final List<AfPacketPort> ports = new ArrayList<>();

    @BeforeAll
    static void createNamespaces()
    {
        assumeTrue(VethPair.isRoot(), "needs root for network namespaces and AF_PACKET");
        veth = new VethPair("f", 1500);
    }

    @AfterAll
    static void deleteNamespaces()
    {
        if (null != veth)
        {
            veth.close();
        }
    }

    @AfterEach
    void closePorts()
    {
        ports.forEach(AfPacketPort::close);
    }

    @Test
    void shouldDeliverEachListedPairToItsMemberOnly()
    {
        final AfPacketPort sender = open(veth.namespaceA);
        final List<AfPacketPort> lanes = openFanout(veth.namespaceB, 2);
        lanes.get(0).steer(new LaneSteeringProgram()
            .route(W0, W1, 1).route(W2, W3, 0).route(W1, W2, 1).route(V6A, V6B, 1).build());

        final List<byte[]> toLane1 = new ArrayList<>();
        final List<byte[]> toLane0 = new ArrayList<>();
        for (int i = 0; i < 60; i++)
        {
            toLane1.add(IpFrames.frame(W0, W1, 1000 + i, false));
            toLane0.add(IpFrames.frame(W2, W3, 2000 + i, false));
            toLane1.add(IpFrames.frame(W1, W2, 3000 + i, false));
            toLane1.add(IpFrames.frame(V6A, V6B, 4000 + i, false));
        }
        final List<byte[]> all = new ArrayList<>(toLane0);
        all.addAll(toLane1);
        send(sender, all);

        final List<List<Integer>> received = receive(lanes, all.size());
        assertThat(received.get(0)).containsExactlyInAnyOrderElementsOf(sequences(toLane0));
        assertThat(received.get(1)).containsExactlyInAnyOrderElementsOf(sequences(toLane1));
    }

    @Test
    void shouldDeliverEveryFrameToExactlyOneMemberInOrderPerPair()
    {
        final AfPacketPort sender = open(veth.namespaceA);
        final List<AfPacketPort> lanes = openFanout(veth.namespaceB, 2);
        lanes.get(1).steer(new LaneSteeringProgram().route(W0, W1, 1).build());

        final List<byte[]> frames = new ArrayList<>();
        for (int i = 0; i < 300; i++)
        {
            frames.add(IpFrames.frame(i % 2 == 0 ? W0 : W2, i % 2 == 0 ? W1 : W3, i, false));
        }
        send(sender, frames);

        final List<List<Integer>> received = receive(lanes, frames.size());
        final Set<Integer> seen = new HashSet<>();
        for (final List<Integer> lane : received)
        {
            for (final int sequence : lane)
            {
                assertThat(seen.add(sequence)).as("frame %d reached two members", sequence).isTrue();
            }
        }
        assertThat(seen).hasSize(frames.size());
        // The listed pair's frames all reached member 1, in the order sent.
        assertThat(received.get(1).stream().filter(s -> s % 2 == 0).toList())
            .isEqualTo(sequences(frames).stream().filter(s -> s % 2 == 0).toList());
    }

    @Test
    void shouldSendEverythingToMemberZeroUntilAClassifierIsSetAndFollowAReplacedOne()
    {
        final AfPacketPort sender = open(veth.namespaceA);
        final List<AfPacketPort> lanes = openFanout(veth.namespaceB, 2);
        assertThat(lanes.get(0).fanoutGroup()).isEqualTo(lanes.get(1).fanoutGroup()).isNotNegative();

        final List<byte[]> before = List.of(IpFrames.frame(W0, W1, 1, false), IpFrames.frame(W2, W3, 2, false));
        send(sender, before);
        List<List<Integer>> received = receive(lanes, before.size());
        assertThat(received.get(0)).containsExactly(1, 2);

        lanes.get(0).steer(new LaneSteeringProgram().route(W0, W1, 1).build());
        send(sender, List.of(IpFrames.frame(W0, W1, 3, false)));
        received = receive(lanes, 1);
        assertThat(received.get(1)).containsExactly(3);

        lanes.get(1).steer(new LaneSteeringProgram().route(W0, W1, 0).build());
        send(sender, List.of(IpFrames.frame(W0, W1, 4, false)));
        received = receive(lanes, 1);
        assertThat(received.get(0)).containsExactly(4);
    }

    @Test
    void shouldTransmitFromEveryMember()
    {
        final AfPacketPort receiver = open(veth.namespaceA);
        final List<AfPacketPort> lanes = openFanout(veth.namespaceB, 2);
        send(lanes.get(0), List.of(IpFrames.frame(W0, W1, 7, false)));
        send(lanes.get(1), List.of(IpFrames.frame(W2, W3, 8, false)));
        assertThat(receive(List.of(receiver), 2).get(0)).containsExactlyInAnyOrder(7, 8);
    }

    @Test
    void shouldNotHandTheGroupItsMembersOwnTransmissions() throws InterruptedException
    {
        open(veth.namespaceA);
        final List<AfPacketPort> lanes = openFanout(veth.namespaceB, 2);
        lanes.getFirst().steer(new LaneSteeringProgram().route(W0, W1, 1).build());
        final List<byte[]> frames = new ArrayList<>();
        for (int i = 0; i < 20; i++)
        {
            frames.add(IpFrames.frame(i % 2 == 0 ? W0 : W2, i % 2 == 0 ? W1 : W3, i, false));
        }
        send(lanes.get(0), frames);
        send(lanes.get(1), frames);
        Thread.sleep(100);
        // Not one slot taken: a member's own frames skipped in user space would still have filled the ring.
        assertThat(lanes.get(0).hasReceiveWork()).isFalse();
        assertThat(lanes.get(1).hasReceiveWork()).isFalse();
    }

    @Test
    void shouldKeepOnlyRoceV2FramesInEveryMemberOfARoceOnlyGroup()
    {
        // The hold filter gives way to the RoCEv2 filter, not to none, once every member has joined.
        final AfPacketPort sender = open(veth.namespaceA);
        final List<AfPacketPort> lanes = openFanout(veth.namespaceB, 2,
            AfPacketConfiguration.defaults(VethPair.DEVICE_B).withRoceOnly(true));
        lanes.get(0).steer(new LaneSteeringProgram().route(W0, W1, 1).route(W2, W3, 0).build());
        final byte[] otherUdp = IpFrames.frame(W0, W1, 50, false);
        java.nio.ByteBuffer.wrap(otherUdp).putShort(14 + 20 + 2, (short)5201);
        final byte[] tcp = IpFrames.frame(W2, W3, 51, false);
        tcp[14 + 9] = 6;
        final List<byte[]> roce = List.of(IpFrames.frame(W0, W1, 60, false), IpFrames.frame(W2, W3, 61, false));
        final List<byte[]> all = new ArrayList<>(List.of(otherUdp, tcp));
        all.addAll(roce);
        send(sender, all);

        final List<List<Integer>> received = receive(lanes, roce.size());
        assertThat(received.get(1)).containsExactly(60);
        assertThat(received.get(0)).containsExactly(61);
    }

    private AfPacketPort open(final String namespace)
    {
        final AfPacketPort port = NetworkNamespace.callIn(namespace, () -> AfPacketPort.open(VethPair.DEVICE_A));
        ports.add(port);
        return port;
    }

    private List<AfPacketPort> openFanout(final String namespace, final int members)
    {
        return openFanout(namespace, members, AfPacketConfiguration.defaults(VethPair.DEVICE_B));
    }

    private List<AfPacketPort> openFanout(final String namespace, final int members,
        final AfPacketConfiguration configuration)
    {
        final List<AfPacketPort> opened = NetworkNamespace.callIn(namespace,
            () -> AfPacketPort.openFanout(configuration, members));
        ports.addAll(opened);
        return opened;
    }

    private static void send(final AfPacketPort port, final List<byte[]> frames)
    {
        for (final byte[] frame : frames)
        {
            while (!port.send(new UnsafeBuffer(frame), 0, frame.length))
            {
                port.flush();
            }
        }
        port.flush();
    }

    /**
     * Receive from every member until {@code expected} test frames arrived (5 s at most), then a little longer
     * so that a frame delivered twice would show.
     */
    private static List<List<Integer>> receive(final List<AfPacketPort> members, final int expected)
    {
        final List<List<Integer>> received = new ArrayList<>();
        for (int i = 0; i < members.size(); i++)
        {
            received.add(new ArrayList<>());
        }
        final long deadline = System.nanoTime() + 5_000_000_000L;
        long settle = Long.MAX_VALUE;
        while (System.nanoTime() < Math.min(deadline, settle))
        {
            for (int i = 0; i < members.size(); i++)
            {
                final List<Integer> into = received.get(i);
                members.get(i).receive((buffer, offset, length, flags) ->
                {
                    final byte[] frame = new byte[length];
                    buffer.getBytes(offset, frame);
                    final int sequence = IpFrames.sequence(frame);
                    if (sequence >= 0)
                    {
                        into.add(sequence);
                    }
                }, 256);
            }
            if (settle == Long.MAX_VALUE && received.stream().mapToInt(List::size).sum() >= expected)
            {
                settle = System.nanoTime() + 50_000_000L;
            }
        }
        assertThat(received.stream().mapToInt(List::size).sum()).as("test frames received").isEqualTo(expected);
        return received;
    }

    private static List<Integer> sequences(final List<byte[]> frames)
    {
        return frames.stream().map(IpFrames::sequence).toList();
    }
}
