package io.netreduce.dataplane.bench;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.agent.DataplaneLanes;
import io.netreduce.dataplane.agent.DataplaneProxy;
import io.netreduce.dataplane.agent.LaneSteering;
import io.netreduce.dataplane.agent.ReplayPort;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.RoceFrame;
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
import org.openjdk.jmh.infra.BenchmarkParams;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

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
 * <p>
 * <b>Lanes.</b> The dataplane is a {@link DataplaneLanes} of {@code lanes} lanes; each JMH thread drives one lane's
 * agent over that lane's own memory port and ring (its own hosts, so the rings share no edge), as the kernel's fanout
 * would feed it. Run with as many threads as lanes ({@code -t 2 -p lanes=2}; the set-up refuses otherwise): the
 * score is the frames of all lanes per second, so 2 lanes against 1 is the scaling of the per-packet path.
 */
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

    /**
     * The lanes, built once per trial; each thread takes the next lane.
     */
    @State(Scope.Benchmark)
    public static class Dataplane
    {
        @Param({ "1024", "4096" })
        public int payload;

        @Param({ "1" })
        public int lanes;

        private DataplaneLanes dataplane;
        private ReplayPort[] ports;
        private RingDefinition[] rings;
        private final AtomicInteger nextLane = new AtomicInteger();

        @Setup(Level.Trial)
        public void setUp(final BenchmarkParams params)
        {
            if (params.getThreads() != lanes)
            {
                throw new IllegalStateException("run with as many threads as lanes: -t " + lanes + " (got " +
                    params.getThreads() + ")");
            }
            ports = new ReplayPort[lanes];
            rings = new RingDefinition[lanes];
            final List<List<PacketPort>> lanePorts = new ArrayList<>();
            for (int lane = 0; lane < lanes; lane++)
            {
                rings[lane] = ring(lane, payload);
                ports[lane] = ReplayPort.of(stream(rings[lane]));
                lanePorts.add(List.of(ports[lane]));
            }
            // ecnBacklog 0: a ReplayPort reports all its loaded frames as a receive backlog (for the daemon's
            // warm-up), which the lanes' own ECN marking would read as a backed-up ring; the path measured here is an
            // unloaded appliance's, as before ReplayPort reported it
            dataplane = new DataplaneLanes(new DataplaneContext().batchSize(BATCH).ecnBacklog(0), lanePorts,
                LaneSteering.NONE);
        }

        @TearDown(Level.Trial)
        public void tearDown()
        {
            dataplane.agents().forEach(DataplaneAgent::onClose);
        }
    }

    /**
     * One thread's lane: its agent, port and ring.
     */
    @State(Scope.Thread)
    public static class Lane
    {
        private int index;
        private DataplaneAgent agent;
        private ReplayPort port;
        private RingDefinition config;
        private DataplaneProxy proxy;
        private long completedBefore;
        private long dropsBefore;

        @Setup(Level.Trial)
        public void join(final Dataplane dataplane)
        {
            index = dataplane.nextLane.getAndIncrement();
            agent = dataplane.dataplane.agent(index);
            port = dataplane.ports[index];
            config = dataplane.rings[index];
            proxy = dataplane.dataplane.proxy();
            apply(proxy.installRing(config, index));
        }

        /**
         * A fresh ring and a rewound stream before every invocation (not measured): the first packets then open new
         * connections and every frame is new work.
         */
        @Setup(Level.Invocation)
        public void freshRing()
        {
            apply(proxy.removeRing(config.ringId()));
            apply(proxy.installRing(config, index));
            rewind(port, FRAMES);
            completedBefore = agent.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED);
            dropsBefore = drops(agent.counters());
        }

        /**
         * Fail the run if the invocation timed anything but the aggregation of every frame it fed.
         */
        @TearDown(Level.Invocation)
        public void checkEveryFrameWasAggregated()
        {
            final long completed = agent.counters().get(DataplaneCounter.AGGREGATIONS_COMPLETED) - completedBefore;
            final long drops = drops(agent.counters()) - dropsBefore;
            if (completed != (long)MESSAGES * MSG_LEN || drops != 0 || port.sent() != FRAMES)
            {
                throw new IllegalStateException("lane " + index + ": the benchmark timed the wrong work: " +
                    completed + " aggregations (" + (long)MESSAGES * MSG_LEN + " expected), " + drops + " drops, " +
                    port.sent() + " result frames sent (" + FRAMES + " expected); counters " +
                    agent.counters().snapshot());
            }
            port.resetSent();
        }

        /**
         * Run this lane's agent (the only one that applies commands for its ring) until the command is done.
         */
        private void apply(final CompletableFuture<?> reply)
        {
            while (!reply.isDone())
            {
                agent.doWork();
            }
            reply.join();
        }
    }

    @Benchmark
    @OperationsPerInvocation(FRAMES)
    public int packetPath(final Lane lane)
    {
        int work = 0;
        while (lane.port.remaining() > 0)
        {
            work += lane.agent.doWork();
        }
        return work;
    }

    /**
     * Ring {@code lane + 1} of 4 ranks on hosts 10.0.lane.1-4.
     */
    private static RingDefinition ring(final int lane, final int payload)
    {
        final List<RingMember> members = new ArrayList<>();
        for (int r = 0; r < RANKS; r++)
        {
            members.add(new RingMember(r, InetAddress.ofLiteral("10.0." + lane + "." + (r + 1))));
        }
        return new RingDefinition(lane + 1, "bench-" + lane, ElementType.FP32, WINDOW, MSG_LEN, payload, members);
    }

    /**
     * The frames of {@link #MESSAGES} messages of every rank, ranks in step.
     */
    private static List<byte[]> stream(final RingDefinition config)
    {
        final List<byte[]> frames = new ArrayList<>(FRAMES);
        final RingWorker[] workers = new RingWorker[RANKS];
        for (int r = 0; r < RANKS; r++)
        {
            workers[r] = RingWorker.of(config, r, 1000 * r);
        }
        final Random random = new Random(config.ringId());
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
        return frames;
    }

    private static long drops(final DataplaneCounters counters)
    {
        return counters.drops() + counters.get(DataplaneCounter.PASS_THROUGH) + counters.get(DataplaneCounter.TX_FULL);
    }

    /**
     * The agent rewrote the InetTag of every first packet to the result tag in place (as it does in a receive
     * ring); put the request tag back and hand the stream over again, so it is the one the workers sent.
     */
    private static void rewind(final ReplayPort port, final int frames)
    {
        final RoceFrame frame = new RoceFrame();
        for (int i = 0; i < frames; i++)
        {
            if (frame.wrap(port.frames(), port.offset(i), port.length(i)) == RoceFrame.OK &&
                InaHeader.inetTag(port.frames(), frame.payloadOffset()) == InaHeader.RESULT_TAG)
            {
                InaHeader.inetTag(port.frames(), frame.payloadOffset(), InaHeader.INET_TAG);
            }
        }
        port.rewind(frames);
    }
}
