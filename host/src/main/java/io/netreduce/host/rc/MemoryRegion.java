package io.netreduce.host.rc;

import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

/**
 * Registered memory: an off-heap buffer with the virtual address range and keys peers use to reach it, like an
 * ibverbs MR. Remote peers name bytes by virtual address ({@link #virtualAddress()} + offset) and must present
 * the {@link #rkey()}; the responder checks both before placing a byte. Local work requests name bytes by offset.
 * <p>
 * The virtual address is a number the endpoint hands out, not a real pointer: a software endpoint has no reason
 * to expose process addresses to the network, and it keeps the address arithmetic in 64 bits like the RETH.
 */
public final class MemoryRegion
{
    private final long virtualAddress;
    private final int length;
    private final int rkey;
    private final int lkey;
    private final ByteBuffer byteBuffer;
    private final UnsafeBuffer buffer;

    MemoryRegion(final long virtualAddress, final int rkey, final int lkey, final ByteBuffer byteBuffer)
    {
        this.virtualAddress = virtualAddress;
        this.length = byteBuffer.capacity();
        this.rkey = rkey;
        this.lkey = lkey;
        this.byteBuffer = byteBuffer;
        this.buffer = new UnsafeBuffer(byteBuffer);
    }

    public long virtualAddress()
    {
        return virtualAddress;
    }

    public int length()
    {
        return length;
    }

    public int rkey()
    {
        return rkey;
    }

    public int lkey()
    {
        return lkey;
    }

    /**
     * @return the region's bytes; index 0 is {@link #virtualAddress()}.
     */
    public UnsafeBuffer buffer()
    {
        return buffer;
    }

    public ByteBuffer byteBuffer()
    {
        return byteBuffer;
    }

    /**
     * @return true if {@code [va, va + len)} lies inside the region (len may be 0).
     */
    public boolean contains(final long va, final long len)
    {
        return len >= 0 && va >= virtualAddress && len <= length && va - virtualAddress <= length - len;
    }

    @Override
    public String toString()
    {
        return String.format("MemoryRegion{va=0x%x, length=%d, rkey=0x%x}", virtualAddress, length, rkey);
    }
}
