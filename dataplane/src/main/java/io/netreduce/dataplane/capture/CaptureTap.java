package io.netreduce.dataplane.capture;

import org.agrona.BitUtil;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.MessageHandler;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.ManyToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A capture tap: the dataplane threads (one per lane) copy frames into a bounded many-producer ring buffer over
 * off-heap memory, a control-side writer drains it into a pcap file ({@link CaptureFileWriter}). When the ring is
 * full the frame is not captured and counted as lost: the dataplane never waits for the writer. With several lanes
 * the records of different lanes interleave in the order their claims were made.
 * <p>
 * A tap either sees every frame received on one port ({@link #forPort}) or every frame the dataplane drops,
 * optionally only those received on one port ({@link #forDrops}). The control thread creates it and hands it to
 * the dataplane with a start-capture command; the dataplane installs it between two batches and removes it on
 * a stop-capture command, after which it never writes to the ring again.
 * <p>
 * Each ring record (type {@link #RECORD_TYPE}) is a small header followed by the captured bytes:
 * <pre>
 *   0  timestamp    long  System.nanoTime() of the batch the frame arrived in
 *   8  port         int   index of the port the frame arrived on
 *  12  reason       int   DataplaneCounter ordinal of the drop reason, or NO_REASON
 *  16  original     int   the frame's length; the captured bytes may be fewer (snap length)
 *  20  frame bytes
 * </pre>
 * {@link #offer} is called only on dataplane threads, never blocks and does not allocate; the counters are
 * readable from any thread.
 */
public final class CaptureTap
{
    /** Ring buffer bytes by default (4 MiB: about 2,700 full-size 1500-byte-MTU frames of slack for the writer). */
    public static final int DEFAULT_RING_CAPACITY = 4 * 1024 * 1024;
    /** Port filter of a drop tap that takes drops of every port. */
    public static final int ANY_PORT = -1;
    /** Reason of a record that is not a drop. */
    public static final int NO_REASON = -1;
    /** Ring buffer message type of a captured frame. */
    public static final int RECORD_TYPE = 1;

    public static final int TIMESTAMP_OFFSET = 0;
    public static final int PORT_OFFSET = 8;
    public static final int REASON_OFFSET = 12;
    public static final int ORIGINAL_LENGTH_OFFSET = 16;
    public static final int FRAME_OFFSET = 20;

    private final int id;
    private final boolean drops;
    private final int port;
    private final ManyToOneRingBuffer ring;
    private final AtomicBuffer ringBuffer;
    private final int snapLength;
    private final AtomicLong captured = new AtomicLong();
    private final AtomicLong lost = new AtomicLong();

    private CaptureTap(final int id, final boolean drops, final int port, final int ringCapacity)
    {
        if (!BitUtil.isPowerOfTwo(ringCapacity) || ringCapacity < 4096)
        {
            throw new IllegalArgumentException("capture ring capacity must be a power of two >= 4096: " + ringCapacity);
        }
        this.id = id;
        this.drops = drops;
        this.port = port;
        this.ring = new ManyToOneRingBuffer(new UnsafeBuffer(
            ByteBuffer.allocateDirect(ringCapacity + RingBufferDescriptor.TRAILER_LENGTH)));
        this.ringBuffer = ring.buffer();
        this.snapLength = ring.maxMsgLength() - FRAME_OFFSET;
    }

    /**
     * A tap on every frame received on a port.
     *
     * @param id           the capture id, unique among installed taps.
     * @param port         the port index.
     * @param ringCapacity ring buffer bytes, a power of two.
     */
    public static CaptureTap forPort(final int id, final int port, final int ringCapacity)
    {
        if (port < 0)
        {
            throw new IllegalArgumentException("port index must be >= 0: " + port);
        }
        return new CaptureTap(id, false, port, ringCapacity);
    }

    /**
     * A tap on every frame the dataplane drops.
     *
     * @param id           the capture id, unique among installed taps.
     * @param port         only drops of frames received on this port index, or {@link #ANY_PORT}.
     * @param ringCapacity ring buffer bytes, a power of two.
     */
    public static CaptureTap forDrops(final int id, final int port, final int ringCapacity)
    {
        if (port < ANY_PORT)
        {
            throw new IllegalArgumentException("port index must be >= 0 or ANY_PORT: " + port);
        }
        return new CaptureTap(id, true, port, ringCapacity);
    }

    public int id()
    {
        return id;
    }

    /**
     * @return true for a tap on dropped frames, false for a tap on a port's received frames.
     */
    public boolean drops()
    {
        return drops;
    }

    /**
     * @return the port index captured (or filtered on, for drops), or {@link #ANY_PORT}.
     */
    public int port()
    {
        return port;
    }

    /**
     * @return whether a frame received on {@code portIndex} is for this tap's port filter.
     */
    public boolean acceptsPort(final int portIndex)
    {
        return port == ANY_PORT || port == portIndex;
    }

    /**
     * @return the most bytes of a frame a record holds; longer frames are cut, their original length kept.
     */
    public int snapLength()
    {
        return snapLength;
    }

    /**
     * Copy a frame into the ring (dataplane threads only; never blocks, never allocates).
     *
     * @param reason a drop reason's ordinal or {@link #NO_REASON}.
     * @return false if the ring was full and the frame is lost to the capture.
     */
    public boolean offer(
        final DirectBuffer buffer,
        final int offset,
        final int length,
        final int portIndex,
        final int reason,
        final long timestampNs)
    {
        final int capturedLength = Math.min(length, snapLength);
        final int index = ring.tryClaim(RECORD_TYPE, FRAME_OFFSET + capturedLength);
        if (index < 0)
        {
            lost.incrementAndGet();
            return false;
        }
        ringBuffer.putLong(index + TIMESTAMP_OFFSET, timestampNs);
        ringBuffer.putInt(index + PORT_OFFSET, portIndex);
        ringBuffer.putInt(index + REASON_OFFSET, reason);
        ringBuffer.putInt(index + ORIGINAL_LENGTH_OFFSET, length);
        ringBuffer.putBytes(index + FRAME_OFFSET, buffer, offset, capturedLength);
        ring.commit(index);
        captured.incrementAndGet();
        return true;
    }

    /**
     * Read up to {@code limit} records (the single consumer: the capture writer's thread).
     *
     * @return how many records were read.
     */
    public int read(final MessageHandler handler, final int limit)
    {
        return ring.read(handler, limit);
    }

    /**
     * @return whether every record written has been read (consumer side). {@link #read} can return 0 with records
     * left: when it only skipped the padding at the end of the buffer.
     */
    public boolean isEmpty()
    {
        return ring.consumerPosition() == ring.producerPosition();
    }

    /**
     * @return the ring, for tests that look at its occupancy.
     */
    public RingBuffer ring()
    {
        return ring;
    }

    /**
     * @return frames copied into the ring so far (any thread).
     */
    public long captured()
    {
        return captured.get();
    }

    /**
     * @return frames not captured because the ring was full (any thread).
     */
    public long lost()
    {
        return lost.get();
    }

    @Override
    public String toString()
    {
        return "capture " + id + (drops ? " of drops" + (port == ANY_PORT ? "" : " on port " + port) :
            " of port " + port);
    }
}
