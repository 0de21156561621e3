package io.netreduce.protocol.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * The NetReduce in-network-aggregation header (paper 000, §3.2, Fig. 4), 8 bytes at the start of the payload
 * of the first packet of every message (right after the RETH of RDMA WRITE FIRST/ONLY). To the RC transport
 * it is payload: the receiver's NIC writes it into memory like any other byte.
 * <pre>
 *   byte 0-3  InetTag  magic that marks the message as aggregation traffic
 *   byte 4    RingID
 *   byte 5    MsgID    message sequence number within the ring (mod 256)
 *   byte 6    MsgLen   packets in the message
 *   byte 7    Rank     sender's rank in the ring
 * </pre>
 */
public final class InaHeader
{
    public static final int INET_TAG_OFFSET = 0;
    public static final int RING_ID_OFFSET = 4;
    public static final int MSG_ID_OFFSET = 5;
    public static final int MSG_LEN_OFFSET = 6;
    public static final int RANK_OFFSET = 7;
    public static final int LENGTH = 8;

    /** "NRED": the InetTag a worker writes on the messages it sends for aggregation. */
    public static final int INET_TAG = 0x4E52_4544;

    /**
     * "NRES": the InetTag the appliance writes into result messages. A worker that finds {@link #INET_TAG} in a
     * message it receives knows the message passed through unaggregated (ring not installed, or the traffic
     * bypassed the appliance) instead of taking its predecessor's gradient for the sum.
     */
    public static final int RESULT_TAG = 0x4E52_4553;

    private InaHeader()
    {
    }

    /**
     * @param text a tag as written in configs and on command lines, e.g. {@code NRED}.
     * @return its 32-bit big-endian value, as it stands in the header.
     * @throws IllegalArgumentException "must be 4 printable ASCII characters: 'text'", for the caller to prefix
     *                                  with the setting's name.
     */
    public static int tagValue(final String text)
    {
        if (text.length() != 4 || !text.chars().allMatch(c -> c > 0x20 && c <= 0x7E))
        {
            throw new IllegalArgumentException("must be 4 printable ASCII characters: '" + text + "'");
        }
        return (text.charAt(0) << 24) | (text.charAt(1) << 16) | (text.charAt(2) << 8) | text.charAt(3);
    }

    public static int inetTag(final DirectBuffer buffer, final int offset)
    {
        return buffer.getInt(offset + INET_TAG_OFFSET, BIG_ENDIAN);
    }

    public static int ringId(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + RING_ID_OFFSET) & 0xFF;
    }

    public static int msgId(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + MSG_ID_OFFSET) & 0xFF;
    }

    public static int msgLen(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + MSG_LEN_OFFSET) & 0xFF;
    }

    public static int rank(final DirectBuffer buffer, final int offset)
    {
        return buffer.getByte(offset + RANK_OFFSET) & 0xFF;
    }

    public static void inetTag(final MutableDirectBuffer buffer, final int offset, final int tag)
    {
        buffer.putInt(offset + INET_TAG_OFFSET, tag, BIG_ENDIAN);
    }

    /**
     * Write a header with the default tag, {@link #INET_TAG}.
     */
    public static void write(
        final MutableDirectBuffer buffer,
        final int offset,
        final int ringId,
        final int msgId,
        final int msgLen,
        final int rank)
    {
        write(buffer, offset, INET_TAG, ringId, msgId, msgLen, rank);
    }

    public static void write(
        final MutableDirectBuffer buffer,
        final int offset,
        final int tag,
        final int ringId,
        final int msgId,
        final int msgLen,
        final int rank)
    {
        buffer.putInt(offset + INET_TAG_OFFSET, tag, BIG_ENDIAN);
        buffer.putByte(offset + RING_ID_OFFSET, (byte)ringId);
        buffer.putByte(offset + MSG_ID_OFFSET, (byte)msgId);
        buffer.putByte(offset + MSG_LEN_OFFSET, (byte)msgLen);
        buffer.putByte(offset + RANK_OFFSET, (byte)rank);
    }
}
