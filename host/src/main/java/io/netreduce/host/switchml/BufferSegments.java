package io.netreduce.host.switchml;

import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;

import java.lang.foreign.MemorySegment;

/**
 * The memory of an Agrona buffer as a {@link MemorySegment} (what the Vector API loads from and stores to), index 0
 * of the buffer at offset 0 of the segment and its capacity the segment's size: a slice of the byte array for a heap
 * buffer, the native memory at its address otherwise. The view of the last buffer is kept and made again only when
 * the buffer was wrapped elsewhere (array, address or capacity changed), so a worker that keeps using its port's ring
 * makes it once: allocation-free from then on. Not thread-safe.
 */
final class BufferSegments
{
    private byte[] array;
    private long address;
    private int capacity = -1;
    private MemorySegment segment = MemorySegment.NULL;

    MemorySegment of(final DirectBuffer buffer)
    {
        final byte[] bufferArray = buffer.byteArray();
        final long bufferAddress = buffer.addressOffset();
        final int bufferCapacity = buffer.capacity();
        if (bufferArray != array || bufferAddress != address || bufferCapacity != capacity)
        {
            segment = bufferArray != null ?
                MemorySegment.ofArray(bufferArray).asSlice(bufferAddress - BufferUtil.ARRAY_BASE_OFFSET,
                    bufferCapacity) :
                MemorySegment.ofAddress(bufferAddress).reinterpret(bufferCapacity);
            array = bufferArray;
            address = bufferAddress;
            capacity = bufferCapacity;
        }
        return segment;
    }
}
