package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * The SwitchML UDP header (p4app-switchML's {@code switchml_h}, 8 bytes) and the two exponent bytes that follow it
 * ({@code exponents_h}), then the packet's elements, big-endian int32:
 * <pre>
 *  0      msg type (4 bits) | unused (1 bit) | size (3 bits, ibv_mtu-like: 1 = 256 bytes, 3 = 1024 bytes)
 *  1      job number (the client's short job id)
 *  2..5   TSI: opaque to the switch, echoed in the result (the client's packet id)
 *  6..7   pool index, big-endian: bits 13..0 the slot, bit 15 the shadow set
 *  8, 9   exponents e0, e1 (int8 each; the block fixed-point scale of the packet's two halves)
 *  10..   elements, big-endian int32
 * </pre>
 * Workers send it to UDP destination port {@link #PORT_BASE} masked by {@link #PORT_MASK}.
 */
public final class SwitchMlHeader
{
    public static final int TYPE_SIZE_OFFSET = 0;
    public static final int JOB_OFFSET = 1;
    public static final int TSI_OFFSET = 2;
    public static final int POOL_INDEX_OFFSET = 6;
    public static final int LENGTH = 8;
    public static final int EXPONENT0_OFFSET = 8;
    public static final int EXPONENT1_OFFSET = 9;
    /** Header and exponents: where the elements begin. */
    public static final int ELEMENTS_OFFSET = 10;

    /** UDP destination ports of SwitchML: 0xBEE0 to 0xBEEF. */
    public static final int PORT_BASE = 0xBEE0;
    public static final int PORT_MASK = 0xFFF0;

    /** The message type a worker's packet and the switch's result carry (the P4 sender writes 1). */
    public static final int MSG_TYPE_DATA = 1;

    /** Bit 15 of the pool index: which of the slot's two shadow sets. */
    public static final int SHADOW_SET_BIT = 0x8000;
    /** Bits 13..0 of the pool index: the slot. */
    public static final int SLOT_MASK = 0x3FFF;

    private SwitchMlHeader()
    {
    }

    public static boolean isSwitchMlPort(final int udpDstPort)
    {
        return (udpDstPort & PORT_MASK) == PORT_BASE;
    }

    /**
     * @return the size code the client sends for {@code elements} elements per packet (its BuildPacket's
     *         categories: below 64 is 0, 64 to 127 is 1, 128 to 255 is 2, 256 and more is 3).
     */
    public static int sizeCode(final int elements)
    {
        return elements < 64 ? 0 : elements < 128 ? 1 : elements < 256 ? 2 : 3;
    }

    public static int msgType(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getByte(offset + TYPE_SIZE_OFFSET) & 0xF0) >>> 4;
    }

    public static int size(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + TYPE_SIZE_OFFSET) & 0x07;
    }

    public static int job(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + JOB_OFFSET) & 0xFF;
    }

    /**
     * @return the TSI's four bytes as they lie in the packet (read big-endian; echoed unchanged).
     */
    public static int tsi(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + TSI_OFFSET, BIG_ENDIAN);
    }

    public static int poolIndex(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + POOL_INDEX_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static int exponent0(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + EXPONENT0_OFFSET);
    }

    public static int exponent1(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + EXPONENT1_OFFSET);
    }

    /**
     * Write the header and the exponents.
     */
    public static void write(
        final MutableDirectBuffer buffer,
        final int offset,
        final int msgType,
        final int size,
        final int job,
        final int tsi,
        final int poolIndex,
        final int exponent0,
        final int exponent1)
    {
        buffer.putByte(offset + TYPE_SIZE_OFFSET, (byte)((msgType << 4) | (size & 0x07)));
        buffer.putByte(offset + JOB_OFFSET, (byte)job);
        buffer.putInt(offset + TSI_OFFSET, tsi, BIG_ENDIAN);
        buffer.putShort(offset + POOL_INDEX_OFFSET, (short)poolIndex, BIG_ENDIAN);
        buffer.putByte(offset + EXPONENT0_OFFSET, (byte)exponent0);
        buffer.putByte(offset + EXPONENT1_OFFSET, (byte)exponent1);
    }
}
