package io.netreduce.worker;

import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.NetworkNamespace;
import io.netreduce.protocol.port.RxRingVersion;
import org.HdrHistogram.Histogram;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.PrintStream;
import java.nio.ByteOrder;
import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * {@code netreduce worker port-lat}: a benchmark (not a test) of the AF_PACKET port itself, between two interfaces
 * in two network namespaces (a veth pair), in one JVM. One thread echoes every test frame arriving on the second
 * port; the calling thread sends a frame on the first port, busy-polls for its echo and records the round trip,
 * one frame in flight at a time: the low-rate case where a TPACKET_V3 block timer shows. With {@code --flood} it
 * instead sends {@code --count} frames as fast as the transmit ring takes them and reports what the receiving
 * port delivered and dropped: the high-rate case, end to end. With {@code --drain} it lets {@code --count} frames
 * pile up in the receive ring unread, then times {@code receive} emptying it: the ring's own per-frame cost in user
 * space, free of scheduling noise, as the median of {@code --rounds} rounds.
 */
@Command(
    name = "port-lat",
    mixinStandardHelpOptions = true,
    description = "AF_PACKET port round-trip latency (or --flood receive rate) over a veth pair between namespaces.")
public final class PortLatencyCommand implements Callable<Integer>
{
    /** Local experimental EtherType marking the benchmark's frames; everything else is ignored. */
    private static final int ETHER_TYPE = 0x88B5;
    private static final int ETHER_TYPE_OFFSET = 12;
    private static final int SEQUENCE_OFFSET = 14;
    private static final long PING_TIMEOUT_NS = 2_000_000_000L;

    @Option(names = "--ns-a", required = true, description = "Namespace of the sending (pinging) interface.")
    String namespaceA;

    @Option(names = "--dev-a", required = true, description = "Interface in --ns-a.")
    String deviceA;

    @Option(names = "--ns-b", required = true, description = "Namespace of the echoing (flood: receiving) interface.")
    String namespaceB;

    @Option(names = "--dev-b", required = true, description = "Interface in --ns-b.")
    String deviceB;

    @Option(names = "--rx-ring", description = "Receive ring of both ports: V2 or V3 (default ${DEFAULT-VALUE}).")
    RxRingVersion rxRing = AfPacketConfiguration.DEFAULT_RX_RING_VERSION;

    @Option(names = "--rx-block-size", description = "Receive block bytes (default ${DEFAULT-VALUE}).")
    int rxBlockSize = AfPacketConfiguration.DEFAULT_RX_BLOCK_SIZE;

    @Option(names = "--rx-blocks", description = "Receive blocks (default ${DEFAULT-VALUE}).")
    int rxBlocks = AfPacketConfiguration.DEFAULT_RX_BLOCK_COUNT;

    @Option(names = "--rx-block-timeout-ms", description = "V3 block timeout (default ${DEFAULT-VALUE}).")
    int rxBlockTimeoutMs = AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS;

    @Option(names = "--size", description = "Frame bytes, Ethernet header included (default ${DEFAULT-VALUE}).")
    int size = 64;

    @Option(names = "--count", description = "Measured round trips, or frames to flood (default ${DEFAULT-VALUE}).")
    int count = 2000;

    @Option(names = "--warmup", description = "Round trips before measuring (default ${DEFAULT-VALUE}).")
    int warmup = 500;

    @Option(names = "--flood", description = "Measure the receive rate of a flood instead of round trips.")
    boolean flood;

    @Option(names = "--drain", description = "Time draining --count queued frames from the receive ring.")
    boolean drain;

    @Option(names = "--rounds", description = "Drain rounds (default ${DEFAULT-VALUE}).")
    int rounds = 200;

    private final PrintStream out = System.out;

    @Override
    public Integer call() throws Exception
    {
        if (size < 60 || size > 1514 || count <= 0 || warmup < 0)
        {
            System.err.println("port-lat: need 60 <= --size <= 1514, --count > 0, --warmup >= 0");
            return 2;
        }
        final AfPacketPort a = NetworkNamespace.callIn(namespaceA, () -> AfPacketPort.open(configuration(deviceA)));
        try (a; AfPacketPort b = NetworkNamespace.callIn(namespaceB, () -> AfPacketPort.open(configuration(deviceB))))
        {
            return drain ? drain(a, b) : flood ? flood(a, b) : pingPong(a, b);
        }
    }

    private AfPacketConfiguration configuration(final String device)
    {
        return AfPacketConfiguration.defaults(device)
            .withRxRingVersion(rxRing)
            .withRxRing(rxBlockSize, rxBlocks, rxBlockTimeoutMs);
    }

    private int pingPong(final AfPacketPort a, final AfPacketPort b) throws InterruptedException
    {
        final Echo echo = new Echo(b);
        final Thread echoThread = Thread.ofPlatform().name("port-lat-echo").start(echo);
        final UnsafeBuffer frame = frame(size);
        final Histogram histogram = new Histogram(10_000_000_000L, 3);
        final long[] arrived = { -1 };
        final FrameHandler onEcho = (buffer, offset, length, flags) ->
        {
            if (isBenchmarkFrame(buffer, offset, length))
            {
                arrived[0] = buffer.getLong(offset + SEQUENCE_OFFSET, ByteOrder.BIG_ENDIAN);
            }
        };
        int lost = 0;
        try
        {
            for (long sequence = 0; sequence < warmup + count; sequence++)
            {
                frame.putLong(SEQUENCE_OFFSET, sequence, ByteOrder.BIG_ENDIAN);
                while (!a.send(frame, 0, size))
                {
                    a.flush();
                }
                a.flush();
                final long sent = System.nanoTime();
                final long deadline = sent + PING_TIMEOUT_NS;
                long now = sent;
                while (arrived[0] != sequence && now - deadline < 0)
                {
                    a.receive(onEcho, 16);
                    now = System.nanoTime();
                }
                if (arrived[0] != sequence)
                {
                    lost++;
                }
                else if (sequence >= warmup)
                {
                    histogram.recordValue(now - sent);
                }
            }
        }
        finally
        {
            echo.running = false;
            echoThread.join();
        }

        out.printf(Locale.ROOT,
            "port-lat rx_ring=%s size=%d round_trips=%d lost=%d rtt_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f " +
            "max=%.1f mean=%.1f%n",
            rxRing, size, histogram.getTotalCount(), lost,
            histogram.getValueAtPercentile(50) / 1e3, histogram.getValueAtPercentile(90) / 1e3,
            histogram.getValueAtPercentile(99) / 1e3, histogram.getValueAtPercentile(99.9) / 1e3,
            histogram.getMaxValue() / 1e3, histogram.getMean() / 1e3);
        return lost == 0 ? 0 : 1;
    }

    private int flood(final AfPacketPort a, final AfPacketPort b) throws InterruptedException
    {
        final Sink sink = new Sink(b);
        final Thread sinkThread = Thread.ofPlatform().name("port-lat-sink").start(sink);
        final UnsafeBuffer frame = frame(size);
        final long start = System.nanoTime();
        for (long sequence = 0; sequence < count; sequence++)
        {
            frame.putLong(SEQUENCE_OFFSET, sequence, ByteOrder.BIG_ENDIAN);
            while (!a.send(frame, 0, size))
            {
                a.flush();
            }
        }
        while (a.flush() > 0 || a.counters().txFrames() < count)
        {
            Thread.onSpinWait();
        }
        final long sendNanos = System.nanoTime() - start;
        // Whatever has not arrived a second after the last send will not.
        Thread.sleep(1000);
        sink.running = false;
        sinkThread.join();
        b.refreshKernelStatistics();

        final long received = sink.received;
        final double receiveSeconds = (sink.lastNanos - sink.firstNanos) / 1e9;
        out.printf(Locale.ROOT,
            "port-lat flood rx_ring=%s size=%d sent=%d send_mpps=%.3f received=%d rx_mpps=%.3f kernel_drops=%d " +
            "missing=%d%n",
            rxRing, size, count, count / (sendNanos / 1e9) / 1e6, received,
            receiveSeconds > 0 ? received / receiveSeconds / 1e6 : 0.0, b.counters().rxDropped(), count - received);
        return 0;
    }

    private int drain(final AfPacketPort a, final AfPacketPort b) throws InterruptedException
    {
        final UnsafeBuffer frame = frame(size);
        final long[] received = new long[1];
        final long[] checksum = new long[1];
        final FrameHandler consume = (buffer, offset, length, flags) ->
        {
            if (isBenchmarkFrame(buffer, offset, length))
            {
                received[0]++;
                checksum[0] += buffer.getLong(offset + SEQUENCE_OFFSET);
            }
        };
        final long[] nanosPerFrame = new long[rounds];
        final long[] sendNanosPerFrame = new long[rounds];
        long sequence = 0;
        for (int round = 0; round < rounds; round++)
        {
            final long sendStart = System.nanoTime();
            for (int i = 0; i < count; i++)
            {
                frame.putLong(SEQUENCE_OFFSET, sequence++, ByteOrder.BIG_ENDIAN);
                while (!a.send(frame, 0, size))
                {
                    a.flush();
                }
            }
            while (a.flush() > 0 || a.counters().txFrames() < sequence)
            {
                Thread.onSpinWait();
            }
            // On a veth the sender's CPU also runs the receive path into the other ring (tpacket_rcv).
            sendNanosPerFrame[round] = (System.nanoTime() - sendStart) * 1000 / count;
            Thread.sleep(5);
            received[0] = 0;
            final long start = System.nanoTime();
            final long deadline = start + PING_TIMEOUT_NS;
            while (received[0] < count && System.nanoTime() - deadline < 0)
            {
                b.receive(consume, 256);
            }
            final long nanos = System.nanoTime() - start;
            if (received[0] < count)
            {
                b.refreshKernelStatistics();
                System.err.printf(Locale.ROOT, "port-lat: drain round %d got %d of %d frames (kernel drops %d); " +
                    "lower --count to fit the ring%n", round, received[0], count, b.counters().rxDropped());
                return 1;
            }
            nanosPerFrame[round] = nanos * 1000 / count;
        }
        java.util.Arrays.sort(nanosPerFrame);
        java.util.Arrays.sort(sendNanosPerFrame);
        out.printf(Locale.ROOT,
            "port-lat drain rx_ring=%s size=%d frames_per_round=%d rounds=%d receive_ns_per_frame median=%.1f " +
            "min=%.1f send_and_kernel_rx_ns_per_frame median=%.1f min=%.1f (checksum %d)%n",
            rxRing, size, count, rounds, nanosPerFrame[rounds / 2] / 1e3, nanosPerFrame[0] / 1e3,
            sendNanosPerFrame[rounds / 2] / 1e3, sendNanosPerFrame[0] / 1e3, checksum[0]);
        return 0;
    }

    private static UnsafeBuffer frame(final int size)
    {
        final UnsafeBuffer frame = new UnsafeBuffer(new byte[size]);
        // Locally administered unicast addresses: nothing else on the link claims them.
        frame.putBytes(0, new byte[] { 0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01 });
        frame.putShort(ETHER_TYPE_OFFSET, (short)ETHER_TYPE, ByteOrder.BIG_ENDIAN);
        return frame;
    }

    private static boolean isBenchmarkFrame(final MutableDirectBuffer buffer, final int offset, final int length)
    {
        return length >= SEQUENCE_OFFSET + Long.BYTES &&
            (buffer.getShort(offset + ETHER_TYPE_OFFSET, ByteOrder.BIG_ENDIAN) & 0xFFFF) == ETHER_TYPE;
    }

    /**
     * Sends every benchmark frame straight back, busy polling.
     */
    private static final class Echo implements Runnable
    {
        private final AfPacketPort port;
        volatile boolean running = true;

        Echo(final AfPacketPort port)
        {
            this.port = port;
        }

        @Override
        public void run()
        {
            final AfPacketPort port = this.port;
            final FrameHandler echo = (buffer, offset, length, flags) ->
            {
                if (isBenchmarkFrame(buffer, offset, length))
                {
                    port.send(buffer, offset, length);
                }
            };
            while (running)
            {
                if (port.receive(echo, 64) > 0)
                {
                    port.flush();
                }
                else
                {
                    Thread.onSpinWait();
                }
            }
        }
    }

    /**
     * Counts benchmark frames and notes when the first and last arrived, busy polling.
     */
    private static final class Sink implements Runnable
    {
        private final AfPacketPort port;
        volatile boolean running = true;
        long received;
        long firstNanos;
        long lastNanos;

        Sink(final AfPacketPort port)
        {
            this.port = port;
        }

        @Override
        public void run()
        {
            final FrameHandler count = (buffer, offset, length, flags) ->
            {
                if (isBenchmarkFrame(buffer, offset, length))
                {
                    received++;
                }
            };
            while (running)
            {
                final long before = received;
                port.receive(count, 256);
                if (received != before)
                {
                    final long now = System.nanoTime();
                    if (before == 0)
                    {
                        firstNanos = now;
                    }
                    lastNanos = now;
                }
                else
                {
                    Thread.onSpinWait();
                }
            }
        }
    }
}
