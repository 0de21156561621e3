package io.netreduce.protocol.port;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A source and sink of raw Ethernet frames with batch semantics, driven by a single thread.
 * <p>
 * Implementations: an AF_PACKET port over PACKET_MMAP rings for real interfaces, and a memory port for tests.
 * A port is not thread-safe: one agent owns it. Sends are queued and handed to the kernel by {@link #flush()},
 * so a duty cycle is "receive a batch, process, queue sends, flush".
 */
public interface PacketPort extends AutoCloseable
{
    /**
     * @return the port's name (interface name for real ports).
     */
    String name();

    /**
     * Deliver up to {@code limit} received frames to {@code handler}.
     *
     * @return the number of frames delivered, 0 when none were waiting.
     */
    int receive(FrameHandler handler, int limit);

    /**
     * @return frames the port's receive queue holds at most (the slots the kernel fills before it drops), or 0 when
     *         the port cannot tell; then {@link #receiveBacklogAtLeast} is always false.
     */
    default int receiveCapacity()
    {
        return 0;
    }

    /**
     * Whether at least {@code frames} received frames wait to be read: one look at the shared ring, no system call,
     * so a dataplane can ask once per batch. The appliance marks ECN by it (PANAMA's switch queue, at the appliance:
     * docs/architecture.md, "Congestion marks").
     *
     * @param frames at least 1; a figure above {@link #receiveCapacity()} is never reached.
     * @return false when fewer wait, or when the port cannot tell.
     */
    default boolean receiveBacklogAtLeast(final int frames)
    {
        return false;
    }

    /**
     * Receive only RoCEv2 frames to these queue pairs from now on, filtered by the kernel before it copies anything
     * ({@link RoceReceiveFilter#forQueuePairs}): an endpoint's port, as an RDMA NIC hands a QP only its own packets.
     * Each call replaces the last one's set. A port that cannot (a memory port, an appliance's port that takes all
     * RoCE, an AF_XDP port) says so and keeps receiving what it did.
     *
     * @param qpns  the endpoint's QP numbers.
     * @param count how many of {@code qpns} count.
     * @return whether the port now filters by them.
     */
    default boolean receiveOnlyQueuePairs(final int[] qpns, final int count)
    {
        return false;
    }

    /**
     * Queue a copy of a frame for transmission. The frame is not on the wire until {@link #flush()}. By default a
     * claim of the frame's length, one copy into the claimed slot and a commit.
     *
     * @return true if queued; false if the transmit ring is full (counted by the port).
     */
    default boolean send(final DirectBuffer buffer, final int offset, final int length)
    {
        final int index = tryClaim(length);
        if (index < 0)
        {
            return false;
        }
        claimBuffer().putBytes(index, buffer, offset, length);
        commit();
        return true;
    }

    /**
     * Claim the next transmit slot for a frame of exactly {@code length} bytes, to be written in place into
     * {@link #claimBuffer()} and handed over with {@link #commit()} (as Aeron's {@code tryClaim}): a frame built
     * from several pieces (stored headers, a sum) is written once, straight into the ring, instead of being
     * assembled in a private buffer and copied again by {@link #send}. At most one claim is open at a time; a
     * claim that is not committed is given up by the next claim.
     *
     * @return the index in {@link #claimBuffer()} at which the frame starts, or -1 if the frame cannot be sent
     *         (ring full, port closed, bad length: counted as {@link #send} counts them).
     */
    int tryClaim(int length);

    /**
     * {@link #tryClaim(int)} for a frame to {@code destinationMac} (48 bits, as {@code EthernetHeader} writes it):
     * a port that batches frames per destination (segmentation offload) may then place the frame where it joins
     * that destination's open batch, so that its payload is written once, instead of into a slot of its own and
     * copied into the batch on {@link #commit()}. Whether it joins is decided on commit, as for any frame; one that
     * does not (another flow, out of sequence) is moved into a slot of its own then. By default a plain claim.
     */
    default int tryClaim(final int length, final long destinationMac)
    {
        return tryClaim(length);
    }

    /**
     * @return the buffer that the last successful {@link #tryClaim} points into.
     */
    MutableDirectBuffer claimBuffer();

    /**
     * Queue the claimed frame for the next {@link #flush()}, as {@link #send} would.
     */
    void commit();

    /**
     * Hand every queued frame to the kernel.
     *
     * @return the number of frames flushed.
     */
    int flush();

    /**
     * @return the port's counters; the same instance for the port's lifetime, readable from any thread.
     */
    PortCounters counters();

    /**
     * Release the port's socket and memory. Idempotent.
     */
    @Override
    void close();
}
