package io.netreduce.host.switchml;

import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.SwitchMlHeader;
import io.netreduce.protocol.wire.UdpHeader;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import org.agrona.MutableDirectBuffer;

import java.util.Arrays;
import java.util.function.LongSupplier;

/**
 * A SwitchML worker (paper §4, Algorithm 2; the published client's DPDK worker thread): all-reduces an int32 tensor
 * through a SwitchML switch (the appliance) with a self-clocked pool of {@code outstanding} packets.
 * <p>
 * Packet p carries elements [p·k, (p+1)·k) and pool index {@code (p + shift) mod 2·outstanding} mapped as the
 * client's {@code PktId2PoolIndex} maps it (the shift carries the pool on from the previous call): the first {@code outstanding} in set 0, the next in set 1 of the same slots. The
 * result of p clocks the next packet, p + outstanding, onto the same slot's other set; a packet without its result
 * within the timeout is sent again, with the same bytes, as often as needed. The switch answers a retransmission
 * to a complete slot from its stored result and never adds a contribution twice, so the sum is exact. The last
 * packet is padded with zeros. The TSI carries p, so a result is matched to its packet without state in the switch.
 * <p>
 * Single-threaded; not thread-safe. Allocation-free per packet once constructed.
 */
public final class SwitchMlWorker
{
    /**
     * Addresses and parameters of the job as the worker uses them.
     *
     * @param job               the job number.
     * @param elementsPerPacket int32 elements per packet (the job's).
     * @param outstanding       packets in flight; the job's pool must have at least this many slots.
     * @param timeoutNs         how long a packet may wait for its result before it is sent again.
     */
    public record Config(
        long workerMac, int workerIp, int workerPort, long switchMac, int switchIp, int switchPort,
        int job, int elementsPerPacket, int outstanding, long timeoutNs)
    {
        public Config
        {
            if (outstanding < 1 || outstanding > SwitchMlHeader.SLOT_MASK + 1)
            {
                throw new IllegalArgumentException("outstanding packets must be 1.." + (SwitchMlHeader.SLOT_MASK + 1));
            }
            if (!SwitchMlHeader.isSwitchMlPort(switchPort))
            {
                throw new IllegalArgumentException("the switch's UDP port must be in 0xBEE0..0xBEEF: " + switchPort);
            }
        }
    }

    private final Config config;
    private final PacketPort port;
    private final LongSupplier clock;
    private final int elements;
    private final int frameLength;
    private final long[] sentAt;
    private final int[] packetOf;
    private final ResultHandler handler = new ResultHandler();
    private int[] tensor;
    private int packets;
    private int resultsIn;
    private boolean[] done;
    /**
     * Where the next call starts in the pool: the client's {@code switch_pool_index_shift}. A call continues the
     * pool where the last one stopped, so each slot's sets keep alternating across calls: a call that started again
     * at index 0 would meet sets whose bitmaps still hold this worker's bit from the last call, and the switch would
     * take its new packets for retransmissions.
     */
    private int poolShift;
    private long retransmissions;
    private long strayResults;

    public SwitchMlWorker(final Config config, final PacketPort port, final LongSupplier clock)
    {
        this.config = config;
        this.port = port;
        this.clock = clock;
        this.elements = config.elementsPerPacket();
        this.frameLength = SwitchMlPacketWriter.frameLength(elements);
        this.sentAt = new long[config.outstanding()];
        this.packetOf = new int[config.outstanding()];
    }

    /**
     * Sum {@code tensor} with the other workers' in place, blocking until every result has arrived.
     *
     * @param idle called when a duty cycle did nothing (e.g. {@code Thread::onSpinWait}).
     * @throws IllegalStateException if no result arrived for {@code deadlineNs} nanoseconds.
     */
    public void allreduce(final int[] tensor, final long deadlineNs, final Runnable idle)
    {
        begin(tensor);
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
                throw new IllegalStateException("SwitchML job " + config.job() + ": no result for " +
                    (deadlineNs / 1_000_000) + " ms; " + resultsIn + " of " + packets + " packets summed, " +
                    retransmissions + " retransmissions (is the job installed on the appliance, with this worker?)");
            }
            if (work == 0)
            {
                idle.run();
            }
        }
    }

    /**
     * Start a call on {@code tensor}: its first {@code outstanding} packets go out.
     */
    public void begin(final int[] tensor)
    {
        this.tensor = tensor;
        this.packets = (tensor.length + elements - 1) / elements;
        this.done = new boolean[packets];
        this.resultsIn = 0;
        Arrays.fill(packetOf, -1);
        for (int p = 0; p < packets && p < config.outstanding(); p++)
        {
            send(p);
        }
        port.flush();
    }

    public boolean isDone()
    {
        return resultsIn == packets;
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
        for (int i = 0; i < packetOf.length; i++)
        {
            final int p = packetOf[i];
            if (p >= 0 && !done[p] && now - sentAt[i] > config.timeoutNs())
            {
                retransmissions++;
                send(p);
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
     * @return results that matched no packet in flight (duplicates of answered ones, other jobs').
     */
    public long strayResults()
    {
        return strayResults;
    }

    private void send(final int p)
    {
        final int index = port.tryClaim(frameLength);
        final int window = p % config.outstanding();
        packetOf[window] = p;
        sentAt[window] = clock.getAsLong();
        if (index < 0)
        {
            return; // the timeout sends it again
        }
        final MutableDirectBuffer buffer = port.claimBuffer();
        final int i = (p + poolShift) % (2 * config.outstanding());
        final int poolIndex = i < config.outstanding() ? i : (i - config.outstanding()) | SwitchMlHeader.SHADOW_SET_BIT;
        SwitchMlPacketWriter.writeHeaders(buffer, index, config.workerMac(), config.switchMac(), config.workerIp(),
            config.switchIp(), config.workerPort(), config.switchPort(), config.job(), p, poolIndex, 0, 0, elements);
        final int from = p * elements;
        final int count = Math.min(elements, tensor.length - from);
        SwitchMlPacketWriter.writeElements(buffer, index, tensor, from, count);
        final int pad = SwitchMlPacketWriter.elementsOffset(index) + count * Integer.BYTES;
        buffer.setMemory(pad, (elements - count) * Integer.BYTES, (byte)0);
        port.commit();
    }

    private final class ResultHandler implements FrameHandler
    {
        @Override
        public void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
        {
            if (length < SwitchMlPacketWriter.frameLength(elements) ||
                EthernetHeader.etherType(buffer, offset) != EthernetHeader.ETHER_TYPE_IPV4)
            {
                return;
            }
            final int ip = offset + EthernetHeader.LENGTH;
            if (Ipv4Header.protocol(buffer, ip) != Ipv4Header.PROTOCOL_UDP ||
                Ipv4Header.src(buffer, ip) != config.switchIp() || Ipv4Header.dst(buffer, ip) != config.workerIp())
            {
                return;
            }
            final int udp = ip + Ipv4Header.headerLength(buffer, ip);
            final int header = udp + UdpHeader.LENGTH;
            if (UdpHeader.dstPort(buffer, udp) != config.workerPort() || SwitchMlHeader.job(buffer, header) != config.job())
            {
                return;
            }
            final int p = SwitchMlHeader.tsi(buffer, header);
            final int window = Math.floorMod(p, config.outstanding());
            if (p < 0 || p >= packets || packetOf[window] != p || done[p])
            {
                strayResults++;
                return;
            }
            done[p] = true;
            resultsIn++;
            if (resultsIn == packets)
            {
                poolShift = (poolShift + packets) % (2 * config.outstanding());
            }
            final int from = p * elements;
            final int count = Math.min(elements, tensor.length - from);
            for (int e = 0; e < count; e++)
            {
                tensor[from + e] = SwitchMlPacketWriter.element(buffer, offset, e);
            }
            // The slot's other set carries the packet one pool later: the switch may reuse this set only once every
            // worker has this result, which the other set's completion proves.
            final int next = p + config.outstanding();
            if (next < packets)
            {
                send(next);
            }
        }
    }
}
