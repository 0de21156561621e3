package io.netreduce.protocol.port;

import org.agrona.BitUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

/**
 * Counters of one {@link PacketPort}: written by the port's owning thread only, readable from any thread
 * (metrics exporters, tests, the control plane).
 * <p>
 * Values live in an off-heap array of longs, each on its own cache line so a reader polling one counter does not
 * slow the writer down on the others. The writer uses plain-read plus release-store adds ({@code addLongRelease}),
 * which are as cheap as plain stores on x86; readers use volatile loads. Counters only grow.
 */
public final class PortCounters
{
    /** Frames delivered to a {@link FrameHandler}. */
    public static final int RX_FRAMES = 0;
    /** Bytes of frames delivered to a {@link FrameHandler}. */
    public static final int RX_BYTES = 1;
    /** Frames handed to the kernel (or the peer, for memory ports) by {@link PacketPort#flush()}. */
    public static final int TX_FRAMES = 2;
    /** Bytes of frames counted in {@link #TX_FRAMES}. */
    public static final int TX_BYTES = 3;
    /** Frames the receive path lost before the port saw them: kernel ring overflow (PACKET_STATISTICS tp_drops). */
    public static final int RX_DROPPED = 4;
    /** {@link PacketPort#send} calls refused because every transmit slot was in use. */
    public static final int TX_RING_FULL = 5;
    /** Frames that could not be sent: oversize or undersize frames, failed kicks of the transmit ring. */
    public static final int TX_ERRORS = 6;
    /** Received frames discarded because they were truncated to fit the ring (snaplen below the wire length). */
    public static final int RX_TRUNCATED = 7;
    /**
     * Segmentation offload frames received and split back into the wire frames they stand for (each of which
     * {@link #RX_FRAMES} counts).
     */
    public static final int RX_GSO_FRAMES = 8;
    /** Segmentation offload frames sent: batches of two or more frames handed to the kernel as one. */
    public static final int TX_GSO_FRAMES = 9;
    /** Offload frames received of a kind the port does not split (not untagged IPv4 UDP): dropped. */
    public static final int RX_GSO_UNSUPPORTED = 10;

    /**
     * Kicks of an AF_PACKET transmit ring after which the kernel had not taken every frame queued: its socket's
     * buffer was full (EAGAIN), the rest wait in the ring for a later kick. Rising steadily, the socket's buffer is
     * smaller than what the port keeps queued in front of its links.
     */
    public static final int TX_KICKS_REFUSED = 11;

    /** Number of counters. */
    public static final int COUNTER_COUNT = 12;

    private static final String[] NAMES =
        {
            "rx_frames", "rx_bytes", "tx_frames", "tx_bytes", "rx_dropped", "tx_ring_full", "tx_errors", "rx_truncated",
            "rx_gso_frames", "tx_gso_frames", "rx_gso_unsupported", "tx_kicks_refused"
        };

    private static final int STRIDE = BitUtil.CACHE_LINE_LENGTH;

    private final UnsafeBuffer values;

    public PortCounters()
    {
        values = new UnsafeBuffer(ByteBuffer.allocateDirect(COUNTER_COUNT * STRIDE + STRIDE));
        // Align the first counter to a cache line whatever the direct buffer's own alignment.
        final int misalignment = (int)(values.addressOffset() & (STRIDE - 1));
        if (misalignment != 0)
        {
            values.wrap(values, STRIDE - misalignment, COUNTER_COUNT * STRIDE);
        }
    }

    /**
     * @param id one of the counter ids, {@code 0 <= id < COUNTER_COUNT}.
     * @return the counter's snake_case name, e.g. {@code rx_frames}, for metrics export.
     */
    public static String name(final int id)
    {
        return NAMES[id];
    }

    /**
     * @param id one of the counter ids.
     * @return the counter's current value, safe to call from any thread.
     */
    public long get(final int id)
    {
        return values.getLongVolatile(id * STRIDE);
    }

    /**
     * Add to a counter. Only the port's owning thread may call this.
     *
     * @param id    one of the counter ids.
     * @param delta amount to add, not negative.
     */
    public void add(final int id, final long delta)
    {
        values.addLongRelease(id * STRIDE, delta);
    }

    /**
     * Count one received frame. Owning thread only.
     */
    public void onFrameReceived(final int length)
    {
        add(RX_FRAMES, 1);
        add(RX_BYTES, length);
    }

    /**
     * Count one transmitted frame. Owning thread only.
     */
    public void onFrameTransmitted(final int length)
    {
        add(TX_FRAMES, 1);
        add(TX_BYTES, length);
    }

    public long rxFrames()
    {
        return get(RX_FRAMES);
    }

    public long rxBytes()
    {
        return get(RX_BYTES);
    }

    public long txFrames()
    {
        return get(TX_FRAMES);
    }

    public long txBytes()
    {
        return get(TX_BYTES);
    }

    public long rxDropped()
    {
        return get(RX_DROPPED);
    }

    public long txRingFull()
    {
        return get(TX_RING_FULL);
    }

    public long txErrors()
    {
        return get(TX_ERRORS);
    }

    public long rxTruncated()
    {
        return get(RX_TRUNCATED);
    }

    @Override
    public String toString()
    {
        final StringBuilder builder = new StringBuilder("PortCounters{");
        for (int id = 0; id < COUNTER_COUNT; id++)
        {
            builder.append(id == 0 ? "" : ", ").append(NAMES[id]).append('=').append(get(id));
        }
        return builder.append('}').toString();
    }
}
