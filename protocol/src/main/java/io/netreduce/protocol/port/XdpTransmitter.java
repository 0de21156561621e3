package io.netreduce.protocol.port;

import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;

import static io.netreduce.protocol.port.LinuxPacketAbi.*;
import static io.netreduce.protocol.port.XdpAbi.*;

/**
 * The transmit side of an {@link AfXdpPort}: the transmit slots of the UMEM, the TX ring on which their chunks go
 * to the kernel and the completion ring on which it returns them.
 * <p>
 * Slots are claimed in ring order: {@link #tryClaim} points into the next free slot, {@link #commit} writes its
 * descriptors (one per chunk, XDP_PKT_CONTD on all but the last) to the TX ring, {@link #flush} publishes them and
 * kicks the kernel when it asks for it (XDP_USE_NEED_WAKEUP), and a slot is free again once the completion ring has
 * returned all its chunks. Owning thread only; allocation-free.
 */
final class XdpTransmitter
{
    private final String name;
    private final int fd;
    private final MemorySegment errnoState;
    private final XdpRing tx;
    private final XdpRing completion;
    private final UnsafeBuffer umem;
    private final PortCounters counters;
    private final int chunkSize;

    private final int slotBase;
    private final int slotSize;
    private final int slotCount;
    private final int[] slotDescriptors;
    private final int[] slotLengths;
    /** TX ring index just past each slot's last descriptor: the slot's frame is taken once the consumer passes it. */
    private final int[] slotEnds;
    private final int maxFrameLength;

    private int txProducer;
    private int completionConsumer;

    private int head;
    /** Oldest slot not yet completed, and how many of its descriptors the completion ring has returned. */
    private int tail;
    private int tailCompleted;
    private int slotsInUse;
    /** Oldest committed slot whose frame the kernel has not taken yet, and how many such frames there are. */
    private int untakenStart;
    private int untaken;
    private int claimLength;
    private boolean closed;

    /**
     * @param name       the port's name, for errors.
     * @param fd         the AF_XDP socket, kicked to send.
     * @param errnoState where the kick captures errno (the port's).
     */
    XdpTransmitter(
        final String name,
        final int fd,
        final MemorySegment errnoState,
        final XdpRing tx,
        final XdpRing completion,
        final UnsafeBuffer umem,
        final XdpUmemLayout layout,
        final PortCounters counters)
    {
        this.name = name;
        this.fd = fd;
        this.errnoState = errnoState;
        this.tx = tx;
        this.completion = completion;
        this.umem = umem;
        this.counters = counters;
        chunkSize = layout.chunkSize();
        slotBase = layout.txSlotBase();
        slotSize = layout.txSlotSize();
        slotCount = layout.txSlotCount();
        slotDescriptors = new int[slotCount];
        slotLengths = new int[slotCount];
        slotEnds = new int[slotCount];
        maxFrameLength = layout.maxFrameLength();
    }

    /**
     * @return the index of the claimed frame in {@link #buffer()}, or -1 (counted) if closed, the length is out of
     *         bounds or every slot is in use.
     */
    int tryClaim(final int length)
    {
        claimLength = 0;
        if (closed || length < ETH_HLEN || length > maxFrameLength)
        {
            counters.add(PortCounters.TX_ERRORS, 1);
            return -1;
        }
        if (slotsInUse == slotCount)
        {
            reapCompletions();
            if (slotsInUse == slotCount)
            {
                counters.add(PortCounters.TX_RING_FULL, 1);
                return -1;
            }
        }
        claimLength = length;
        return slotBase + head * slotSize;
    }

    /**
     * @return the UMEM, which {@link #tryClaim} indexes into.
     */
    MutableDirectBuffer buffer()
    {
        return umem;
    }

    void commit()
    {
        final int length = claimLength;
        if (length == 0)
        {
            throw new IllegalStateException("commit without a claim on " + name);
        }
        claimLength = 0;
        final int slot = head;
        final UnsafeBuffer txMemory = tx.memory();
        long address = slotBase + (long)slot * slotSize;
        int remaining = length;
        int descriptors = 0;
        int index = txProducer;
        while (remaining > 0)
        {
            final int piece = Math.min(remaining, chunkSize);
            remaining -= piece;
            final int entry = tx.entryOffset(index++);
            txMemory.putLong(entry + DESC_ADDR_OFFSET, address);
            txMemory.putInt(entry + DESC_LEN_OFFSET, piece);
            txMemory.putInt(entry + DESC_OPTIONS_OFFSET, remaining > 0 ? XDP_PKT_CONTD : 0);
            address += piece;
            descriptors++;
        }
        txProducer = index;
        slotDescriptors[slot] = descriptors;
        slotLengths[slot] = length;
        slotEnds[slot] = index;
        head = RingIndex.next(slot, slotCount);
        slotsInUse++;
        untaken++;
    }

    /**
     * Publish the queued descriptors, kick the kernel if it asks to be (in copy mode it always does, and takes at
     * most a budget of frames per call, so the kick repeats while it makes progress), count the frames it took and
     * reap the completion ring. Frames it could not take yet stay queued and go with a later flush.
     *
     * @return frames handed to the kernel by this call.
     */
    int flush()
    {
        if (closed || untaken == 0)
        {
            return 0;
        }
        final int producer = txProducer;
        tx.publishProducer(producer);
        int consumer = tx.consumer();
        while (consumer != producer && tx.needsWakeup())
        {
            final long sent = Libc.sendKick(errnoState, fd, MSG_DONTWAIT);
            final int before = consumer;
            consumer = tx.consumer();
            if (sent < 0)
            {
                final int errno = Libc.errno(errnoState);
                if (!PortSystemCalls.isTransientSendError(errno) && errno != EBUSY)
                {
                    counters.add(PortCounters.TX_ERRORS, 1);
                    break;
                }
            }
            reapCompletions();
            if (consumer == before)
            {
                break;
            }
        }

        int taken = 0;
        while (untaken > 0)
        {
            final int slot = untakenStart;
            if (consumer - slotEnds[slot] < 0)
            {
                break;
            }
            counters.onFrameTransmitted(slotLengths[slot]);
            taken++;
            untaken--;
            untakenStart = RingIndex.next(slot, slotCount);
        }
        reapCompletions();
        return taken;
    }

    /**
     * @return whether frames are committed that the kernel has not taken yet.
     */
    boolean hasPending()
    {
        return untaken > 0;
    }

    /**
     * Return the slots whose chunks the completion ring has given back. Slots complete in the order they were
     * sent: the kernel completes one queue's descriptors in order.
     */
    private void reapCompletions()
    {
        final int produced = completion.producer();
        int returned = produced - completionConsumer;
        if (returned == 0)
        {
            return;
        }
        completionConsumer = produced;
        completion.publishConsumer(produced);
        returned += tailCompleted;
        while (slotsInUse > 0)
        {
            final int descriptors = slotDescriptors[tail];
            if (returned < descriptors)
            {
                break;
            }
            returned -= descriptors;
            tail = RingIndex.next(tail, slotCount);
            slotsInUse--;
        }
        tailCompleted = returned;
    }

    /**
     * Refuse further claims and flushes (the port unmaps the rings and UMEM next).
     */
    void close()
    {
        closed = true;
    }
}
