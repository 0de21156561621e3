package io.netreduce.systemtests;

import io.netreduce.controlplane.api.ApiClient;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.AllReduceException;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.rc.RcConfig;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What the ring's traffic must survive on the test bed: a host on the same switch that is not a member sending
 * crafted ring packets, and the ring being removed from the appliance in the middle of a job.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class RingIntegritySystemTest
{
    private static final int WORLD = 4;
    private static final int RING = 9;
    private static final int PAYLOAD = 1024;
    private static final int MSG_LEN = 4;
    private static final int WINDOW = 8;
    private static final long OUTSIDER_MAC = 0x02_77_00_00_00_64L;
    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.up('i', WORLD, 1500, true);
    }

    @AfterAll
    static void down()
    {
        if (bed != null)
        {
            bed.close();
        }
    }

    @Test
    void shouldKeepResultsExactWhileANonMemberSendsPacketsClaimingAMembersRank()
    {
        final NetReduceConfig config = new NetReduceConfig(RING, WINDOW, MSG_LEN, PAYLOAD,
            TimeUnit.SECONDS.toNanos(10));
        final int elements = 80 * config.dataBytesPerMessage() / Float.BYTES;
        try (Appliance appliance = Appliance.start(bed, 0.0,
                Appliance.ringJob("guarded", RING, "fp32", WORLD, WINDOW, MSG_LEN, PAYLOAD));
            WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PAYLOAD)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes());
            AfPacketPort outsiderPort = WorkerRing.openPort(bed.outsiderNamespace()))
        {
            // The intruder claims rank 1 from its own address, towards rank 2's real receive QP and MAC, with the
            // ring's own MsgIDs, and a gradient that would wreck every sum it got into.
            final List<RingMember> members = new ArrayList<>();
            for (int r = 0; r < WORLD; r++)
            {
                members.add(new RingMember(r, r == 1 ? TestBed.address(TestBed.OUTSIDER_IP) : TestBed.workerIp(r)));
            }
            final RingDefinition claimed = new RingDefinition(RING, "guarded",
                io.netreduce.protocol.element.ElementType.FP32, WINDOW, MSG_LEN, PAYLOAD, members);
            final RingWorker intruder = new RingWorker(claimed, 1, ring.link(2).receiveQp().qpn(), 77,
                OUTSIDER_MAC, TestBed.workerMac(2));
            final byte[] poison = new byte[intruder.gradientBytes()];
            final ByteBuffer values = ByteBuffer.wrap(poison).order(ByteOrder.LITTLE_ENDIAN);
            while (values.remaining() >= Float.BYTES)
            {
                values.putFloat(1.0e30f);
            }
            final UnsafeBuffer frame = new UnsafeBuffer(new byte[0]);
            final long[] next = { 0, System.nanoTime() };
            final long[] sent = { 0 };
            // One crafted message per 0.5 ms, MsgIDs cycling through the window the ring is using.
            final java.util.function.IntSupplier sendCrafted = () ->
            {
                final long now = System.nanoTime();
                if (now - next[1] < 500_000)
                {
                    return 0;
                }
                next[1] = now;
                for (final byte[] bytes : intruder.message(next[0]++ % (2 * WINDOW), poison))
                {
                    frame.wrap(bytes);
                    if (outsiderPort.send(frame, 0, bytes.length))
                    {
                        sent[0]++;
                    }
                }
                outsiderPort.flush();
                return 1;
            };

            final AllReduce[] ops = new AllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.link(r), config);
            }
            for (int call = 0; call < 3; call++)
            {
                final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, call);
                final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, sendCrafted,
                    TimeUnit.SECONDS.toNanos(60));
                assertThat(outcome.allSucceeded()).as("call %d:%s", call, outcome.describe()).isTrue();
                assertThat(ring.checkRankOrderSum(tensors, call)).as("call %d", call).isNull();
            }
            assertThat(sent[0]).as("crafted packets sent").isPositive();
            assertThat(appliance.counter(DataplaneCounter.DROP_SPOOFED)).as("first packets refused as spoofed")
                .isPositive();
        }
    }

    @Test
    void shouldLetTheMembersRunExactlyAfterAStrangerSentAMembersFirstPacketOnAFreshRing()
    {
        // Issue 15's crafted frame: from a host on the switch with its own MAC, a first packet of message 0 with
        // rank 1's address towards rank 2's receive QP, valid ICRC and INA header, sent before the members' job
        // starts (no MAC configured, none bound yet). It used to become rank 1's connection and stall the ring;
        // now the real rank takes its place back and every call is exact, with no operator action.
        final int ring9 = RING + 1;
        final NetReduceConfig config = new NetReduceConfig(ring9, WINDOW, MSG_LEN, PAYLOAD,
            TimeUnit.SECONDS.toNanos(10));
        final int elements = 40 * config.dataBytesPerMessage() / Float.BYTES;
        try (Appliance appliance = Appliance.start(bed, 0.0,
                Appliance.ringJob("fresh", ring9, "fp32", WORLD, WINDOW, MSG_LEN, PAYLOAD));
            WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PAYLOAD)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes());
            AfPacketPort outsiderPort = WorkerRing.openPort(bed.outsiderNamespace()))
        {
            final List<RingMember> members = new ArrayList<>();
            for (int r = 0; r < WORLD; r++)
            {
                members.add(new RingMember(r, TestBed.workerIp(r)));
            }
            final RingDefinition definition = new RingDefinition(ring9, "fresh",
                io.netreduce.protocol.element.ElementType.FP32, WINDOW, MSG_LEN, PAYLOAD, members);
            final RingWorker stranger = new RingWorker(definition, 1, ring.link(2).receiveQp().qpn(), 77,
                OUTSIDER_MAC, TestBed.workerMac(2));
            final byte[] poison = new byte[stranger.gradientBytes()];
            final ByteBuffer values = ByteBuffer.wrap(poison).order(ByteOrder.LITTLE_ENDIAN);
            while (values.remaining() >= Float.BYTES)
            {
                values.putFloat(1.0e30f);
            }
            final UnsafeBuffer frame = new UnsafeBuffer(new byte[0]);
            int sent = 0;
            for (final byte[] bytes : stranger.message(0, poison))
            {
                frame.wrap(bytes);
                sent += outsiderPort.send(frame, 0, bytes.length) ? 1 : 0;
            }
            outsiderPort.flush();
            assertThat(sent).as("crafted frames sent").isPositive();

            final AllReduce[] ops = new AllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.link(r), config);
            }
            for (int call = 0; call < 3; call++)
            {
                final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, call);
                final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, () -> 0,
                    TimeUnit.SECONDS.toNanos(60));
                assertThat(outcome.allSucceeded()).as("call %d:%s", call, outcome.describe()).isTrue();
                assertThat(ring.checkRankOrderSum(tensors, call)).as("call %d", call).isNull();
            }
            assertThat(appliance.counter(DataplaneCounter.RING_CONNECTIONS_REPLACED))
                .as("the stranger's connection replaced by the member's").isPositive();
        }
    }

    @Test
    void shouldFailEveryRankWithAClearErrorWhenTheRingIsRemovedMidJob()
    {
        final long timeoutNs = TimeUnit.SECONDS.toNanos(3);
        final NetReduceConfig config = new NetReduceConfig(RING, WINDOW, MSG_LEN, PAYLOAD, timeoutNs);
        // Long enough that the removal lands in the middle: 2000 messages.
        final int elements = 2000 * config.dataBytesPerMessage() / Float.BYTES;
        try (Appliance appliance = Appliance.start(bed, 0.0,
                Appliance.ringJob("doomed", RING, "fp32", WORLD, WINDOW, MSG_LEN, PAYLOAD));
            WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PAYLOAD)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes()))
        {
            final NetReduceAllReduce[] ops = new NetReduceAllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.link(r), config);
            }
            final CompletableFuture<ApiClient.Response> removal = new CompletableFuture<>();
            final long[] removedAtMessages = { -1 };
            final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, 0);
            final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, () ->
            {
                if (removedAtMessages[0] < 0 && ops[0].messagesPosted() >= 100)
                {
                    removedAtMessages[0] = ops[0].messagesPosted();
                    // Off the driving thread: the workers keep running while the control plane acts.
                    CompletableFuture.runAsync(() -> removal.complete(appliance.request("DELETE", "/v1/jobs/doomed",
                        null, null)));
                    return 1;
                }
                return 0;
            }, TimeUnit.SECONDS.toNanos(30));

            assertThat(removedAtMessages[0]).as("rank 0 posted 100 messages before the job ended; %s",
                outcome.describe()).isPositive();
            assertThat(removal.orTimeout(30, TimeUnit.SECONDS).join().status()).as("DELETE /v1/jobs/doomed")
                .isEqualTo(200);
            // Bounded: at most the no-result timeout after the last result, plus slack for a loaded machine.
            assertThat(outcome.elapsedNs()).isLessThan(TimeUnit.SECONDS.toNanos(25));
            int unaggregated = 0;
            for (int r = 0; r < WORLD; r++)
            {
                final AllReduceException failure = outcome.failures()[r];
                assertThat(failure).as("rank %d must fail, not return a tensor", r).isNotNull();
                assertThat(failure.getMessage()).as("rank %d", r)
                    .containsAnyOf("arrived unaggregated", "no result from the appliance");
                if (failure.getMessage().contains("arrived unaggregated"))
                {
                    unaggregated++;
                }
            }
            assertThat(unaggregated).as("ranks that saw their predecessor's raw message and said so").isPositive();
            assertThat(appliance.counter(DataplaneCounter.PASS_THROUGH_UNKNOWN_RING)).isPositive();
        }
    }
}
