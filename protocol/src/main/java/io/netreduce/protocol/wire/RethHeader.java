package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * RDMA Extended Transport Header, 16 bytes: virtual address, R_Key, DMA length.
 * Carried by RDMA WRITE FIRST/ONLY and RDMA READ REQUEST.
 */
public final class RethHeader
{
    public static final int VIRTUAL_ADDRESS_OFFSET = 0;
    public static final int RKEY_OFFSET = 8;
    public static final int DMA_LENGTH_OFFSET = 12;
    public static final int LENGTH = 16;

    private RethHeader()
    {
    }

    public static long virtualAddress(final DirectBuffer buffer, final int offset)
    {
        return buffer.getLong(offset + VIRTUAL_ADDRESS_OFFSET, BIG_ENDIAN);
    }

    public static int rkey(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + RKEY_OFFSET, BIG_ENDIAN);
    }

    /**
     * @return the DMA length as an unsigned 32-bit value.
     */
    public static long dmaLength(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + DMA_LENGTH_OFFSET, BIG_ENDIAN) & 0xFFFF_FFFFL;
    }

    public static void write(
        final MutableDirectBuffer buffer, final int offset, final long va, final int rkey, final int dmaLength)
    {
        buffer.putLong(offset + VIRTUAL_ADDRESS_OFFSET, va, BIG_ENDIAN);
        buffer.putInt(offset + RKEY_OFFSET, rkey, BIG_ENDIAN);
        buffer.putInt(offset + DMA_LENGTH_OFFSET, dmaLength, BIG_ENDIAN);
    }
}
