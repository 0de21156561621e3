package io.netreduce.dataplane.testing;

import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.ring.RingMember;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.concurrent.UnsafeBuffer;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds the frames a NetReduce worker's RoCE NIC sends on its ring connection (rank r → rank r+1): each
 * message is one RDMA WRITE of MsgLen x payloadSize bytes whose first 8 bytes are the INA header, split into
 * WRITE FIRST / MIDDLE... / LAST WITH IMMEDIATE packets (or one WRITE ONLY WITH IMMEDIATE), with consecutive
 * PSNs from {@code firstPsn}. For tests, benchmarks and the end-to-end harness; the appliance never uses it.
 */
public final class RingWorker
{
    /** Virtual address base of the receiver's result buffer (any value: the appliance does not look at it). */
    public static final long REMOTE_BASE = 0x7F00_0000_0000L;
    public static final int RKEY = 0x1234;

    private final RingDefinition config;
    private final int rank;
    private final int destQp;
    private final int firstPsn;
    private final RoceFrameWriter writer = new RoceFrameWriter();
    private final UnsafeBuffer message;
    private final byte[] scratch = new byte[16_384];
    private final UnsafeBuffer scratchBuffer = new UnsafeBuffer(scratch);

    /**
     * @param destQp   the successor's receive QP.
     * @param firstPsn PSN of the first packet of message 0.
     * @param srcMac   this worker's MAC.
     * @param dstMac   the successor's MAC.
     */
    public RingWorker(
        final RingDefinition config,
        final int rank,
        final int destQp,
        final int firstPsn,
        final long srcMac,
        final long dstMac)
    {
        this.config = config;
        this.rank = rank;
        this.destQp = destQp;
        this.firstPsn = firstPsn & BthHeader.PSN_MASK;
        final InetAddress src = config.member(rank).address();
        final InetAddress dst = config.member((rank + 1) % config.worldSize()).address();
        if (src.getAddress().length == 4)
        {
            writer.ipv4(toInt(src.getAddress()), toInt(dst.getAddress()));
        }
        else
        {
            writer.ipv6(src.getAddress(), dst.getAddress());
        }
        writer.macs(srcMac, dstMac).destQp(destQp).udpSrcPort(0xC000 + rank);
        this.message = new UnsafeBuffer(new byte[messageBytes()]);
    }

    /**
     * A worker with MACs derived from the rank and the successor's receive QP taken from the config (or
     * {@code 0x100 + successor} when the config does not say).
     */
    public static RingWorker of(final RingDefinition config, final int rank, final int firstPsn)
    {
        final int successor = (rank + 1) % config.worldSize();
        final RingMember next = config.member(successor);
        final int qp = next.receiveQp() != RingMember.ANY ? next.receiveQp() : defaultReceiveQp(successor);
        final long mac = config.member(rank).mac() != RingMember.ANY_MAC ? config.member(rank).mac() : macOf(rank);
        return new RingWorker(config, rank, qp, firstPsn, mac, macOf(successor));
    }

    public static int defaultReceiveQp(final int rank)
    {
        return 0x100 + rank;
    }

    public static long macOf(final int rank)
    {
        return 0x02_00_00_00_00_00L | rank;
    }

    public int rank()
    {
        return rank;
    }

    public int destQp()
    {
        return destQp;
    }

    /**
     * @return bytes of one message (INA header included).
     */
    public int messageBytes()
    {
        return config.msgLen() * config.payloadSize();
    }

    /**
     * @return gradient bytes one message carries.
     */
    public int gradientBytes()
    {
        return messageBytes() - InaHeader.LENGTH;
    }

    /**
     * @return PSN of packet {@code position} of message {@code index}.
     */
    public int psn(final long index, final int position)
    {
        return (int)((firstPsn + index * config.msgLen() + position) & BthHeader.PSN_MASK);
    }

    /**
     * Build the frames of message {@code index} (MsgID = index mod 256).
     *
     * @param gradient {@link #gradientBytes()} bytes of little-endian elements.
     */
    public List<byte[]> message(final long index, final byte[] gradient)
    {
        if (gradient.length != gradientBytes())
        {
            throw new IllegalArgumentException("gradient must be " + gradientBytes() + " bytes, got " + gradient.length);
        }
        final int msgId = (int)(index & 0xFF);
        InaHeader.write(message, 0, config.inetTag(), config.ringId(), msgId, config.msgLen(), rank);
        message.putBytes(InaHeader.LENGTH, gradient);
        writer.reth(REMOTE_BASE + (index % 1024) * messageBytes(), RKEY, messageBytes()).immediate(msgId);
        final int msgLen = config.msgLen();
        final int size = config.payloadSize();
        final List<byte[]> frames = new ArrayList<>(msgLen);
        for (int position = 0; position < msgLen; position++)
        {
            final int opcode;
            if (msgLen == 1)
            {
                opcode = Opcode.RDMA_WRITE_ONLY_WITH_IMMEDIATE;
            }
            else if (position == 0)
            {
                opcode = Opcode.RDMA_WRITE_FIRST;
            }
            else if (position == msgLen - 1)
            {
                opcode = Opcode.RDMA_WRITE_LAST_WITH_IMMEDIATE;
            }
            else
            {
                opcode = Opcode.RDMA_WRITE_MIDDLE;
            }
            final int length = writer.write(scratchBuffer, 0, opcode, psn(index, position),
                position == msgLen - 1, message, position * size, size);
            final byte[] frame = new byte[length];
            System.arraycopy(scratch, 0, frame, 0, length);
            frames.add(frame);
        }
        return frames;
    }

    private static int toInt(final byte[] address)
    {
        return ((address[0] & 0xFF) << 24) | ((address[1] & 0xFF) << 16) | ((address[2] & 0xFF) << 8) |
            (address[3] & 0xFF);
    }
}
