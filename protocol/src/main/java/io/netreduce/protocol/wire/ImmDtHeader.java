package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * Immediate Data extended header, 4 bytes, carried by the *_WITH_IMMEDIATE opcodes.
 */
public final class ImmDtHeader
{
    public static final int IMMEDIATE_OFFSET = 0;
    public static final int LENGTH = 4;

    private ImmDtHeader()
    {
    }

    public static int immediate(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + IMMEDIATE_OFFSET, BIG_ENDIAN);
    }

    public static void write(final MutableDirectBuffer buffer, final int offset, final int immediate)
    {
        buffer.putInt(offset + IMMEDIATE_OFFSET, immediate, BIG_ENDIAN);
    }
}
