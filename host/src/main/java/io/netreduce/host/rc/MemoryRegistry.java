package io.netreduce.host.rc;

import org.agrona.collections.Int2ObjectHashMap;

import java.nio.ByteBuffer;

/**
 * The memory regions of one endpoint, looked up by R_Key when a request arrives.
 * <p>
 * Virtual addresses are handed out from a 64-bit range, page aligned, never reused, so a stale address from a
 * deregistered region cannot alias a new one. Keys mix a counter with a per-registry salt so that keys of two
 * endpoints rarely coincide (helps catch a peer using the wrong key in tests).
 */
public final class MemoryRegistry
{
    private static final long VA_BASE = 0x0000_7E00_0000_0000L;
    private static final long PAGE = 4096;

    private final Int2ObjectHashMap<MemoryRegion> byRkey = new Int2ObjectHashMap<>();
    private final int salt;
    private long nextVa = VA_BASE;
    private int nextKey = 1;

    public MemoryRegistry(final int salt)
    {
        this.salt = salt;
    }

    /**
     * Allocate and register {@code length} bytes of zeroed off-heap memory.
     */
    public MemoryRegion register(final int length)
    {
        if (length <= 0)
        {
            throw new IllegalArgumentException("length must be positive: " + length);
        }
        return register(ByteBuffer.allocateDirect(length));
    }

    /**
     * Register an existing direct buffer (its whole capacity).
     */
    public MemoryRegion register(final ByteBuffer buffer)
    {
        if (!buffer.isDirect())
        {
            throw new IllegalArgumentException("memory regions must be direct buffers");
        }
        int key;
        do
        {
            key = ((nextKey++ & 0xFFFF) << 8 | (salt & 0xFF)) ^ (salt & 0xFFFF_0000);
        }
        while (key == 0 || byRkey.containsKey(key));
        final MemoryRegion region = new MemoryRegion(nextVa, key, key, buffer);
        nextVa += (buffer.capacity() + PAGE - 1) / PAGE * PAGE + PAGE;
        byRkey.put(key, region);
        return region;
    }

    public void deregister(final MemoryRegion region)
    {
        byRkey.remove(region.rkey(), region);
    }

    /**
     * @return the region with this R_Key, or null.
     */
    public MemoryRegion lookup(final int rkey)
    {
        return byRkey.get(rkey);
    }
}
