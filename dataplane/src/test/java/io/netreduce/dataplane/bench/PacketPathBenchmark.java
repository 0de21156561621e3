package io.netreduce.dataplane.bench;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortCounters;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/**
 * The whole per-packet path on an in-memory port, with every measured frame new aggregation work: parse → CLT →
 * ICRC check → store → (every W-th packet) sum → W result packets built in the transmit slot → combined ICRC.
 * A ring of 4 ranks, MsgLen 4, window 4, fp32.
 * <p>
 * One invocation feeds a pre-built stream of {@link #MESSAGES} messages (two MsgID cycles, PSNs in order, ranks
 * in step as workers under the window would be) to a ring installed afresh just before it (outside the measured
 * region), so no frame is a replay the appliance has seen. After each invocation the agent's counters must show
 * exactly the aggregations the stream holds and no drop at all, or the benchmark fails: it cannot time the drop
 * path again by accident. One operation = one received gradient packet.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class PacketPathBenchmark
{
    private static final int RANKS = 4;
    private static final int MSG_LEN = 4;
    private static final int WINDOW = 4;
    private static final int MESSAGES = 512;
    private static final int FRAMES = MESSAGES * MSG_LEN * RANKS;
    private static final int BATCH = 64;

    @Param({ "1024", "4096" })
    public int payload;

    private RingDefinition config;
    private DataplaneAgent agent;
    private ReplayPort port;
    private long completedBefore;
    private long dropsBefore;

    @Setup(Level.Trial)
    public void setUp()
    {
        config = Rings.ring(1, RANKS, ElementType.FP32, WINDOW, MSG_LEN, payload);
        final List<byte[]> frames = new ArrayList<>(FRAMES);
        final RingWorker[] workers = new RingWorker[RANKS];
        for (int r = 0; r < RANKS; r++)
        {
            workers[r] = RingWorker.of(config, r, 1000 * r);
        }
        final Random random = new Random(1);
        final byte[][] gradients = new byte[RANKS][];
        for (int r = 0; r < RANKS; r++)
        {
            gradients[r] = Gradients.random(ElementType.FP32, workers[r].gradientBytes(), random);
        }
        for (int m = 0; m < MESSAGES; m++)
        {
            final List<List<byte[]>> perRank = new ArrayList<>();
            for (int r = 0; r < RANKS; r++)
            {
                perRank.add(workers[r].message(m, gradients[r]));
            }
            for (int p = 0; p < MSG_LEN; p++)
            {
                for (int r = 0; r < RANKS; r++)
                {
                    frames.add(perRank.get(r).get(p));
                }
            }
        }
        port = new ReplayPort(frames);
        agent = new DataplaneAgent(new DataplaneContext().ports(List.of(port)).batchSize(BATCH));
    }

    /**
     * A fresh ring and a rewound stream before every invocation (not measured): the first packets then open new
     * connections and every frame is new work.
     */
    @Setup(Level.Invocation)
    public void freshRing()
    {
        agent.proxy().removeRing(config.ringId());
        agent.proxy().installRing(config);
        while (agent.doWork() > 0)
        {
            // apply both commands while the port has nothing to deliver
        }
        port.rewind();
        completedBefore = agent.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED);
        dropsBefore = drops(agent.counters());
    }

    @Benchmark
    @OperationsPerInvocation(FRAMES)
    public int packetPath()
    {
        int work = 0;
        while (port.remaining() > 0)
        {
            work += agent.doWork();
        }
        return work;
    }

    /**
     * Fail the run if the invocation timed anything but the aggregation of every frame it fed.
     */
    @TearDown(Level.Invocation)
    public void checkEveryFrameWasAggregated()
    {
        final long completed = agent.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED) - completedBefore;
        final long drops = drops(agent.counters()) - dropsBefore;
        if (completed != (long)MESSAGES * MSG_LEN || drops != 0 || port.resultFrames() != FRAMES)
        {
            throw new IllegalStateException("the benchmark timed the wrong work: " + completed + " aggregations (" +
                (long)MESSAGES * MSG_LEN + " expected), " + drops + " drops, " + port.resultFrames() +
                " result frames sent (" + FRAMES + " expected); counters " + agent.proxy().counters());
        }
        port.resetResults();
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        agent.onClose();
    }

    private static long drops(final DataplaneCounters counters)
    {
        long drops = 0;
        for (final DataplaneCounter counter : DataplaneCounter.values())
        {
            if (counter.isDrop())
            {
                drops += counters.get(counter);
            }
        }
        return drops + counters.get(DataplaneCounter.PASS_THROUGH) + counters.get(DataplaneCounter.TX_FULL);
    }

    /**
     * Hands over pre-built frames from one direct buffer, as a receive ring would, once per rewind; counts the
     * result frames written into its transmit slot and discards them.
     */
    static final class ReplayPort implements PacketPort
    {
        private final UnsafeBuffer frames;
        private final int[] offsets;
        private final int[] lengths;
        private final PortCounters counters = new PortCounters();
        private final UnsafeBuffer claim = new UnsafeBuffer(ByteBuffer.allocateDirect(16 * 1024));
        private final RoceFrame frame = new RoceFrame();
        private int next;
        private long resultFrames;

        ReplayPort(final List<byte[]> list)
        {
            int total = 0;
            for (final byte[] frame : list)
            {
                total += (frame.length + 63) & ~63;
            }
            frames = new UnsafeBuffer(ByteBuffer.allocateDirect(total));
            offsets = new int[list.size()];
            lengths = new int[list.size()];
            int offset = 0;
            for (int i = 0; i < list.size(); i++)
            {
                frames.putBytes(offset, list.get(i));
                offsets[i] = offset;
                lengths[i] = list.get(i).length;
                offset += (lengths[i] + 63) & ~63;
            }
            next = offsets.length;
        }

        void rewind()
        {
            // The appliance rewrote the InetTag of every first packet to the result tag in place (as it does in
            // a receive ring); put the request tag back so the stream is the one the workers sent.
            for (int i = 0; i < offsets.length; i++)
            {
                if (frame.wrap(frames, offsets[i], lengths[i]) == RoceFrame.OK &&
                    InaHeader.inetTag(frames, frame.payloadOffset()) == InaHeader.RESULT_TAG)
                {
                    InaHeader.inetTag(frames, frame.payloadOffset(), InaHeader.INET_TAG);
                }
            }
            next = 0;
        }

        int remaining()
        {
            return offsets.length - next;
        }

        long resultFrames()
        {
            return resultFrames;
        }

        void resetResults()
        {
            resultFrames = 0;
        }

        @Override
        public String name()
        {
            return "replay";
        }

        @Override
        public int receive(final FrameHandler handler, final int limit)
        {
            final int count = Math.min(limit, offsets.length - next);
            for (int i = 0; i < count; i++)
            {
                handler.onFrame(frames, offsets[next], lengths[next], 0);
                next++;
            }
            return count;
        }

        @Override
        public boolean send(final DirectBuffer buffer, final int offset, final int length)
        {
            resultFrames++;
            return true;
        }

        @Override
        public int tryClaim(final int length)
        {
            return 0;
        }

        @Override
        public MutableDirectBuffer claimBuffer()
        {
            return claim;
        }

        @Override
        public void commit()
        {
            resultFrames++;
        }

        @Override
        public int flush()
        {
            return 0;
        }

        @Override
        public PortCounters counters()
        {
            return counters;
        }

        @Override
        public void close()
        {
        }
    }
}
