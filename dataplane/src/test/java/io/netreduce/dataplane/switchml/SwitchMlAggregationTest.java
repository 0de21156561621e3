package io.netreduce.dataplane.switchml;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.protocol.wire.Ecn;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * SwitchML jobs on the dataplane, against p4app-switchML's P4 program (udp_receiver, bitmap_checker,
 * workers_counter, processor, exponents, udp_sender): worker packets built as the published DPDK client builds
 * them, results compared byte for byte with frames built here from udp_sender.p4's assignments.
 */
class SwitchMlAggregationTest
{
    private static final long APPLIANCE_MAC = 0x02_00_00_00_00_AAL;
    private static final int APPLIANCE_IP = 0x0A_4D_00_FE; // 10.77.0.254
    private static final int SWITCHML_PORT = 0xBEE0;
    private static final int JOB = 7;
    /** Ethernet, IPv4 without options, UDP, then the message type and size byte. */
    private static final int JOB_NUMBER_OFFSET = 14 + 20 + 8 + 1;

    private static long workerMac(final int w)
    {
        return 0x02_00_00_00_01_00L + w;
    }

    private static int workerIp(final int w)
    {
        return 0x0A_4D_00_01 + w;
    }

    private static int workerPort(final int w)
    {
        return 20_000 + w;
    }

    private static SwitchMlJobDefinition job(final int workers, final int elements, final int pool)
    {
        final List<SwitchMlJobDefinition.Worker> list = new ArrayList<>();
        for (int w = 0; w < workers; w++)
        {
            list.add(new SwitchMlJobDefinition.Worker(workerIp(w), SwitchMlJobDefinition.ANY_MAC));
        }
        return new SwitchMlJobDefinition(JOB, list, elements, pool, APPLIANCE_MAC, APPLIANCE_IP);
    }

    private static byte[] packet(
        final int worker, final int tsi, final int poolIndex, final int e0, final int e1, final int[] values)
    {
        return packet(worker, workerIp(worker), JOB, tsi, poolIndex, e0, e1, values);
    }

    private static byte[] packet(
        final int worker, final int srcIp, final int job, final int tsi, final int poolIndex, final int e0,
        final int e1, final int[] values)
    {
        final byte[] frame = new byte[SwitchMlPacketWriter.frameLength(values.length)];
        final UnsafeBuffer buffer = new UnsafeBuffer(frame);
        SwitchMlPacketWriter.writeHeaders(buffer, 0, workerMac(worker), APPLIANCE_MAC, srcIp, APPLIANCE_IP,
            workerPort(worker), SWITCHML_PORT, job, tsi, poolIndex, e0, e1, values.length);
        SwitchMlPacketWriter.writeElements(buffer, 0, values, 0, values.length);
        return frame;
    }

    /**
     * The result udp_sender.p4 emits for worker {@code worker}, built field by field from its assignments.
     */
    private static byte[] expectedResult(
        final int worker, final int triggeringWorker, final int sizeCode, final int tsi, final int slot,
        final int set, final int e0, final int e1, final int[] sum)
    {
        final int udpLength = 8 + 8 + 2 + 4 * sum.length;
        final ByteBuffer b = ByteBuffer.allocate(14 + 20 + udpLength).order(ByteOrder.BIG_ENDIAN);
        putMac(b, workerMac(worker));
        putMac(b, APPLIANCE_MAC);
        b.putShort((short)0x0800);
        final int ip = b.position();
        b.put((byte)0x45).put((byte)0).putShort((short)(20 + udpLength)).putShort((short)0).putShort((short)0)
            .put((byte)64).put((byte)17).putShort((short)0).putInt(APPLIANCE_IP).putInt(workerIp(worker));
        int sum16 = 0;
        for (int i = 0; i < 20; i += 2)
        {
            sum16 += b.getShort(ip + i) & 0xFFFF;
        }
        while ((sum16 >>> 16) != 0)
        {
            sum16 = (sum16 & 0xFFFF) + (sum16 >>> 16);
        }
        b.putShort(ip + 10, (short)~sum16);
        // UDP: source = the triggering packet's destination port, destination = its source port, checksum 0.
        b.putShort((short)SWITCHML_PORT).putShort((short)workerPort(triggeringWorker)).putShort((short)udpLength)
            .putShort((short)0);
        b.put((byte)((1 << 4) | sizeCode)).put((byte)JOB).putInt(tsi).putShort((short)(slot | (set << 15)));
        b.put((byte)e0).put((byte)e1);
        for (final int v : sum)
        {
            b.putInt(v);
        }
        return b.array();
    }

    private static void putMac(final ByteBuffer b, final long mac)
    {
        for (int i = 5; i >= 0; i--)
        {
            b.put((byte)(mac >>> (8 * i)));
        }
    }

    private static int[] values(final SplittableRandom random, final int n)
    {
        final int[] v = new int[n];
        for (int i = 0; i < n; i++)
        {
            v[i] = random.nextInt();
        }
        return v;
    }

    private static int[] sum(final int[]... contributions)
    {
        final int[] s = new int[contributions[0].length];
        for (final int[] c : contributions)
        {
            for (int i = 0; i < s.length; i++)
            {
                s[i] += c[i];
            }
        }
        return s;
    }

    @ParameterizedTest(name = "{0} elements")
    @ValueSource(ints = { 64, 256, 1024 })
    void shouldAnswerEveryWorkerByteForByteAsTheP4ProgramWhenTheLastContributionArrives(final int elements)
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(3, elements, 16)));
            final SplittableRandom random = new SplittableRandom(elements);
            final int[][] v = { values(random, elements), values(random, elements), values(random, elements) };
            final int poolIndex = 5 | 0x8000;
            assertThat(harness.process(packet(0, 100, poolIndex, 3, -2, v[0]))).isEmpty();
            assertThat(harness.process(packet(2, 102, poolIndex, 7, -9, v[2]))).isEmpty();
            final List<byte[]> results = harness.process(packet(1, 101, poolIndex, 1, 4, v[1]));

            final int sizeCode = elements < 256 ? 1 : 3;
            assertThat(results).hasSize(3);
            for (int w = 0; w < 3; w++)
            {
                assertThat(results.get(w)).as("result for worker " + w)
                    .isEqualTo(expectedResult(w, 1, sizeCode, 101, 5, 1, 7, 4, sum(v[0], v[1], v[2])));
            }
            assertThat(harness.counter(DataplaneCounter.SWITCHML_PACKETS)).isEqualTo(3);
            assertThat(harness.counter(DataplaneCounter.SWITCHML_COMPLETIONS)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.SWITCHML_RESULTS)).isEqualTo(3);
        }
    }

    private static byte[] withEcn(final byte[] frame, final int codepoint)
    {
        Ecn.set(new UnsafeBuffer(frame), 14, codepoint);
        return frame;
    }

    /**
     * PANAMA §4.2 on SwitchML: the results of a slot carry CE when any contribution did, else ECT(0)/ECT(1) when
     * the contributions were ECN-capable, else Not-ECT; the IPv4 checksum stays valid and nothing else changes.
     */
    @ParameterizedTest(name = "ECN {0}, {1}, {2} -> {3}")
    @CsvSource({
        "0, 0, 0, 0",
        "2, 2, 2, 2",
        "1, 1, 1, 1",
        "2, 3, 2, 3",
        "0, 0, 3, 3",
        "1, 2, 1, 2",
    })
    void shouldOrTheContributionsEcnIntoEveryResult(final int e0, final int e1, final int e2, final int expected)
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(3, 64, 4)));
            final SplittableRandom random = new SplittableRandom(7);
            final int[][] v = { values(random, 64), values(random, 64), values(random, 64) };
            assertThat(harness.process(withEcn(packet(0, 1, 3, 0, 0, v[0]), e0))).isEmpty();
            assertThat(harness.process(withEcn(packet(1, 1, 3, 0, 0, v[1]), e1))).isEmpty();
            final List<byte[]> results = harness.process(withEcn(packet(2, 1, 3, 0, 0, v[2]), e2));
            assertThat(results).hasSize(3);
            for (int w = 0; w < 3; w++)
            {
                final byte[] result = results.get(w);
                final UnsafeBuffer buffer = new UnsafeBuffer(result);
                assertThat(Ecn.of(buffer, 14)).as("worker %d", w).isEqualTo(expected);
                assertThat(Ipv4Header.computeChecksum(buffer, 14)).isZero();
                // Otherwise the result is udp_sender.p4's, byte for byte.
                assertThat(withEcn(result.clone(), 0)).isEqualTo(expectedResult(w, 2, 1, 1, 3, 0, 0, 0,
                    sum(v[0], v[1], v[2])));
            }
            // Two rounds later the slot's set 0 starts afresh: unmarked contributions, unmarked results.
            for (final int poolIndex : new int[] { 3 | 0x8000, 3 })
            {
                harness.process(withEcn(packet(0, 2, poolIndex, 0, 0, v[0]), Ecn.ECT_0));
                harness.process(withEcn(packet(1, 2, poolIndex, 0, 0, v[1]), Ecn.ECT_0));
                final List<byte[]> next = harness.process(withEcn(packet(2, 2, poolIndex, 0, 0, v[2]), Ecn.ECT_0));
                assertThat(next).hasSize(3);
                for (final byte[] result : next)
                {
                    assertThat(Ecn.of(new UnsafeBuffer(result), 14)).isEqualTo(Ecn.ECT_0);
                }
            }
        }
    }

    @Test
    void shouldAnswerAMarkedRetransmissionToACompleteSlotWithAMarkedResult()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            final SplittableRandom random = new SplittableRandom(8);
            final int[] a = values(random, 64);
            final int[] b = values(random, 64);
            harness.process(withEcn(packet(0, 1, 2, 0, 0, a), Ecn.ECT_0));
            for (final byte[] result : harness.process(withEcn(packet(1, 1, 2, 0, 0, b), Ecn.ECT_0)))
            {
                assertThat(Ecn.of(new UnsafeBuffer(result), 14)).isEqualTo(Ecn.ECT_0);
            }
            final List<byte[]> again = harness.process(withEcn(packet(0, 9, 2, 0, 0, a), Ecn.CE));
            assertThat(again).hasSize(1);
            assertThat(Ecn.of(new UnsafeBuffer(again.getFirst()), 14)).isEqualTo(Ecn.CE);
            assertThat(Ipv4Header.computeChecksum(new UnsafeBuffer(again.getFirst()), 14)).isZero();
        }
    }

    @Test
    void shouldAnswerARetransmissionToACompleteSlotWithTheStoredResultToItsSenderOnly()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            final SplittableRandom random = new SplittableRandom(1);
            final int[] a = values(random, 64);
            final int[] b = values(random, 64);
            harness.process(packet(0, 1, 2, 0, 0, a));
            assertThat(harness.process(packet(1, 1, 2, 0, 0, b))).hasSize(2);

            // Worker 0 lost its result and resends: its own answer only, from the stored sum, its TSI echoed.
            final List<byte[]> again = harness.process(packet(0, 9, 2, 0, 0, a));
            assertThat(again).hasSize(1);
            assertThat(again.getFirst()).isEqualTo(expectedResult(0, 0, 1, 9, 2, 0, 0, 0, sum(a, b)));
            assertThat(harness.counter(DataplaneCounter.SWITCHML_RESULTS_RESENT)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.SWITCHML_PACKETS)).isEqualTo(2);
        }
    }

    @Test
    void shouldDropARetransmissionToAnIncompleteSlotAndNeverAddItTwice()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            final SplittableRandom random = new SplittableRandom(2);
            final int[] a = values(random, 64);
            final int[] b = values(random, 64);
            harness.process(packet(0, 1, 0, 0, 0, a));
            assertThat(harness.process(packet(0, 1, 0, 0, 0, a))).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_SWITCHML_PENDING)).isEqualTo(1);
            final List<byte[]> results = harness.process(packet(1, 1, 0, 0, 0, b));
            assertThat(results).hasSize(2);
            assertThat(results.get(1)).isEqualTo(expectedResult(1, 1, 1, 1, 0, 0, 0, 0, sum(a, b)));
        }
    }

    @Test
    void shouldReuseASlotThroughItsShadowSetsWithoutAReset()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 1)));
            final SplittableRandom random = new SplittableRandom(3);
            // Rounds alternate sets 0, 1, 0, 1 on slot 0, as the client's pool does; every round completes exactly.
            for (int round = 0; round < 6; round++)
            {
                final int poolIndex = (round & 1) == 0 ? 0 : 0x8000;
                final int[] a = values(random, 64);
                final int[] b = values(random, 64);
                assertThat(harness.process(packet(1, round, poolIndex, 0, 0, b))).as("round " + round).isEmpty();
                final List<byte[]> results = harness.process(packet(0, round, poolIndex, 0, 0, a));
                assertThat(results).as("round " + round).hasSize(2);
                assertThat(results.getFirst())
                    .isEqualTo(expectedResult(0, 0, 1, round, 0, round & 1, 0, 0, sum(a, b)));
            }
            assertThat(harness.counter(DataplaneCounter.SWITCHML_COMPLETIONS)).isEqualTo(6);
        }
    }

    @Test
    void shouldCountAndDropWhatIsNotAWorkersValidPacket()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            final int[] v = new int[64];
            Arrays.fill(v, 1);
            // A stranger's address, a wrong element count, a slot outside the pool.
            assertThat(harness.process(packet(0, 0x0A_4D_00_63, JOB, 0, 0, 0, 0, v))).isEmpty();
            assertThat(harness.process(packet(0, 0, 0, 0, 0, new int[32]))).isEmpty();
            assertThat(harness.process(packet(0, 0, 4, 0, 0, v))).isEmpty();
            final byte[] truncated = Arrays.copyOf(packet(0, 0, 0, 0, 0, v), 60);
            assertThat(harness.process(truncated)).isEmpty();
            assertThat(harness.counter(DataplaneCounter.DROP_SWITCHML_NOT_MEMBER)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.DROP_SWITCHML_WRONG_SIZE)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.DROP_SWITCHML_BAD_POOL_INDEX)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.DROP_SWITCHML_MALFORMED)).isEqualTo(1);
            assertThat(harness.counter(DataplaneCounter.SWITCHML_PACKETS)).isZero();
            // Nothing of it reached a slot: the real pair still sums exactly.
            harness.process(packet(0, 0, 0, 0, 0, v));
            final List<byte[]> results = harness.process(packet(1, 0, 0, 0, 0, v));
            final int[] two = new int[64];
            Arrays.fill(two, 2);
            assertThat(results.getFirst()).isEqualTo(expectedResult(0, 1, 1, 0, 0, 0, 0, 0, two));
        }
    }

    @Test
    void shouldFindTheJobByTheWorkersAddressAndEchoTheClientsJobNumber()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            // The published client puts its own per-call id in the job number; the appliance's id for the job is 7.
            final int callId = 0x42;
            final int[] a = new int[64];
            final int[] b = new int[64];
            Arrays.fill(a, 3);
            Arrays.fill(b, -1);
            assertThat(harness.process(packet(0, workerIp(0), callId, 5, 1, 0, 0, a))).isEmpty();
            final List<byte[]> results = harness.process(packet(1, workerIp(1), callId, 5, 1, 0, 0, b));
            assertThat(results).hasSize(2);
            final byte[] expected = expectedResult(0, 1, 1, 5, 1, 0, 0, 0, sum(a, b));
            expected[JOB_NUMBER_OFFSET] = (byte)callId;
            assertThat(results.getFirst()).isEqualTo(expected);
        }
    }

    @Test
    void shouldRefuseAJobWithAWorkerThatIsAlreadyAnotherJobs()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            final SwitchMlJobDefinition overlapping = new SwitchMlJobDefinition(JOB + 1,
                List.of(new SwitchMlJobDefinition.Worker(workerIp(1), SwitchMlJobDefinition.ANY_MAC)), 64, 4,
                APPLIANCE_MAC, APPLIANCE_IP);
            assertThatThrownBy(() -> harness.await(harness.proxy().installSwitchMlJob(overlapping)))
                .hasMessageContaining("10.77.0.2 is already in job " + JOB);
            harness.await(harness.proxy().removeSwitchMlJob(JOB));
            harness.await(harness.proxy().installSwitchMlJob(overlapping));
        }
    }

    @Test
    void shouldPassThroughSwitchMlPacketsFromNoJobsWorkerToAnotherHost()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            // No job installed, and not addressed to the appliance's SwitchML address (the writer addresses it to
            // APPLIANCE_IP, so make it someone else's): another switch's SwitchML traffic crossing this one.
            final byte[] frame = packet(0, workerIp(0), 9, 0, 0, 0, 0, new int[64]);
            final UnsafeBuffer view = new UnsafeBuffer(frame);
            view.putInt(14 + 16, 0x0A_4D_00_FD, ByteOrder.BIG_ENDIAN);
            Ipv4Header.updateChecksum(view, 14);
            final List<byte[]> out = harness.process(frame);
            assertThat(out).hasSize(1);
            assertThat(out.getFirst()).isEqualTo(frame);
            assertThat(harness.counter(DataplaneCounter.PASS_THROUGH_SWITCHML_NO_JOB)).isEqualTo(1);
        }
    }

    @Test
    void shouldLeakNoSlotStateIntoTheNextJobWithTheSameNumber()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            final int[] stale = new int[64];
            Arrays.fill(stale, 1000);
            harness.process(packet(0, 0, 3, 5, 5, stale)); // the old job's worker 0 leaves a partial behind
            harness.await(harness.proxy().resetSwitchMlJob(JOB));
            final int[] a = new int[64];
            final int[] b = new int[64];
            Arrays.fill(a, 1);
            Arrays.fill(b, 2);
            assertThat(harness.process(packet(1, 0, 3, 0, 0, b))).isEmpty();
            assertThat(harness.process(packet(0, 0, 3, 0, 0, a)).getFirst())
                .isEqualTo(expectedResult(0, 0, 1, 0, 3, 0, 0, 0, sum(a, b)));

            harness.process(packet(0, 0, 2, 0, 0, stale));
            harness.await(harness.proxy().removeSwitchMlJob(JOB));
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 4)));
            assertThat(harness.process(packet(1, 0, 2, 0, 0, b))).isEmpty();
            assertThat(harness.process(packet(0, 0, 2, 0, 0, a)).getFirst())
                .isEqualTo(expectedResult(0, 0, 1, 0, 2, 0, 0, 0, sum(a, b)));
        }
    }

    @Test
    void shouldRefuseAJobWhoseNumberIsTakenOrWhosePoolExceedsTheBudget()
    {
        try (DataplaneHarness harness = new DataplaneHarness(1, false, 64 * 1024))
        {
            harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 8)));
            assertThatThrownBy(() -> harness.await(harness.proxy().installSwitchMlJob(job(2, 64, 8))))
                .hasMessageContaining("already installed");
            harness.await(harness.proxy().removeSwitchMlJob(JOB));
            assertThatThrownBy(() -> harness.await(harness.proxy().installSwitchMlJob(job(4, 1024, 64))))
                .hasMessageContaining("aggregator memory");
        }
    }

    /**
     * Workers as the client runs them: a pool of outstanding slots per worker, each packet retransmitted on
     * timeout until its result arrives, losses at the appliance's input and on the way back; every result must be
     * the exact int32 sum, and no contribution is ever added twice.
     */
    @ParameterizedTest(name = "loss {0}, W = {1}")
    @CsvSource({ "0.0, 4", "0.01, 4", "0.05, 4", "0.05, 8" })
    void shouldSumExactlyUnderLossWithRetransmissions(final double loss, final int workers)
    {
        final int elements = 64;
        final int outstanding = 8;
        final int packets = 400;
        try (DataplaneHarness harness = new DataplaneHarness(1, false, 1L << 30, loss, 42))
        {
            harness.await(harness.proxy().installSwitchMlJob(job(workers, elements, outstanding)));
            final SplittableRandom random = new SplittableRandom(7);
            final int[][][] data = new int[workers][packets][];
            for (int w = 0; w < workers; w++)
            {
                for (int p = 0; p < packets; p++)
                {
                    data[w][p] = values(random, elements);
                }
            }
            final SplittableRandom lossBack = new SplittableRandom(11);
            final int[][] received = new int[packets][];
            final boolean[][] done = new boolean[workers][packets];
            final int[] next = new int[workers];
            final Map<Integer, Integer> resends = new HashMap<>();
            int rounds = 0;
            while (!allDone(done) && rounds++ < 10_000)
            {
                // Each worker (re)sends every packet of its window it has no result for: a timeout per round.
                for (int w = 0; w < workers; w++)
                {
                    while (next[w] < packets && next[w] - firstOpen(done[w]) < outstanding)
                    {
                        next[w]++;
                    }
                    for (int p = firstOpen(done[w]); p < next[w]; p++)
                    {
                        if (!done[w][p])
                        {
                            final int i = p % (2 * outstanding);
                            final int poolIndex = i < outstanding ? i : (i - outstanding) | 0x8000;
                            harness.port(0).inject(packet(w, p, poolIndex, 0, 0, data[w][p]));
                            resends.merge(w, 1, Integer::sum);
                        }
                    }
                }
                for (final byte[] result : harness.runAndDrain(0))
                {
                    if (lossBack.nextDouble() < loss)
                    {
                        continue;
                    }
                    final UnsafeBuffer buffer = new UnsafeBuffer(result);
                    final int w = buffer.getByte(33) - 1; // last byte of the destination IP: worker w is .(w + 1)
                    final int p = buffer.getInt(14 + 20 + 8 + 2, ByteOrder.BIG_ENDIAN);
                    final int[] sum = new int[elements];
                    for (int e = 0; e < elements; e++)
                    {
                        sum[e] = SwitchMlPacketWriter.element(buffer, 0, e);
                    }
                    if (received[p] == null)
                    {
                        received[p] = sum;
                    }
                    assertThat(sum).as("packet " + p + " at worker " + w).isEqualTo(received[p]);
                    done[w][p] = true;
                }
            }
            assertThat(allDone(done)).as("every worker got every result").isTrue();
            for (int p = 0; p < packets; p++)
            {
                final int[][] contributions = new int[workers][];
                for (int w = 0; w < workers; w++)
                {
                    contributions[w] = data[w][p];
                }
                assertThat(received[p]).as("sum of packet " + p).isEqualTo(sum(contributions));
            }
            assertThat(harness.counter(DataplaneCounter.SWITCHML_PACKETS)).isEqualTo((long)workers * packets);
            if (loss > 0)
            {
                assertThat(harness.counter(DataplaneCounter.DROP_INJECTED)).isPositive();
            }
        }
    }

    private static boolean allDone(final boolean[][] done)
    {
        for (final boolean[] worker : done)
        {
            if (firstOpen(worker) < worker.length)
            {
                return false;
            }
        }
        return true;
    }

    private static int firstOpen(final boolean[] done)
    {
        int p = 0;
        while (p < done.length && done[p])
        {
            p++;
        }
        return p;
    }
}
