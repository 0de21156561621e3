package io.netreduce.dataplane.agent;

import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.port.PortException;
import io.netreduce.protocol.wire.EthernetHeader;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The warm-up's two AF_PACKET ports on the loopback interface ({@link PacketPathWarmUp}): the private agent's port,
 * opened with the serving ports' settings, and a feeder that sends it a round's frames, a receive ring's worth at a
 * time, each time waiting for the agent to have read them, so that the ring never overflows however slowly the
 * agent runs while it is still interpreted.
 * <p>
 * On {@code lo} every packet socket sees every frame sent there: the agent would take its own results back for
 * retransmitted ring packets and answer them again, and would read the host's own loopback traffic. So each port
 * marks what it sends (SO_MARK, which {@code lo} keeps as the frame's skb->mark) and the agent's port receives only
 * the feeder's mark (a socket filter); the feeder receives nothing. The frames go to made-up unicast MACs, so the
 * loopback interface hands them to packet sockets only: the host's IP stack drops them as addressed to another
 * host, as it does any frame on {@code lo} whose destination MAC is not {@code lo}'s own.
 * <p>
 * The marks differ per process (its pid in them), so that daemons warming up at once on one host's {@code lo} do
 * not read each other's frames.
 */
final class LoopbackFeed implements AutoCloseable
{
    static final String INTERFACE = "lo";
    /** Receive blocks of the agent's port here: with {@link #SLOT} slots, 256 frames, a round's feed in 3 parts. */
    private static final int RX_BLOCK_SIZE = 1 << 18;
    private static final int RX_BLOCKS = 8;
    /** Receive and transmit slots: a 4 KiB frame behind the slot's header and a virtio header. */
    private static final int SLOT = 8192;
    /** The slot's header and a virtio header (10 bytes) fit in this, in front of a frame. */
    private static final int SLOT_OVERHEAD = 128;
    /** How long the agent may take to read a part fed without reading any of it before the rest counts as lost. */
    private static final long STALL_NS = 200_000_000L;

    private static final int PROBE_LENGTH = 64;
    private static final long PROBE_WAIT_NS = 100_000_000L;
    /** IEEE 802's local experimental EtherType: no protocol of the host's takes the probe. */
    private static final int LOCAL_EXPERIMENTAL_ETHER_TYPE = 0x88B5;

    private final AfPacketPort port;
    private final AfPacketPort feeder;

    private LoopbackFeed(final AfPacketPort port, final AfPacketPort feeder)
    {
        this.port = port;
        this.feeder = feeder;
    }

    /**
     * @param settings       the serving ports' settings: the agent's port here takes them but for the interface, a
     *                       smaller receive ring (no promiscuous mode: {@code lo} hands every frame over anyway).
     * @param maxFrameLength the longest frame fed.
     * @throws PortException where {@code lo} cannot take the ports (no such interface, no rights).
     */
    static LoopbackFeed open(final AfPacketConfiguration settings, final int maxFrameLength)
    {
        if (maxFrameLength + SLOT_OVERHEAD > SLOT)
        {
            throw new IllegalArgumentException("frames of " + maxFrameLength + " bytes do not fit the warm-up's slots");
        }
        final int pid = (int)(ProcessHandle.current().pid() & 0x7FFF);
        final int feederMark = 0x4E52_0000 | (pid << 1);
        final int resultMark = feederMark | 1;
        AfPacketPort port = null;
        AfPacketPort feeder = null;
        try
        {
            port = AfPacketPort.open(settings.withInterfaceName(INTERFACE).withPromiscuous(false)
                .withRxFrameSize(SLOT).withRxRing(RX_BLOCK_SIZE, RX_BLOCKS, settings.rxBlockTimeoutMs()));
            port.receiveOnlyMarked(feederMark);
            port.markTransmits(resultMark);
            // with a virtio header on every frame, so that it can leave a frame's L4 checksum to finish
            feeder = AfPacketPort.open(AfPacketConfiguration.defaults(INTERFACE).withPromiscuous(false)
                .withSegmentationOffload(true).withRxFrameSize(AfPacketConfiguration.MIN_RX_FRAME_SIZE)
                .withRxRing(4096, 2, 1).withTxRing(SLOT, port.receiveCapacity()));
            feeder.receiveNothing();
            feeder.markTransmits(feederMark);
            probe(port, feeder);
            return new LoopbackFeed(port, feeder);
        }
        catch (final PortException | IllegalArgumentException ex)
        {
            if (feeder != null)
            {
                feeder.close();
            }
            if (port != null)
            {
                port.close();
            }
            throw ex instanceof PortException portException ? portException :
                new PortException("the warm-up's ports: " + ex.getMessage());
        }
    }

    /**
     * A frame from the feeder must reach the port: an interface that is down takes the sockets and drops what they
     * send (a network namespace's {@code lo} until brought up).
     */
    private static void probe(final AfPacketPort port, final AfPacketPort feeder)
    {
        final UnsafeBuffer frame = new UnsafeBuffer(new byte[PROBE_LENGTH]);
        EthernetHeader.dstMac(frame, 0, 0x02_00_00_00_00_FEL);
        EthernetHeader.srcMac(frame, 0, 0x02_00_00_00_00_FFL);
        EthernetHeader.etherType(frame, 0, LOCAL_EXPERIMENTAL_ETHER_TYPE);
        final int[] seen = new int[1];
        final FrameHandler count = (buffer, offset, length, flags) -> seen[0]++;
        if (feeder.send(frame, 0, PROBE_LENGTH) && feeder.flush() == 1)
        {
            final long deadline = System.nanoTime() + PROBE_WAIT_NS;
            while (seen[0] == 0 && System.nanoTime() < deadline)
            {
                port.receive(count, 1);
            }
        }
        if (seen[0] == 0)
        {
            throw new PortException("a frame sent on " + INTERFACE + " did not arrive (is the interface up?)");
        }
    }

    /**
     * @return the private agent's port.
     */
    PacketPort port()
    {
        return port;
    }

    /**
     * Send {@code count} frames of {@code round} to the agent's port, a receive ring's worth at a time, and run the
     * agent until it has read each part.
     *
     * @return frames that did not reach the agent (none expected).
     */
    long feed(final PacketPathWarmUp.RoundFrames round, final int count, final DataplaneAgent agent)
    {
        final ReplayPort frames = round.port;
        final int part = port.receiveCapacity();
        long lost = 0;
        for (int next = 0; next < count; )
        {
            final int end = Math.min(count, next + part);
            long target = port.counters().rxFrames() + (end - next);
            for (; next < end; next++)
            {
                if (!send(round, next))
                {
                    feeder.flush();
                    if (!send(round, next))
                    {
                        lost++; // its transmit ring still full after a kick: counted, and not waited for
                        target--;
                    }
                }
            }
            feeder.flush();
            long read = port.counters().rxFrames();
            long progressNs = System.nanoTime();
            while (read < target)
            {
                agent.doWork();
                final long now = port.counters().rxFrames();
                if (now != read)
                {
                    read = now;
                    progressNs = System.nanoTime();
                }
                else if (System.nanoTime() - progressNs > STALL_NS)
                {
                    lost += target - read;
                    break;
                }
            }
        }
        return lost;
    }

    private boolean send(final PacketPathWarmUp.RoundFrames round, final int index)
    {
        final ReplayPort frames = round.port;
        return feeder.sendUnbatched(frames.frames(), frames.offset(index), frames.length(index),
            round.checksumStart(), round.checksumField(index));
    }

    @Override
    public void close()
    {
        feeder.close();
        port.close();
    }
}
