package io.netreduce.dataplane.frame;

import io.netreduce.dataplane.clt.FlowKey;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.Ecn;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.MutableDirectBuffer;

/**
 * The frame in hand: where it lies in the receive ring, which port it came from, when its batch arrived, its
 * parsed headers ({@link RoceFrame}) and, once asked for, its connection key ({@link FlowKey}). One instance,
 * refilled for every frame, is shared by the stages of the per-packet path so that none of them passes
 * addresses and offsets around as loose scalars.
 * <p>
 * Single-threaded: owned by the dataplane thread.
 */
public final class ArrivingFrame
{
    private static final int CONGESTION_UNKNOWN = -1;

    private final RoceFrame frame = new RoceFrame();
    private final FlowKey key = new FlowKey();
    private MutableDirectBuffer buffer;
    private int offset;
    private int length;
    private int flags;
    private int port;
    private long batchNs;
    private PacketPort receivePort;
    private int markAt;
    private int congestion;

    /**
     * @param receivePort the port the batch is read from.
     * @param markAt      the receive queue's backlog, in frames, from which the appliance marks (0: it does not).
     */
    public void beginBatch(final int port, final long nowNs, final PacketPort receivePort, final int markAt)
    {
        this.port = port;
        this.batchNs = nowNs;
        this.receivePort = receivePort;
        this.markAt = markAt;
        this.congestion = CONGESTION_UNKNOWN;
    }

    /**
     * The appliance's own mark, one rule for every protocol: a packet read while the port's receive queue holds at
     * least the marking threshold counts as CE, unless it is CE already or not ECN-capable (a Not-ECT packet is never
     * marked, RFC 3168 §5). The queue is looked at once per batch, at its first ECN-capable packet, not when the
     * batch begins: the dataplane begins a batch on every turn, most of them on an empty port, and a check there would
     * fill the JIT's profile with idle turns, whose queue is never backed up; C2 then compiled the duty cycle with the
     * backed-up branch left out, and the first busy call threw that code away (docs/performance.md).
     *
     * @param ecn the packet's ECN codepoint as it arrived.
     * @return whether the appliance marks it.
     */
    public boolean queueMarks(final int ecn)
    {
        return ecn != Ecn.CE && Ecn.isCapable(ecn) && queueCongested();
    }

    private boolean queueCongested()
    {
        if (congestion == CONGESTION_UNKNOWN)
        {
            congestion = markAt > 0 && receivePort.receiveBacklogAtLeast(markAt) ? 1 : 0;
        }
        return congestion == 1;
    }

    /**
     * Take the next frame of the batch and parse it.
     *
     * @return the parse status, one of {@link RoceFrame}'s status codes.
     */
    public int arrive(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        this.buffer = buffer;
        this.offset = offset;
        this.length = length;
        this.flags = flags;
        return frame.wrap(buffer, offset, length);
    }

    /**
     * Fill the connection key from the parsed addresses and destination QP (a QP of 0 when the BTH could not be
     * read: the key is then only good for address-pair look-ups).
     */
    public FlowKey key(final int qp)
    {
        return key.wrap(buffer, frame.srcAddressOffset(), frame.dstAddressOffset(), frame.addressLength(), qp);
    }

    /** The key last filled by {@link #key(int)}. */
    public FlowKey key()
    {
        return key;
    }

    public RoceFrame frame()
    {
        return frame;
    }

    public MutableDirectBuffer buffer()
    {
        return buffer;
    }

    public int offset()
    {
        return offset;
    }

    public int length()
    {
        return length;
    }

    public int flags()
    {
        return flags;
    }

    public int port()
    {
        return port;
    }

    public long batchNs()
    {
        return batchNs;
    }
}
