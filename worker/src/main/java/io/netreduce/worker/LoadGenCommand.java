package io.netreduce.worker;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Locale;
import java.util.concurrent.Callable;

/**
 * {@code netreduce worker loadgen}: W ranks' ring traffic from one port, to measure the appliance alone (a
 * benchmark, not a test). The frames of one MsgID cycle (256 messages) of every rank are built in advance: valid
 * RoCEv2 RC RDMA WRITEs with PSNs in order, INA headers and ICRCs, each rank always sending the same int32
 * gradient, so every position's sum is known. They go out through the AF_PACKET transmit ring in batches (one kick
 * per batch), each rank at most {@code --window} messages ahead of the results it has back, as the workers' flow
 * control would allow. Every result that comes back is checked: its ICRC, its INA header (result tag) and its
 * payload against the known sum. ACKs are not needed: the appliance does not wait for them.
 * <p>
 * The ring the appliance must have installed: ranks 0..W-1 at {@code --ip-base + r}, MAC {@code 02:7a:00:00:00:r+1},
 * receive QP {@code 0x100 + r}, int32, the given window, MsgLen and payload. A run is {@code --warmup-cycles} plus
 * {@code --cycles} cycles of 256 messages; cycle c uses start PSN {@code c << 20}, a new connection of each rank per
 * cycle. Only the last {@code --cycles} are measured: rate, and CPU from {@code /proc/stat} (the whole machine),
 * {@code /proc/self/stat} (this process) and, with {@code --cpu-pid}, {@code /proc/PID/stat} (the appliance), all in
 * clock ticks over the measured cycles.
 * <p>
 * {@code --rings R} plays R such rings at once (RingIDs {@code --ring-id} + k), ring k's rank r being global rank
 * g = kW + r at {@code --ip-base + g}, MAC {@code 02:7a:00:00:00:g+1}, receive QP {@code 0x100 + g}: rings on
 * hosts of their own, so an appliance with lanes can put each on its own lane.
 * <p>
 * {@code --expect reflect} runs against a kernel reflector instead of the appliance (a tc rule on the far side of
 * the link that sends every frame straight back, the floor of the benchmark): every frame must come back once, with
 * its ICRC intact; no sums are checked.
 */
@Command(name = "loadgen", mixinStandardHelpOptions = true,
    description = "Replay W ranks' ring traffic from one port and check every result (appliance benchmark).")
public final class LoadGenCommand implements Callable<Integer>
{
    private static final int MESSAGES_PER_CYCLE = 256;
    private static final int TX_BATCH = 64;
    /** PSNs are 24 bits and cycle c starts at c << 20: more cycles would reuse a start PSN on the same QPs. */
    private static final int MAX_CYCLES = 16;

    /** What comes back: the appliance's results (every sum checked) or the frames sent, reflected. */
    enum Expect
    {
        sums,
        reflect
    }

    @Option(names = "--dev", required = true, description = "Interface facing the appliance.")
    String dev;

    @Option(names = "--world", description = "Ranks W (default ${DEFAULT-VALUE}).")
    int world = 4;

    @Option(names = "--ring-id", description = "RingID (default ${DEFAULT-VALUE}).")
    int ringId = 1;

    @Option(names = "--rings", description = "Rings played at once, each of W ranks on hosts of its own " +
        "(default ${DEFAULT-VALUE}).")
    int rings = 1;

    @Option(names = "--window", description = "Messages in flight per rank (default ${DEFAULT-VALUE}).")
    int window = 8;

    @Option(names = "--msg-len", description = "Packets per message (default ${DEFAULT-VALUE}).")
    int msgLen = 16;

    @Option(names = "--payload", description = "RC payload bytes per packet (default ${DEFAULT-VALUE}).")
    int payload = 4096;

    @Option(names = "--cycles", description = "Cycles of 256 messages (default ${DEFAULT-VALUE}).")
    int cycles = 4;

    @Option(names = "--warmup-cycles", description = "Cycles before the measured ones, not counted (JIT warm-up of " +
        "both ends; default ${DEFAULT-VALUE}).")
    int warmupCycles = 0;

    @Option(names = "--expect", description = "sums: results of the appliance, every element checked; reflect: the " +
        "frames sent, sent back by a kernel reflector, ICRC checked (default ${DEFAULT-VALUE}).")
    Expect expect = Expect.sums;

    @Option(names = "--rate-gbps", description = "Pace the frames to this many Gbit/s of gradient in (0: flat out, " +
        "the default), e.g. to run the reflector at the appliance's rate.")
    double rateGbps = 0;

    @Option(names = "--cpu-pid", description = "Also report this process's utime and stime over the measured " +
        "cycles (the appliance daemon).")
    int cpuPid = 0;

    @Option(names = "--ip-base", description = "Address of rank 0; rank r is this + r (default ${DEFAULT-VALUE}).")
    String ipBase = "10.122.0.1";

    @Option(names = "--timeout", description = "Seconds without a result before the run fails (default " +
        "${DEFAULT-VALUE}).")
    int timeoutSeconds = 5;

    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();
    private long resultsOk;
    private long resultsBad;
    /** Results back per global rank (ring k's rank r is k * world + r), counted for the rank that sent them. */
    private long[] resultsPerRank;

    @Override
    public Integer call() throws Exception
    {
        if (world < 2 || world > 64 || payload % 4 != 0 || msgLen < 1 || window < 1 || 2 * window > 256 ||
            cycles < 1 || warmupCycles < 0 || warmupCycles + cycles > MAX_CYCLES || rings < 1 || rings * world > 128 ||
            ringId < 0 || ringId + rings > 256)
        {
            System.err.println("loadgen: need 2 <= W <= 64, payload a multiple of 4, MsgLen >= 1, 1 <= window <= 128, " +
                "cycles >= 1, warmup cycles + cycles <= " + MAX_CYCLES + ", rings x W <= 128 and RingIDs below 256");
            return 2;
        }
        final int ranks = rings * world;
        resultsPerRank = new long[ranks];
        final int base = ipv4(ipBase);
        final int gradientInts = (msgLen * payload - InaHeader.LENGTH) / 4;
        // Rank r's gradient element i: r * 1000 + i % 1000, so the sum of position p is known in closed form.
        final UnsafeBuffer[] messages = new UnsafeBuffer[world];
        final int[] expected = new int[gradientInts];
        for (int r = 0; r < world; r++)
        {
            messages[r] = new UnsafeBuffer(ByteBuffer.allocateDirect(msgLen * payload));
            for (int i = 0; i < gradientInts; i++)
            {
                final int value = r * 1000 + i % 1000;
                messages[r].putInt(InaHeader.LENGTH + 4 * i, value, ByteOrder.LITTLE_ENDIAN);
                expected[i] += value;
            }
        }
        final int frameSlot = (payload + 128 + 63) & ~63;
        final int framesPerCycle = MESSAGES_PER_CYCLE * ranks * msgLen;
        final UnsafeBuffer frames = new UnsafeBuffer(ByteBuffer.allocateDirect(framesPerCycle * frameSlot));
        final int[] lengths = new int[framesPerCycle];
        final RoceFrameWriter[] writers = new RoceFrameWriter[ranks];
        for (int g = 0; g < ranks; g++)
        {
            final int successor = g - g % world + (g % world + 1) % world;
            writers[g] = new RoceFrameWriter().ipv4(base + g, base + successor).macs(mac(g), mac(successor))
                .destQp(0x100 + successor).udpSrcPort(0xC000 + g);
        }

        final AfPacketConfiguration portConfig = AfPacketConfiguration.defaults(dev)
            .withTxRing(8192, 4096)
            .withRxRing(16384, 4096, AfPacketConfiguration.DEFAULT_RX_BLOCK_TIMEOUT_MS)
            .withRoceOnly(true);
        try (AfPacketPort port = AfPacketPort.open(portConfig))
        {
            final FrameHandler onResult = expect == Expect.sums ?
                (buffer, offset, length, flags) -> check(buffer, offset, length, expected, gradientInts) :
                (buffer, offset, length, flags) -> checkReflected(buffer, offset, length);
            final long gradientBytesPerCycle = (long)MESSAGES_PER_CYCLE * ranks * (msgLen * payload - InaHeader.LENGTH);
            final double framesPerNano = rateGbps / 8 / ((double)gradientBytesPerCycle / framesPerCycle);
            long sentFrames = 0;
            long nanos = 0;
            long[] cpuBefore = null;
            for (int cycle = 0; cycle < warmupCycles + cycles; cycle++)
            {
                build(frames, frameSlot, lengths, writers, messages, cycle << 20);
                if (cycle == warmupCycles)
                {
                    cpuBefore = cpuTicks();
                }
                final long resultsBefore = resultsOk + resultsBad;
                final long start = System.nanoTime();
                int next = 0;
                long lastProgress = start;
                while (resultsOk + resultsBad - resultsBefore < framesPerCycle)
                {
                    // Message m of every rank may go once every rank has the results of message m - window back.
                    final long done = minResults() - resultsBefore / ranks;
                    int allowed = (int)Math.min(framesPerCycle,
                        (Math.max(0, done) / msgLen + window) * ranks * msgLen);
                    if (rateGbps > 0)
                    {
                        allowed = (int)Math.min(allowed, TX_BATCH + (System.nanoTime() - start) * framesPerNano);
                    }
                    int batch = 0;
                    while (next < allowed && batch < TX_BATCH && port.send(frames, next * frameSlot, lengths[next]))
                    {
                        next++;
                        batch++;
                    }
                    port.flush();
                    final int received = port.receive(onResult, 256);
                    final long now = System.nanoTime();
                    if (received > 0 || batch > 0)
                    {
                        lastProgress = now;
                    }
                    else if (now - lastProgress > timeoutSeconds * 1_000_000_000L)
                    {
                        System.out.printf(Locale.ROOT, "loadgen: no result for %d s in cycle %d: %d of %d sent, " +
                            "%d results back (a frame or a result was lost: this run measured nothing)%n",
                            timeoutSeconds, cycle, next, framesPerCycle, resultsOk + resultsBad - resultsBefore);
                        return 1;
                    }
                }
                if (cycle >= warmupCycles)
                {
                    nanos += System.nanoTime() - start;
                    sentFrames += framesPerCycle;
                }
                // Let the appliance see the cycle over before the next one reconnects every rank.
                Thread.sleep(50);
            }
            final long[] cpu = cpuTicks();
            for (int i = 0; i < cpu.length; i++)
            {
                cpu[i] -= cpuBefore[i];
            }
            final double seconds = nanos / 1e9;
            final double gradientGbps = gradientBytesPerCycle * cycles * 8 / seconds / 1e9;
            System.out.printf(Locale.ROOT, "loadgen rings=%d world=%d payload=%d msg_len=%d window=%d rate_gbps=%.3f frames=%d seconds=%.3f " +
                "mpps_in=%.3f gradient_gbps_in=%.3f gradient_bytes=%d results_ok=%d results_bad=%d expect=%s " +
                "machine_busy_ticks=%d machine_user_ticks=%d machine_system_ticks=%d " +
                "machine_softirq_ticks=%d machine_irq_ticks=%d self_utime_ticks=%d self_stime_ticks=%d " +
                "pid_utime_ticks=%d pid_stime_ticks=%d ok=%s%n",
                rings, world, payload, msgLen, window, rateGbps, sentFrames, seconds, sentFrames / seconds / 1e6, gradientGbps,
                gradientBytesPerCycle * cycles, resultsOk, resultsBad, expect, cpu[0] + cpu[1] + cpu[2] + cpu[3] +
                cpu[4], cpu[0] + cpu[1], cpu[2], cpu[4], cpu[3], cpu[5], cpu[6], cpu[7], cpu[8], resultsBad == 0);
            return resultsBad == 0 ? 0 : 1;
        }
    }

    /**
     * Clock ticks (USER_HZ, 100 on Linux): the machine's user, nice, system, irq, softirq (from /proc/stat); this
     * process's utime and stime; those of {@code --cpu-pid} (0 without it).
     */
    private long[] cpuTicks() throws java.io.IOException
    {
        final long[] ticks = new long[9];
        final String[] machine = java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/stat")).get(0)
            .trim().split("\\s+");
        // cpu user nice system idle iowait irq softirq ...
        ticks[0] = Long.parseLong(machine[1]);
        ticks[1] = Long.parseLong(machine[2]);
        ticks[2] = Long.parseLong(machine[3]);
        ticks[3] = Long.parseLong(machine[6]);
        ticks[4] = Long.parseLong(machine[7]);
        processTicks("/proc/self/stat", ticks, 5);
        if (cpuPid > 0)
        {
            processTicks("/proc/" + cpuPid + "/stat", ticks, 7);
        }
        return ticks;
    }

    private static void processTicks(final String path, final long[] ticks, final int at) throws java.io.IOException
    {
        parseProcessTicks(java.nio.file.Files.readString(java.nio.file.Path.of(path)), ticks, at);
    }

    /**
     * utime and stime (fields 14 and 15) of a {@code /proc/PID/stat} line into {@code ticks[at]} and
     * {@code ticks[at + 1]}. The command name (field 2, in parentheses) may hold spaces and parentheses: fields are
     * counted from the last ')'.
     */
    static void parseProcessTicks(final String stat, final long[] ticks, final int at)
    {
        final String[] fields = stat.substring(stat.lastIndexOf(')') + 2).trim().split("\\s+");
        ticks[at] = Long.parseLong(fields[11]);
        ticks[at + 1] = Long.parseLong(fields[12]);
    }

    /**
     * A frame sent back by the reflector: one of ours (RoCEv2, an RDMA WRITE to a ring member's QP) with its ICRC
     * intact, counted for the rank that sent it.
     */
    private void checkReflected(final MutableDirectBuffer buffer, final int offset, final int length)
    {
        if (frame.wrap(buffer, offset, length) != RoceFrame.OK || frame.opcode() > Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE)
        {
            return; // not ours (ARP, IPv6 ND)
        }
        final int rank = sender(frame.destQp());
        if (rank < 0)
        {
            return;
        }
        resultsPerRank[rank]++;
        if (icrc.verify(frame) && frame.payloadLength() == payload)
        {
            resultsOk++;
        }
        else
        {
            resultsBad++;
        }
    }

    /**
     * @return the global rank whose connection delivers to receive QP {@code destQp} (its ring's predecessor of the
     *         receiver), or -1 if no rank's.
     */
    private int sender(final int destQp)
    {
        final int receiver = destQp - 0x100;
        if (receiver < 0 || receiver >= resultsPerRank.length)
        {
            return -1;
        }
        return receiver - receiver % world + (receiver % world - 1 + world) % world;
    }

    private long minResults()
    {
        long min = Long.MAX_VALUE;
        for (int r = 0; r < resultsPerRank.length; r++)
        {
            min = Math.min(min, resultsPerRank[r]);
        }
        return min;
    }

    /**
     * One cycle's frames, messages in lockstep: message m of every rank of every ring, then m + 1.
     */
    private void build(final UnsafeBuffer frames, final int frameSlot, final int[] lengths,
        final RoceFrameWriter[] writers, final UnsafeBuffer[] messages, final int firstPsn)
    {
        int index = 0;
        for (int m = 0; m < MESSAGES_PER_CYCLE; m++)
        {
            for (int g = 0; g < writers.length; g++)
            {
                final int r = g % world;
                InaHeader.write(messages[r], 0, ringId + g / world, m, msgLen, r);
                writers[g].reth(0x7F00_0000_0000L + (long)(m % (2 * window)) * msgLen * payload, 0x1234,
                    msgLen * payload).immediate(m);
                for (int p = 0; p < msgLen; p++)
                {
                    final int opcode = msgLen == 1 ? Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE :
                        p == 0 ? Opcode.RDMA_WRITE_FIRST : p == msgLen - 1 ? Opcode.RDMA_WRITE_LAST_WITH_IMMEDIATE :
                        Opcode.RDMA_WRITE_MIDDLE;
                    final int psn = (firstPsn + m * msgLen + p) & BthHeader.PSN_MASK;
                    lengths[index] = writers[g].write(frames, index * frameSlot, opcode, psn, p == msgLen - 1,
                        messages[r], p * payload, payload);
                    index++;
                }
            }
        }
    }

    /**
     * A result: its ICRC, and its payload against the known sum (the INA header of a first packet carries the
     * result tag).
     */
    private void check(final MutableDirectBuffer buffer, final int offset, final int length, final int[] expected,
        final int gradientInts)
    {
        if (frame.wrap(buffer, offset, length) != RoceFrame.OK || frame.opcode() > Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE)
        {
            return; // not a result (ARP, IPv6 ND, an ACK)
        }
        final int rank = sender(frame.destQp());
        if (rank < 0)
        {
            return;
        }
        boolean good = icrc.verify(frame);
        final int psnInMessage = (frame.psn() & 0xFFFFF) % msgLen;
        int data = frame.payloadOffset();
        int element = psnInMessage * payload / 4 - InaHeader.LENGTH / 4;
        if (psnInMessage == 0)
        {
            good &= InaHeader.inetTag(buffer, data) == InaHeader.RESULT_TAG;
            data += InaHeader.LENGTH;
            element = 0;
        }
        final int end = frame.payloadOffset() + frame.payloadLength();
        for (int at = data; good && at + 4 <= end && element < gradientInts; at += 4, element++)
        {
            good = buffer.getInt(at, ByteOrder.LITTLE_ENDIAN) == expected[element];
        }
        resultsPerRank[rank]++;
        if (good)
        {
            resultsOk++;
        }
        else
        {
            resultsBad++;
        }
    }

    private static long mac(final int rank)
    {
        return 0x02_7A_00_00_00_00L | (rank + 1);
    }

    private static int ipv4(final String text)
    {
        final String[] parts = text.split("\\.");
        return (Integer.parseInt(parts[0]) << 24) | (Integer.parseInt(parts[1]) << 16) |
            (Integer.parseInt(parts[2]) << 8) | Integer.parseInt(parts[3]);
    }
}
