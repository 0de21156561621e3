package io.netreduce.dataplane.clt;

import org.agrona.DirectBuffer;

/**
 * The key of a connection as the appliance sees it: source and destination IP address (each as two longs, see
 * {@link IpKey}) and the destination QP. One instance is reused for every frame: {@link #wrap} fills it from the
 * frame in hand, and the tables ({@link ConnectionTable}, {@link AddressPairSet}) take it whole, so the key
 * travels as one reference instead of five scalars.
 * <p>
 * Mutable, not thread-safe: owned by the dataplane thread.
 */
public final class FlowKey
{
    private long srcHigh;
    private long srcLow;
    private long dstHigh;
    private long dstLow;
    private int qp;

    /**
     * Fill the key from a frame's addresses (IPv4 or IPv6, {@code addressLength} bytes each) and destination QP.
     *
     * @return this key.
     */
    public FlowKey wrap(
        final DirectBuffer buffer, final int srcOffset, final int dstOffset, final int addressLength, final int qp)
    {
        srcHigh = IpKey.high(buffer, srcOffset, addressLength);
        srcLow = IpKey.low(buffer, srcOffset, addressLength);
        dstHigh = IpKey.high(buffer, dstOffset, addressLength);
        dstLow = IpKey.low(buffer, dstOffset, addressLength);
        this.qp = qp;
        return this;
    }

    /**
     * Fill the key from its parts (control plane and tests).
     *
     * @return this key.
     */
    public FlowKey set(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow, final int qp)
    {
        this.srcHigh = srcHigh;
        this.srcLow = srcLow;
        this.dstHigh = dstHigh;
        this.dstLow = dstLow;
        this.qp = qp;
        return this;
    }

    public long srcHigh()
    {
        return srcHigh;
    }

    public long srcLow()
    {
        return srcLow;
    }

    public long dstHigh()
    {
        return dstHigh;
    }

    public long dstLow()
    {
        return dstLow;
    }

    public int qp()
    {
        return qp;
    }

    @Override
    public String toString()
    {
        return IpKey.toAddress(srcHigh, srcLow).getHostAddress() + " -> " +
            IpKey.toAddress(dstHigh, dstLow).getHostAddress() + " qp " + qp;
    }
}
