package io.netreduce.dataplane.bench;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortCounters;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.ring.RingConfig;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import org.agrona.DirectBuffer;
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
 * The whole per-packet path on an in-memory port: parse → CLT → ICRC check → store → (every W-th packet) sum →
 * rebuild W result packets → combined ICRC → send. A ring of 4 ranks, MsgLen 4, window 4, fp32; the port
 * replays 256 messages (one MsgID cycle) of pre-built frames from a direct buffer and discards what is sent.
 * One operation = one received gradient packet.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
public class PacketPathBenchmark
{
    private static final int RANKS = 4;
    private static final int MSG_LEN = 4;
    private static final int BATCH = 64;

    @Param({ "1024", "4096" })
    public int payload;

    private DataplaneAgent agent;
    private ReplayPort port;

    @Setup(Level.Trial)
    public void setUp()
    {
        final RingConfig config = Rings.ring(1, RANKS, ElementType.FP32, 4, MSG_LEN, payload);
        final List<byte[]> frames = new ArrayList<>();
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
        for (int m = 0; m < 256; m++)
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
        agent.proxy().installRing(config);
        agent.doWork();
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        agent.onClose();
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public int packetPath()
    {
        return agent.doWork();
    }

    /**
     * Replays pre-built frames for ever, from one direct buffer, as a receive ring would hand them over.
     */
    static final class ReplayPort implements PacketPort
    {
        private final UnsafeBuffer frames;
        private final int[] offsets;
        private final int[] lengths;
        private final PortCounters counters = new PortCounters();
        private int next;
        long sent;

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
        }

        @Override
        public String name()
        {
            return "replay";
        }

        @Override
        public int receive(final FrameHandler handler, final int limit)
        {
            for (int i = 0; i < limit; i++)
            {
                handler.onFrame(frames, offsets[next], lengths[next], 0);
                next = next + 1 == offsets.length ? 0 : next + 1;
            }
            return limit;
        }

        @Override
        public boolean send(final DirectBuffer buffer, final int offset, final int length)
        {
            sent += length;
            return true;
        }

        private final UnsafeBuffer claim = new UnsafeBuffer(ByteBuffer.allocateDirect(16 * 1024));
        private int claimLength;

        @Override
        public int tryClaim(final int length)
        {
            claimLength = length;
            return 0;
        }

        @Override
        public org.agrona.MutableDirectBuffer claimBuffer()
        {
            return claim;
        }

        @Override
        public void commit()
        {
            sent += claimLength;
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
