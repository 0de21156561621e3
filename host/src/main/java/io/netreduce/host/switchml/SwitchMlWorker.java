package io.netreduce.host.switchml;

import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.SwitchMlHeader;
import io.netreduce.protocol.wire.UdpHeader;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.IdleStrategy;

import java.util.Arrays;
import java.util.function.LongSupplier;

/**
 * A SwitchML worker (paper §4, Algorithm 2; the published client's DPDK worker thread): all-reduces an int32 or fp32
 * tensor through a SwitchML switch (the appliance) with a self-clocked pool of {@code outstanding} packets.
 * <p>
 * <b>Packets.</b> A call's tensor is cut into blocks of k elements (the last padded with zeros). int32 blocks travel
 * as they are, packet p carrying block p; fp32 blocks travel quantized ({@link ExponentQuantizer}) behind a leading
 * batch of L = min(outstanding, blocks) packets that carry only exponents (and zeros), packet p carrying block p − L
 * and, in exponent byte e0, the exponent of block p ({@link ExponentQuantizer#NO_EXPONENT} past the last block): the
 * exponent look-ahead of the client's {@code cpu_exponent_quantizer} (paper §4), so that block p is quantized with
 * the maximum of all workers' exponents, which the result of packet p brings back in e0 (the client reads e0 only;
 * we send the same value in e1). The TSI carries p, so a result is matched to its packet without state in the
 * switch.
 * <p>
 * <b>Pool.</b> Packet p goes to pool position P(p) = p, shifted by where the last call stopped and wrapped at
 * 2·outstanding, mapped as the client's {@code PktId2PoolIndex} maps it: the first {@code outstanding} positions are
 * the slots' set 0, the next their set 1. The result of p clocks packet p + L (L = min(outstanding, blocks), as the
 * client's {@code batch_num_pkts}); a packet without its result within the timeout is sent again, with the same
 * bytes, as often as needed. The switch answers a retransmission to a complete set from its stored result and never
 * adds a contribution twice, so int32 sums are exact and fp32 sums deterministic. The safety of reusing a set rests on
 * the packet on a slot's other set being sent only after the result of this one (then every worker has that result
 * once the other set completes). For fp32 calls of fewer blocks than {@code outstanding} the client sends the data
 * packets on the next positions, clocked by results of other slots: a worker that lost the result of packet b may
 * then send a packet to the other set of b's slot, which clears its bit in b's set, and its retransmission of b opens
 * a new round there instead of fetching the result, and it waits for ever. This worker departs from the client there:
 * data packet L + b goes to position outstanding + b, the other set of its exponent packet's slot, and the next call
 * starts where this one did (both sets of the slots it used were used, the others not at all).
 * <p>
 * <b>Results</b> are frames from the switch's address and UDP port to this worker's address, with any UDP
 * destination port: as the P4 program's multicast does, the appliance sends every worker the copy addressed to the
 * port of the worker whose packet completed the slot (the published client's workers share one port).
 * <p>
 * <b>Job byte.</b> The header's job number is a per-call id that the switch echoes (the client's
 * {@code short_job_id}): call c carries {@code (job + c) & 0xFF} and results carrying any other are stray (late
 * results of the previous call, whose TSIs the new call reuses), as the client discards them.
 * <p>
 * Single-threaded; not thread-safe. Allocation-free per packet once constructed (a call may grow the array of
 * answered packets).
 */
public final class SwitchMlWorker
{
    /**
     * Addresses and parameters of the job as the worker uses them.
     *
     * @param job               the job byte of the first call; call c carries {@code (job + c) & 0xFF}. The switch
     *                          finds the job by the worker's address and only echoes this byte.
     * @param workers           W, the job's number of workers (fp32's scale depends on it).
     * @param elementsPerPacket elements per packet (the job's): even, 2 to {@value #MAX_ELEMENTS}.
     * @param outstanding       packets in flight; the job's pool must have at least this many slots.
     * @param timeoutNs         how long a packet may wait for its result before it is sent again.
     */
    public record Config(
        long workerMac, int workerIp, int workerPort, long switchMac, int switchIp, int switchPort,
        int job, int workers, int elementsPerPacket, int outstanding, long timeoutNs)
    {
        public static final int MAX_ELEMENTS = 2048;

        public Config
        {
            if (job < 0 || job > 0xFF)
            {
                throw new IllegalArgumentException("the job byte must be 0..255: " + job);
            }
            if (workers < 1 || workers > ExponentQuantizer.MAX_WORKERS)
            {
                throw new IllegalArgumentException("workers must be 1.." + ExponentQuantizer.MAX_WORKERS + ": " +
                    workers);
            }
            if (elementsPerPacket < 2 || elementsPerPacket > MAX_ELEMENTS || (elementsPerPacket & 1) != 0)
            {
                throw new IllegalArgumentException("elements per packet must be even, 2.." + MAX_ELEMENTS + ": " +
                    elementsPerPacket);
            }
            if (outstanding < 1 || outstanding > SwitchMlHeader.SLOT_MASK + 1)
            {
                throw new IllegalArgumentException("outstanding packets must be 1.." + (SwitchMlHeader.SLOT_MASK + 1));
            }
            if (!SwitchMlHeader.isSwitchMlPort(switchPort))
            {
                throw new IllegalArgumentException("the switch's UDP port must be in 0xBEE0..0xBEEF: " + switchPort);
            }
            if (timeoutNs <= 0)
            {
                throw new IllegalArgumentException("the retransmission timeout must be positive: " + timeoutNs);
            }
        }
    }

    private final Config config;
    private final PacketPort port;
    private final LongSupplier clock;
    private final int elements;
    private final int outstanding;
    private final int frameLength;
    /** The most a packet's timeout grows to, in multiples of the configured one. */
    static final int MAX_BACKOFF = 16;

    private final long[] sentAt;
    /**
     * Each packet in flight's own timeout: the base when first sent, doubled at every retransmission up to
     * {@link #MAX_BACKOFF} times the base, as TCP backs off its RTO. A fixed timeout shorter than a loaded path's
     * round trip resends every packet in flight again and again, and the resends fill the appliance's receive ring
     * (the demo at 1 ms: ten retransmissions per packet and 760 000 frames dropped by the appliance's ring).
     */
    private final long[] timeoutOf;
    /** Whether the packet in flight in a window slot was sent more than once: its result gives no RTT sample. */
    private final boolean[] resent;
    /**
     * The retransmission timeout of a packet sent for the first time: the configured timeout until results have
     * been timed, then max(configured, SRTT + 4 RTTVAR) from the round trips of packets sent once (RFC 6298's
     * estimator, Karn's rule), up to {@link #MAX_BACKOFF} times the configured one. A packet's round trip includes
     * the wait for the slowest worker and the queues of shaped links: at 1 Gbit/s, W = 4 and 128 packets of 4 KiB in
     * flight it is several milliseconds, and a fixed 5 ms timeout resent 0.8 of every tensor again.
     */
    private long rto;
    private long srtt = -1;
    private long rttvar;
    private final int[] packetOf;
    private final BlockCodec.Int32 int32;
    private final BlockCodec.Fp32 fp32;
    private final ResultHandler handler = new ResultHandler();
    private BlockCodec codec;
    private boolean[] done = new boolean[0];
    private int packets;
    /** L: the packets sent at the start of a call, and the distance from a packet to the one its result clocks. */
    private int lead;
    /** Whether the call's data packets lie on the other set of the leading packets' slots (fp32, few blocks). */
    private boolean sparse;
    private int resultsIn;
    private int calls;
    private int jobByte;
    /**
     * Where the next call starts in the pool: the client's {@code switch_pool_index_shift}. A call continues the
     * pool where the last one stopped, so each slot's sets keep alternating across calls: a call that started again
     * at index 0 would meet sets whose bitmaps still hold this worker's bit from the last call, and the switch would
     * take its new packets for retransmissions.
     */
    private int poolShift;
    private long retransmissions;
    private long strayResults;
    private long framesSent;

    public SwitchMlWorker(final Config config, final PacketPort port, final LongSupplier clock)
    {
        this.config = config;
        this.port = port;
        this.clock = clock;
        this.elements = config.elementsPerPacket();
        this.outstanding = config.outstanding();
        this.frameLength = SwitchMlPacketWriter.frameLength(elements);
        this.sentAt = new long[outstanding];
        this.timeoutOf = new long[outstanding];
        this.resent = new boolean[outstanding];
        this.rto = config.timeoutNs();
        this.packetOf = new int[outstanding];
        this.int32 = new BlockCodec.Int32(elements);
        this.fp32 = new BlockCodec.Fp32(elements, new ExponentQuantizer(config.workers()), outstanding);
    }

    /**
     * Sum {@code tensor} with the other workers' in place (wrapping), blocking until every result has arrived.
     *
     * @throws IllegalStateException if no result arrived for {@code deadlineNs} nanoseconds: the call stays unfinished
     *                               and this worker takes no other (the job's slots hold its partial sums until the
     *                               controller resets the job; start again with a new worker).
     */
    public void allreduce(final int[] tensor, final long deadlineNs, final IdleStrategy idle)
    {
        begin(tensor);
        await(deadlineNs, idle);
    }

    /**
     * Sum {@code tensor} with the other workers' in place through SwitchML's block fixed point, blocking until every
     * result has arrived: each element within {@link ExponentQuantizer#errorBound} of the exact sum.
     *
     * @throws IllegalArgumentException if an element is NaN, infinite or 2<sup>127</sup> or more in magnitude
     *                                  (nothing is sent).
     * @throws IllegalStateException    if no result arrived for {@code deadlineNs} nanoseconds (as for int32).
     */
    public void allreduce(final float[] tensor, final long deadlineNs, final IdleStrategy idle)
    {
        begin(tensor);
        await(deadlineNs, idle);
    }

    /**
     * Start a call on {@code tensor}: its first packets go out.
     *
     * @throws IllegalStateException if the last call is not done.
     */
    public void begin(final int[] tensor)
    {
        begin(tensor, tensor.length);
    }

    /**
     * Start a call on the first {@code length} elements of {@code tensor} (the rest is neither sent nor written):
     * for callers that keep one array for calls of any size (a sidecar's).
     *
     * @throws IllegalArgumentException if {@code length} is negative or beyond the array.
     * @throws IllegalStateException    if the last call is not done.
     */
    public void begin(final int[] tensor, final int length)
    {
        requireNoCallInProgress();
        requireLength(length, tensor.length);
        int32.tensor(tensor, length);
        start(int32);
    }

    /**
     * Start a call on {@code tensor}: its leading packets (exponents only) go out.
     *
     * @throws IllegalArgumentException if an element is NaN, infinite or 2<sup>127</sup> or more in magnitude
     *                                  (nothing is sent; the call does not count).
     * @throws IllegalStateException    if the last call is not done.
     */
    public void begin(final float[] tensor)
    {
        begin(tensor, tensor.length);
    }

    /**
     * Start a call on the first {@code length} elements of {@code tensor} (the rest is neither sent nor written).
     *
     * @throws IllegalArgumentException if {@code length} is negative or beyond the array, or an element of the call
     *                                  is NaN, infinite or 2<sup>127</sup> or more in magnitude (nothing is sent;
     *                                  the call does not count).
     * @throws IllegalStateException    if the last call is not done.
     */
    public void begin(final float[] tensor, final int length)
    {
        requireNoCallInProgress();
        requireLength(length, tensor.length);
        fp32.tensor(tensor, length);
        start(fp32);
    }

    public boolean isDone()
    {
        return resultsIn == packets;
    }

    /**
     * @return results of the current (or last) call taken so far: progress, for a caller that drives
     *         {@link #doWork} itself and gives up after a time without any.
     */
    public int resultsIn()
    {
        return resultsIn;
    }

    /**
     * @return packets of the current (or last) call.
     */
    public int packets()
    {
        return packets;
    }

    /**
     * One duty cycle: take the results that arrived (each clocks the next packet on its slot), resend what timed out.
     *
     * @return the work done.
     */
    public int doWork()
    {
        int work = port.receive(handler, 64);
        final long now = clock.getAsLong();
        for (int i = 0; i < lead; i++)
        {
            final int p = packetOf[i];
            if (p >= 0 && !done[p] && now - sentAt[i] > timeoutOf[i])
            {
                retransmissions++;
                final long backedOff = Math.min(2 * timeoutOf[i], MAX_BACKOFF * config.timeoutNs());
                // Karn: packets sent from now on wait as long, until a packet sent once gives a round trip.
                rto = Math.max(rto, backedOff);
                send(p);
                timeoutOf[i] = backedOff;
                resent[i] = true;
                work++;
            }
        }
        port.flush();
        return work;
    }

    public long retransmissions()
    {
        return retransmissions;
    }

    /**
     * @return results that matched no packet in flight of the current call (duplicates of answered ones, the previous
     *         call's, which carry its job byte).
     */
    public long strayResults()
    {
        return strayResults;
    }

    /**
     * @return frames handed to the port (retransmissions included).
     */
    public long framesSent()
    {
        return framesSent;
    }

    /**
     * @return the job byte the current (or last) call carries.
     */
    public int jobByte()
    {
        return jobByte;
    }

    private void await(final long deadlineNs, final IdleStrategy idle)
    {
        long lastProgress = clock.getAsLong();
        while (!isDone())
        {
            final int before = resultsIn;
            final int work = doWork();
            final long now = clock.getAsLong();
            if (resultsIn != before)
            {
                lastProgress = now;
            }
            else if (now - lastProgress > deadlineNs)
            {
                throw new IllegalStateException("SwitchML call " + (calls - 1) + " (job byte " + jobByte + "): no result " +
                    "for " + (deadlineNs / 1_000_000) + " ms; " + resultsIn + " of " + packets + " packets summed, " +
                    retransmissions + " retransmissions (is the job installed on the appliance, with this worker?)");
            }
            idle.idle(work);
        }
    }

    private static void requireLength(final int length, final int capacity)
    {
        if (length < 0 || length > capacity)
        {
            throw new IllegalArgumentException("a call of " + length + " elements on an array of " + capacity);
        }
    }

    private void requireNoCallInProgress()
    {
        if (!isDone())
        {
            throw new IllegalStateException("SwitchML call " + (calls - 1) + " is in progress: " + resultsIn + " of " +
                packets + " results in");
        }
    }

    private void start(final BlockCodec next)
    {
        codec = next;
        final int blocks = next.blocks;
        lead = Math.min(outstanding, blocks);
        packets = next.looksAhead() ? blocks + lead : blocks;
        sparse = next.looksAhead() && lead < outstanding;
        next.start(lead);
        jobByte = (config.job() + calls) & 0xFF;
        calls++;
        if (done.length < packets)
        {
            done = new boolean[packets];
        }
        else
        {
            Arrays.fill(done, 0, packets, false);
        }
        resultsIn = 0;
        Arrays.fill(packetOf, -1);
        for (int p = 0; p < lead; p++)
        {
            send(p);
        }
        port.flush();
    }

    private void send(final int p)
    {
        final int window = p % lead;
        packetOf[window] = p;
        sentAt[window] = clock.getAsLong();
        timeoutOf[window] = rto;
        resent[window] = false;
        final int index = port.tryClaim(frameLength);
        if (index < 0)
        {
            return; // the timeout sends it again
        }
        final MutableDirectBuffer buffer = port.claimBuffer();
        final int position = sparse && p >= lead ? outstanding + p - lead : p;
        final int i = (position + poolShift) % (2 * outstanding);
        final int poolIndex = i < outstanding ? i : (i - outstanding) | SwitchMlHeader.SHADOW_SET_BIT;
        final int exponent = codec.encode(p, buffer, SwitchMlPacketWriter.elementsOffset(index));
        SwitchMlPacketWriter.writeHeaders(buffer, index, config.workerMac(), config.switchMac(), config.workerIp(),
            config.switchIp(), config.workerPort(), config.switchPort(), jobByte, p, poolIndex, exponent, exponent,
            elements);
        port.commit();
        framesSent++;
    }

    private void onResult(final int p, final MutableDirectBuffer buffer, final int offset, final int header)
    {
        done[p] = true;
        resultsIn++;
        final int window = p % lead;
        if (!resent[window])
        {
            sampleRoundTrip(clock.getAsLong() - sentAt[window]);
        }
        if (resultsIn == packets)
        {
            // The sparse layout used both sets of its slots and no others: the next call starts where this one did.
            poolShift = sparse ? poolShift : (poolShift + packets) % (2 * outstanding);
        }
        codec.decode(p, buffer, SwitchMlPacketWriter.elementsOffset(offset), SwitchMlHeader.exponent0(buffer, header));
        // The slot's other set carries the packet L later: the switch may reuse this set only once every worker has
        // this result, which the other set's completion proves.
        final int next = p + lead;
        if (next < packets)
        {
            send(next);
        }
    }

    private void sampleRoundTrip(final long sample)
    {
        if (srtt < 0)
        {
            srtt = sample;
            rttvar = sample / 2;
        }
        else
        {
            rttvar += (Math.abs(srtt - sample) - rttvar) / 4;
            srtt += (sample - srtt) / 8;
        }
        rto = Math.min(Math.max(config.timeoutNs(), srtt + 4 * rttvar), MAX_BACKOFF * config.timeoutNs());
    }

    /**
     * @return the timeout a packet sent now for the first time gets (see {@link #rto}).
     */
    public long retransmissionTimeoutNs()
    {
        return rto;
    }

    private final class ResultHandler implements FrameHandler
    {
        @Override
        public void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
        {
            if (length < frameLength || EthernetHeader.etherType(buffer, offset) != EthernetHeader.ETHER_TYPE_IPV4)
            {
                return;
            }
            final int ip = offset + EthernetHeader.LENGTH;
            if (Ipv4Header.protocol(buffer, ip) != Ipv4Header.PROTOCOL_UDP ||
                Ipv4Header.headerLength(buffer, ip) != Ipv4Header.MIN_LENGTH ||
                Ipv4Header.src(buffer, ip) != config.switchIp() || Ipv4Header.dst(buffer, ip) != config.workerIp())
            {
                return;
            }
            final int udp = ip + Ipv4Header.MIN_LENGTH;
            final int header = udp + UdpHeader.LENGTH;
            // Not the destination port: the switch's result copies all carry the completing worker's source port
            // (udp_sender.p4), which is another worker's where workers' ports differ.
            if (UdpHeader.srcPort(buffer, udp) != config.switchPort())
            {
                return;
            }
            final int p = SwitchMlHeader.tsi(buffer, header);
            if (SwitchMlHeader.job(buffer, header) != jobByte || p < 0 || p >= packets || done[p] ||
                packetOf[p % lead] != p)
            {
                strayResults++;
                return;
            }
            onResult(p, buffer, offset, header);
        }
    }
}
