package io.netreduce.dataplane.frame;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.L4Checksum;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * Where frames leave the per-packet path: forwarded unchanged to the peer of the port they came in on, built in
 * place in a port's transmit slot (results), or dropped under a counted reason. Every frame the dataplane
 * receives ends here exactly once (a completed aggregation also sends one result per rank).
 */
public final class FrameOutput
{
    private final PacketPort[] ports;
    private final int[] peers;
    private final DataplaneCounters counters;
    private final CaptureTaps taps;
    private final AtomicCounter framesSent;
    private final AtomicCounter txFull;
    private final AtomicCounter passThrough;
    private final AtomicCounter checksumCompleted;

    /**
     * @param peers for each port index, the index of the port its frames leave on (itself for one-armed, the
     *              other port for bump-in-the-wire).
     */
    public FrameOutput(
        final PacketPort[] ports, final int[] peers, final DataplaneCounters counters, final CaptureTaps taps)
    {
        if (peers.length != ports.length)
        {
            throw new IllegalArgumentException("one peer per port needed: " + ports.length + " ports, " +
                peers.length + " peers");
        }
        for (final int peer : peers)
        {
            if (peer < 0 || peer >= ports.length)
            {
                throw new IllegalArgumentException("peer port " + peer + " does not exist");
            }
        }
        this.ports = ports;
        this.peers = peers.clone();
        this.counters = counters;
        this.taps = taps;
        this.framesSent = counters.counter(DataplaneCounter.FRAMES_SENT);
        this.txFull = counters.counter(DataplaneCounter.TX_FULL);
        this.passThrough = counters.counter(DataplaneCounter.PASS_THROUGH);
        this.checksumCompleted = counters.counter(DataplaneCounter.PASS_THROUGH_CHECKSUM_COMPLETED);
    }

    /**
     * Send the frame in hand on, unchanged but for an L4 checksum the receiving port flagged as partial.
     */
    public void forward(final ArrivingFrame arriving)
    {
        final MutableDirectBuffer buffer = arriving.buffer();
        final int offset = arriving.offset();
        final int length = arriving.length();
        if ((arriving.flags() & FrameHandler.FLAG_CHECKSUM_NOT_READY) != 0 &&
            L4Checksum.completePartial(buffer, offset, length))
        {
            checksumCompleted.incrementRelease();
        }
        passThrough.incrementRelease();
        if (ports[peers[arriving.port()]].send(buffer, offset, length))
        {
            framesSent.incrementRelease();
        }
        else
        {
            txFull.incrementRelease();
        }
    }

    /**
     * Drop the frame in hand: count it under its reason and show it to the drop capture, if one runs.
     */
    public void drop(final ArrivingFrame arriving, final DataplaneCounter reason)
    {
        counters.increment(reason);
        taps.onDrop(arriving, reason);
    }

    /**
     * Claim a transmit slot for a frame of {@code length} bytes leaving towards the peer of {@code arrivalPort}.
     *
     * @return the index in {@link #claimBuffer(int)} to write the frame at, or -1 (counted) when the port
     *         cannot take it.
     */
    public int claim(final int arrivalPort, final int length)
    {
        final int index = ports[peers[arrivalPort]].tryClaim(length);
        if (index < 0)
        {
            txFull.incrementRelease();
        }
        return index;
    }

    public MutableDirectBuffer claimBuffer(final int arrivalPort)
    {
        return ports[peers[arrivalPort]].claimBuffer();
    }

    public void commit(final int arrivalPort)
    {
        ports[peers[arrivalPort]].commit();
        framesSent.incrementRelease();
    }
}
