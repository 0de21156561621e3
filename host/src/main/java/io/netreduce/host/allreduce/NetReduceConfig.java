package io.netreduce.host.allreduce;

import io.netreduce.protocol.wire.InaHeader;

/**
 * Parameters of a NetReduce ring on the worker side; the appliance's ring configuration must carry the same
 * RingID, window, MsgLen, payload size and element type.
 *
 * @param ringId      RingID in the INA header, 0..255.
 * @param window      N: messages in flight; a power of two in 1..128 (the appliance indexes its 2N-message
 *                    aggregator array by MsgID mod 2N and MsgID is 8 bits).
 * @param msgLen      MsgLen: packets per message, 1..255.
 * @param payloadSize RC payload bytes of every packet: a multiple of 4 in 16..4096, and equal to the queue
 *                    pair's PMTU so that the RC layer cuts a message into exactly MsgLen packets.
 * @param timeoutNs   longest wait for the next result before the all-reduce fails.
 * @param inetTag     the InetTag written into every message (the ring's {@code inetTag}, default "NRED").
 * @param resultTag   the InetTag expected on results (the ring's {@code resultTag}, default "NRES"). When it
 *                    differs from {@code inetTag}, a message still carrying {@code inetTag} is known to have
 *                    passed through unaggregated and fails the call; when equal, that cannot be told.
 * @param congestion  how the worker's window follows ECN marks on results ({@link CongestionWindow}); N is its cap.
 */
public record NetReduceConfig(
    int ringId, int window, int msgLen, int payloadSize, long timeoutNs, int inetTag, int resultTag,
    CongestionControl congestion)
{
    /** Bytes of the INA header at the start of every message. */
    public static final int INA_HEADER_LENGTH = 8;

    public NetReduceConfig
    {
        if (ringId < 0 || ringId > 255)
        {
            throw new IllegalArgumentException("ringId must be 0..255: " + ringId);
        }
        if (window < 1 || window > 128 || Integer.bitCount(window) != 1)
        {
            throw new IllegalArgumentException("window must be a power of two in 1..128: " + window);
        }
        if (msgLen < 1 || msgLen > 255)
        {
            throw new IllegalArgumentException("msgLen must be 1..255: " + msgLen);
        }
        if (payloadSize < 16 || payloadSize > 4096 || (payloadSize & 3) != 0)
        {
            throw new IllegalArgumentException("payloadSize must be a multiple of 4 in 16..4096: " + payloadSize);
        }
        if (timeoutNs <= 0)
        {
            throw new IllegalArgumentException("timeoutNs must be positive: " + timeoutNs);
        }
        if (congestion == null)
        {
            throw new IllegalArgumentException("congestion control must be given (CongestionControl.DEFAULT or OFF)");
        }
    }

    /**
     * A ring whose window adapts to ECN marks ({@link CongestionControl#DEFAULT}).
     */
    public NetReduceConfig(
        final int ringId, final int window, final int msgLen, final int payloadSize, final long timeoutNs,
        final int inetTag, final int resultTag)
    {
        this(ringId, window, msgLen, payloadSize, timeoutNs, inetTag, resultTag, CongestionControl.DEFAULT);
    }

    /**
     * A ring with the default tags: "NRED" on requests, "NRES" on results.
     */
    public NetReduceConfig(
        final int ringId, final int window, final int msgLen, final int payloadSize, final long timeoutNs)
    {
        this(ringId, window, msgLen, payloadSize, timeoutNs, InaHeader.INET_TAG, InaHeader.RESULT_TAG);
    }

    /**
     * @return this ring with other congestion control settings.
     */
    public NetReduceConfig withCongestion(final CongestionControl control)
    {
        return new NetReduceConfig(ringId, window, msgLen, payloadSize, timeoutNs, inetTag, resultTag, control);
    }

    /**
     * @return whether results carry a tag of their own, so that an unaggregated message can be recognised.
     */
    public boolean marksResults()
    {
        return resultTag != inetTag;
    }

    /**
     * @return bytes of one message on the wire: MsgLen x payloadSize (INA header and padding included).
     */
    public int messageBytes()
    {
        return msgLen * payloadSize;
    }

    /**
     * @return tensor bytes one message carries: {@link #messageBytes()} - 8.
     */
    public int dataBytesPerMessage()
    {
        return messageBytes() - INA_HEADER_LENGTH;
    }

    /**
     * @return message slots in the send and receive regions: 2N.
     */
    public int slots()
    {
        return 2 * window;
    }

    /**
     * @return bytes the link's send and receive regions need.
     */
    public int regionBytes()
    {
        return slots() * messageBytes();
    }
}
