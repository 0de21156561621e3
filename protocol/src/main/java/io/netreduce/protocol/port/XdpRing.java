package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * Flyweight over one mmap'ed ring of an AF_XDP socket (RX, TX, fill or completion): a single-producer,
 * single-consumer queue shared with the kernel, whose producer and consumer words are free-running 32-bit indices
 * (masked by the power-of-two size to find an entry) and whose flags word carries XDP_RING_NEED_WAKEUP.
 * <p>
 * The side user space owns is cached here and published with a release store, so entries written (TX, fill) or
 * read (RX, completion) are visible to the kernel before the index that hands them over; the kernel's side is read
 * with an acquire load, for the same reason the other way round.
 */
final class XdpRing
{
    private final UnsafeBuffer memory;
    private final long mapAddress;
    private final long mapLength;
    private final int producerOffset;
    private final int consumerOffset;
    private final int flagsOffset;
    private final int descOffset;
    private final int entrySize;
    private final int mask;

    XdpRing(final long mapAddress, final long mapLength, final int producerOffset, final int consumerOffset,
        final int flagsOffset, final int descOffset, final int size, final int entrySize)
    {
        this.memory = new UnsafeBuffer(mapAddress, (int)mapLength);
        this.mapAddress = mapAddress;
        this.mapLength = mapLength;
        this.producerOffset = producerOffset;
        this.consumerOffset = consumerOffset;
        this.flagsOffset = flagsOffset;
        this.descOffset = descOffset;
        this.entrySize = entrySize;
        this.mask = size - 1;
    }

    /** Entries the ring holds (a power of two). */
    int size()
    {
        return mask + 1;
    }

    long mapAddress()
    {
        return mapAddress;
    }

    long mapLength()
    {
        return mapLength;
    }

    /** The kernel's (or our) producer index, acquire load. */
    int producer()
    {
        return memory.getIntVolatile(producerOffset);
    }

    /** The kernel's (or our) consumer index, acquire load. */
    int consumer()
    {
        return memory.getIntVolatile(consumerOffset);
    }

    void publishProducer(final int index)
    {
        memory.putIntRelease(producerOffset, index);
    }

    void publishConsumer(final int index)
    {
        memory.putIntRelease(consumerOffset, index);
    }

    boolean needsWakeup()
    {
        return (memory.getIntVolatile(flagsOffset) & XdpAbi.XDP_RING_NEED_WAKEUP) != 0;
    }

    /** Offset within {@link #memory()} of the entry at free-running index {@code index}. */
    int entryOffset(final int index)
    {
        return descOffset + (index & mask) * entrySize;
    }

    UnsafeBuffer memory()
    {
        return memory;
    }

    /** Stray use after close must fail in Java, not touch unmapped memory. */
    void detach()
    {
        memory.wrap(new byte[0]);
    }
}
