package io.netreduce.systemtests;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.AfPacketPort;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue 30 item 5 on the bed: a host on the switch (the bed's outsider) floods first packets that carry rank 0's
 * IP <em>and</em> MAC, rank 1's address, receive QP and MAC, a valid ICRC and the ring's INA header, while the
 * members all-reduce (one every 0.1 ms). Frames a member never sends (802.1Q-tagged, QinQ, to the broadcast MAC) are refused by the
 * appliance, counted, and the ring goes on with exact sums. A flood of untagged unicast frames, byte for byte what
 * rank 0 would send, is not told apart: it may stall the ring (no call returns a wrong sum) until it stops, and then
 * the members' next job sums exactly. That case is the switch's (port security, docs/deployment.md).
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class MemberAddressFloodSystemTest
{
    private static final int WORLD = 4;
    private static final int RING = 12;
    private static final int PAYLOAD = 1024;
    private static final int MSG_LEN = 4;
    private static final int WINDOW = 8;
    private static final long BROADCAST = 0xFFFF_FFFF_FFFFL;
    private static TestBed bed;

    /** What the outsider's frames look like; each carries rank 0's source IP and MAC. */
    enum Forgery
    {
        /** One 802.1Q tag (VLAN 5): the bed's switch strips it into metadata and redirects the frame. */
        TAGGED,
        /** 802.1ad 7 outside, 802.1Q 5 inside. */
        QINQ,
        /** To ff:ff:ff:ff:ff:ff. */
        BROADCAST
    }

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.up('f', WORLD, 1500, true);
    }

    @AfterAll
    static void down()
    {
        if (bed != null)
        {
            bed.close();
        }
    }

    @ParameterizedTest(name = "{0}")
    @EnumSource(Forgery.class)
    void shouldRefuseAFloodWithAMembersAddressesInFramesNoMemberSendsAndKeepTheRingGoing(final Forgery forgery)
    {
        final NetReduceConfig config = new NetReduceConfig(RING, WINDOW, MSG_LEN, PAYLOAD,
            TimeUnit.SECONDS.toNanos(5));
        final int elements = 160 * config.dataBytesPerMessage() / Float.BYTES;
        try (Appliance appliance = Appliance.start(bed, 0.0,
                Appliance.ringJob("flooded", RING, "fp32", WORLD, WINDOW, MSG_LEN, PAYLOAD));
            WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PAYLOAD)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes());
            AfPacketPort outsiderPort = WorkerRing.openPort(bed.outsiderNamespace()))
        {
            final AllReduce[] ops = new AllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.link(r), config);
            }
            final Flood flood = new Flood(outsiderPort, ring.link(1).receiveQp().qpn(), forgery);
            for (int call = 0; call < 3; call++)
            {
                // Call 0 binds the members' MACs (160 sums); calls 1 and 2 run under the flood.
                final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, call);
                final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, call == 0 ? () -> 0 : flood,
                    TimeUnit.SECONDS.toNanos(60));
                assertThat(outcome.allSucceeded()).as("%s call %d:%s", forgery, call, outcome.describe()).isTrue();
                assertThat(ring.checkRankOrderSum(tensors, call)).as("%s call %d", forgery, call).isNull();
            }
            final DataplaneCounter refusal = forgery == Forgery.BROADCAST ? DataplaneCounter.DROP_NOT_UNICAST :
                DataplaneCounter.DROP_VLAN_TAGGED;
            System.out.printf("%s: %d forged frames sent, appliance %s %d, run_in_progress %d, restarts %d%n",
                forgery, flood.sent(), refusal.reason(), appliance.counter(refusal),
                appliance.counter(DataplaneCounter.DROP_RUN_IN_PROGRESS),
                appliance.counter(DataplaneCounter.RING_RESTARTS));
            assertThat(flood.sent()).as("forged frames sent").isGreaterThan(50);
            assertThat(appliance.counter(refusal)).as("forged frames refused, counted").isPositive();
            assertThat(appliance.counter(DataplaneCounter.RING_RESTARTS)).as("ring restarts").isZero();
        }
    }

    @Test
    void shouldNeverSumWrongWhileAHostFloodsTheVeryFramesAMemberWouldSendAndRecoverWhenItStops()
    {
        final NetReduceConfig config = new NetReduceConfig(RING + 1, WINDOW, MSG_LEN, PAYLOAD,
            TimeUnit.SECONDS.toNanos(3));
        final int elements = 40 * config.dataBytesPerMessage() / Float.BYTES;
        try (Appliance appliance = Appliance.start(bed, 0.0,
                Appliance.ringJob("forged", RING + 1, "fp32", WORLD, WINDOW, MSG_LEN, PAYLOAD));
            AfPacketPort outsiderPort = WorkerRing.openPort(bed.outsiderNamespace()))
        {
            int failedCalls = 0;
            try (WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PAYLOAD)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes()))
            {
                final AllReduce[] ops = new AllReduce[WORLD];
                for (int r = 0; r < WORLD; r++)
                {
                    ops[r] = new NetReduceAllReduce(ring.link(r), config);
                }
                final Flood flood = new Flood(outsiderPort, ring.link(1).receiveQp().qpn(), null);
                for (int call = 0; call < 3; call++)
                {
                    final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, call);
                    final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, call == 0 ? () -> 0 : flood,
                        TimeUnit.SECONDS.toNanos(60));
                    for (int r = 0; r < WORLD; r++)
                    {
                        if (outcome.failures()[r] != null)
                        {
                            continue;
                        }
                        // A rank that returned holds the exact sum: the flood can stall, never falsify.
                        assertThat(ring.checkRankOrderSum(tensors, call)).as("call %d", call).isNull();
                    }
                    failedCalls += outcome.allSucceeded() ? 0 : 1;
                    if (!outcome.allSucceeded())
                    {
                        break;
                    }
                }
                System.out.printf("valid forged first packets: %d sent, calls failed %d, appliance restarts %d, " +
                    "run_in_progress %d, stale %d%n", flood.sent(), failedCalls,
                    appliance.counter(DataplaneCounter.RING_RESTARTS),
                    appliance.counter(DataplaneCounter.DROP_RUN_IN_PROGRESS),
                    appliance.counter(DataplaneCounter.DROP_STALE_CONNECTION));
            }
            // The flood has stopped: the members' next job (new queue pairs) sums exactly, with no operator action.
            try (WorkerRing again = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PAYLOAD)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes()))
            {
                final AllReduce[] ops = new AllReduce[WORLD];
                for (int r = 0; r < WORLD; r++)
                {
                    ops[r] = new NetReduceAllReduce(again.link(r), config);
                }
                for (int call = 0; call < 2; call++)
                {
                    final Tensor[] tensors = again.inputs(ElementType.FP32, elements, call);
                    final WorkerRing.Outcome outcome = again.allReduce(ops, tensors, () -> 0,
                        TimeUnit.SECONDS.toNanos(60));
                    assertThat(outcome.allSucceeded()).as("after the flood, call %d:%s", call, outcome.describe())
                        .isTrue();
                    assertThat(again.checkRankOrderSum(tensors, call)).as("after the flood, call %d", call).isNull();
                }
            }
        }
    }

    /**
     * The outsider's sender: every 0.1 ms one message's first packet as rank 0 would send it towards rank 1's real
     * receive QP (rank 0's IP and MAC, rank 1's IP and MAC, a PSN of its own, valid ICRC, MsgIDs cycling over the
     * window's slots, gradients of 1e30), shaped as {@code forgery} says (null: untouched).
     */
    static final class Flood implements IntSupplier
    {
        private final AfPacketPort port;
        private final Forgery forgery;
        private final RingWorker forger;
        private final byte[] poison;
        private final UnsafeBuffer frame = new UnsafeBuffer(new byte[0]);
        private long next;
        private long lastNs = System.nanoTime();
        private long sent;

        Flood(final AfPacketPort port, final int rank1ReceiveQp, final Forgery forgery)
        {
            this.port = port;
            this.forgery = forgery;
            final List<RingMember> members = new ArrayList<>();
            for (int r = 0; r < WORLD; r++)
            {
                members.add(new RingMember(r, TestBed.workerIp(r)));
            }
            final RingDefinition definition = new RingDefinition(RING, "forged", ElementType.FP32, WINDOW, MSG_LEN,
                PAYLOAD, members);
            forger = new RingWorker(definition, 0, rank1ReceiveQp, 0x5A5A5A, TestBed.workerMac(0),
                forgery == Forgery.BROADCAST ? BROADCAST : TestBed.workerMac(1));
            poison = new byte[forger.gradientBytes()];
            final ByteBuffer values = ByteBuffer.wrap(poison).order(ByteOrder.LITTLE_ENDIAN);
            while (values.remaining() >= Float.BYTES)
            {
                values.putFloat(1.0e30f);
            }
        }

        long sent()
        {
            return sent;
        }

        @Override
        public int getAsInt()
        {
            final long now = System.nanoTime();
            if (now - lastNs < 100_000)
            {
                return 0;
            }
            lastNs = now;
            final byte[] first = forger.message(next++ % (2 * WINDOW), poison).getFirst();
            final byte[] bytes = forgery == Forgery.TAGGED ? withTags(first, 0x8100, 5) :
                forgery == Forgery.QINQ ? withTags(first, 0x88A8, 7, 0x8100, 5) : first;
            frame.wrap(bytes);
            if (port.send(frame, 0, bytes.length))
            {
                sent++;
            }
            port.flush();
            return 1;
        }
    }

    /**
     * @param tags pairs of (TPID, VLAN id), outermost first, inserted after the two MACs.
     */
    static byte[] withTags(final byte[] frame, final int... tags)
    {
        final int extra = tags.length / 2 * 4;
        final byte[] tagged = new byte[frame.length + extra];
        System.arraycopy(frame, 0, tagged, 0, 12);
        for (int i = 0; i < tags.length; i += 2)
        {
            final int at = 12 + i * 2;
            tagged[at] = (byte)(tags[i] >>> 8);
            tagged[at + 1] = (byte)tags[i];
            tagged[at + 2] = (byte)(tags[i + 1] >>> 8);
            tagged[at + 3] = (byte)tags[i + 1];
        }
        System.arraycopy(frame, 12, tagged, 12 + extra, frame.length - 12);
        return tagged;
    }
}
