package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * InfiniBand Base Transport Header, 12 bytes, the first header inside a RoCEv2 UDP datagram.
 * <pre>
 *   byte 0     opcode
 *   byte 1     SE(1) M(1) PadCnt(2) TVer(4)
 *   byte 2-3   P_Key
 *   byte 4     FECN(1) BECN(1) Resv6  (masked to 0xFF in the ICRC)
 *   byte 5-7   DestQP (24 bits)
 *   byte 8     AckReq(1) Resv7
 *   byte 9-11  PSN (24 bits)
 * </pre>
 */
public final class BthHeader
{
    public static final int OPCODE_OFFSET = 0;
    public static final int FLAGS_OFFSET = 1;
    public static final int PKEY_OFFSET = 2;
    public static final int RESV8A_OFFSET = 4;
    public static final int DEST_QP_OFFSET = 4;
    public static final int ACK_REQ_PSN_OFFSET = 8;
    public static final int LENGTH = 12;

    public static final int DEFAULT_PKEY = 0xFFFF;
    public static final int PSN_MASK = 0xFF_FFFF;
    public static final int QP_MASK = 0xFF_FFFF;

    private static final int SOLICITED_BIT = 0x80;
    private static final int MIGRATION_BIT = 0x40;
    private static final int ACK_REQ_BIT = 0x8000_0000;

    private BthHeader()
    {
    }

    public static int opcode(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + OPCODE_OFFSET) & 0xFF;
    }

    public static boolean solicited(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getByte(offset + FLAGS_OFFSET) & SOLICITED_BIT) != 0;
    }

    public static int padCount(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getByte(offset + FLAGS_OFFSET) >>> 4) & 0x3;
    }

    public static int transportVersion(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + FLAGS_OFFSET) & 0xF;
    }

    public static int pkey(final DirectBuffer buffer, final int offset)
    {
        return buffer.getShort(offset + PKEY_OFFSET, BIG_ENDIAN) & 0xFFFF;
    }

    public static boolean fecn(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getByte(offset + RESV8A_OFFSET) & 0x80) != 0;
    }

    public static int destQp(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + DEST_QP_OFFSET, BIG_ENDIAN) & QP_MASK;
    }

    public static boolean ackRequest(final DirectBuffer buffer, final int offset)
    {
        return (buffer.getInt(offset + ACK_REQ_PSN_OFFSET, BIG_ENDIAN) & ACK_REQ_BIT) != 0;
    }

    public static int psn(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + ACK_REQ_PSN_OFFSET, BIG_ENDIAN) & PSN_MASK;
    }

    /**
     * Write a whole BTH. Resv8a (with FECN/BECN) and Resv7 are written as zero, M is set (RoCE NICs
     * set MigReq), TVer is 0.
     */
    public static void write(
        final MutableDirectBuffer buffer,
        final int offset,
        final int opcode,
        final boolean solicited,
        final int padCount,
        final int pkey,
        final int destQp,
        final boolean ackRequest,
        final int psn)
    {
        buffer.putByte(offset + OPCODE_OFFSET, (byte)opcode);
        buffer.putByte(offset + FLAGS_OFFSET,
            (byte)((solicited ? SOLICITED_BIT : 0) | MIGRATION_BIT | ((padCount & 0x3) << 4)));
        buffer.putShort(offset + PKEY_OFFSET, (short)pkey, BIG_ENDIAN);
        buffer.putInt(offset + DEST_QP_OFFSET, destQp & QP_MASK, BIG_ENDIAN);
        buffer.putInt(offset + ACK_REQ_PSN_OFFSET, (ackRequest ? ACK_REQ_BIT : 0) | (psn & PSN_MASK), BIG_ENDIAN);
    }

    public static void opcode(final MutableDirectBuffer buffer, final int offset, final int opcode)
    {
        buffer.putByte(offset + OPCODE_OFFSET, (byte)opcode);
    }

    public static void padCount(final MutableDirectBuffer buffer, final int offset, final int padCount)
    {
        final int flags = buffer.getByte(offset + FLAGS_OFFSET) & 0xCF;
        buffer.putByte(offset + FLAGS_OFFSET, (byte)(flags | ((padCount & 0x3) << 4)));
    }

    public static void destQp(final MutableDirectBuffer buffer, final int offset, final int qp)
    {
        final int resv = buffer.getByte(offset + RESV8A_OFFSET) & 0xFF;
        buffer.putInt(offset + DEST_QP_OFFSET, (resv << 24) | (qp & QP_MASK), BIG_ENDIAN);
    }

    public static void psn(final MutableDirectBuffer buffer, final int offset, final int psn)
    {
        final int ack = buffer.getInt(offset + ACK_REQ_PSN_OFFSET, BIG_ENDIAN) & ACK_REQ_BIT;
        buffer.putInt(offset + ACK_REQ_PSN_OFFSET, ack | (psn & PSN_MASK), BIG_ENDIAN);
    }

    public static void ackRequest(final MutableDirectBuffer buffer, final int offset, final boolean ackRequest)
    {
        final int psn = buffer.getInt(offset + ACK_REQ_PSN_OFFSET, BIG_ENDIAN) & ~ACK_REQ_BIT;
        buffer.putInt(offset + ACK_REQ_PSN_OFFSET, (ackRequest ? ACK_REQ_BIT : 0) | psn, BIG_ENDIAN);
    }

    /**
     * Serial-number distance a - b in the 24-bit PSN space, in [-2^23, 2^23).
     */
    public static int psnDelta(final int a, final int b)
    {
        return ((a - b) << 8) >> 8;
    }

    public static int psnAdd(final int psn, final int n)
    {
        return (psn + n) & PSN_MASK;
    }
}
