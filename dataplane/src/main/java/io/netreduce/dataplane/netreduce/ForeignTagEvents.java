package io.netreduce.dataplane.netreduce;

import io.netreduce.dataplane.clt.FlowKey;
import org.agrona.BitUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.ringbuffer.OneToOneRingBuffer;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;

import java.nio.ByteBuffer;
import java.util.function.Consumer;

/**
 * Connections that run on a ring edge (source and destination are neighbouring members of an installed ring) but
 * whose first message does not start with that ring's InetTag: a client tagging with another tag, or talking a
 * different header. The appliance passes them through unaggregated; nothing is wrong on the wire, so the only
 * trace would be a counter. The dataplane posts one event per such connection (it learns the connection as
 * foreign, so it sees it once) into an off-heap one-to-one ring buffer, and a control-side thread drains it and
 * logs one line per connection: the dataplane itself never logs.
 * <p>
 * Producer: the dataplane thread only ({@link #offer}); a full buffer loses the event, not the frame.
 * Consumer: one control-side thread ({@link #drain}).
 */
public final class ForeignTagEvents
{
    /** Src address (2 longs), dst address (2 longs), destination QP, the 4 bytes found, the RingID byte. */
    private static final int EVENT_LENGTH = 4 * Long.BYTES + 3 * Integer.BYTES;
    private static final int MSG_TYPE = 1;
    private static final int CAPACITY = 64 * 1024;

    private final OneToOneRingBuffer ring = new OneToOneRingBuffer(new UnsafeBuffer(
        ByteBuffer.allocateDirect(BitUtil.findNextPositivePowerOfTwo(CAPACITY) + RingBufferDescriptor.TRAILER_LENGTH)));
    private final UnsafeBuffer scratch = new UnsafeBuffer(ByteBuffer.allocateDirect(EVENT_LENGTH));

    /**
     * One connection seen on a ring edge without the ring's tag.
     *
     * @param connection the connection (addresses and destination QP).
     * @param tag        the four bytes where the InetTag would be (big-endian), 0 if the payload was shorter.
     * @param ringId     the byte where the RingID would be, -1 if the payload was shorter.
     */
    public record Event(FlowKey connection, int tag, int ringId)
    {
    }

    /**
     * Post an event (dataplane thread; no allocation).
     *
     * @return false if the buffer was full and the event is lost.
     */
    public boolean offer(final FlowKey key, final int tag, final int ringId)
    {
        scratch.putLong(0, key.srcHigh());
        scratch.putLong(8, key.srcLow());
        scratch.putLong(16, key.dstHigh());
        scratch.putLong(24, key.dstLow());
        scratch.putInt(32, key.qp());
        scratch.putInt(36, tag);
        scratch.putInt(40, ringId);
        return ring.write(MSG_TYPE, scratch, 0, EVENT_LENGTH);
    }

    /**
     * Hand every waiting event to {@code consumer} (control side; allocates one event each).
     *
     * @return events drained.
     */
    public int drain(final Consumer<Event> consumer)
    {
        return ring.read((type, buffer, index, length) -> consumer.accept(new Event(
            new FlowKey().set(buffer.getLong(index), buffer.getLong(index + 8), buffer.getLong(index + 16),
                buffer.getLong(index + 24), buffer.getInt(index + 32)),
            buffer.getInt(index + 36), buffer.getInt(index + 40))));
    }
}
