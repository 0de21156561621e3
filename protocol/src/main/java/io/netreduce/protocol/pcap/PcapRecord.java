package io.netreduce.protocol.pcap;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * One packet record of a capture: the captured bytes, the length the packet had on the wire and its timestamp.
 * <p>
 * A reader refills the same record for each packet, so a caller that keeps a packet must copy it.
 * {@link #capturedLength()} is less than {@link #originalLength()} when the capture's snap length cut the packet.
 */
public final class PcapRecord
{
    private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[0]);
    private byte[] bytes = new byte[0];
    private int originalLength;
    private long epochSeconds;
    private int nanos;

    /**
     * Point the record at a packet's bytes. The array is used as is, not copied.
     *
     * @param bytes          the captured bytes, all of which are part of the record.
     * @param originalLength the packet's length on the wire, at least {@code bytes.length}.
     * @param epochSeconds   seconds since the epoch.
     * @param nanos          nanoseconds within the second, 0..999,999,999.
     * @return this record.
     */
    public PcapRecord set(final byte[] bytes, final int originalLength, final long epochSeconds, final int nanos)
    {
        this.bytes = bytes;
        this.buffer.wrap(bytes);
        this.originalLength = Math.max(originalLength, bytes.length);
        this.epochSeconds = epochSeconds;
        this.nanos = nanos;
        return this;
    }

    /**
     * @return the captured bytes (the live array: edits are seen by whoever writes the record next).
     */
    public byte[] bytes()
    {
        return bytes;
    }

    /**
     * @return a buffer over the captured bytes, for the wire flyweights.
     */
    public UnsafeBuffer buffer()
    {
        return buffer;
    }

    public int capturedLength()
    {
        return bytes.length;
    }

    public int originalLength()
    {
        return originalLength;
    }

    /**
     * @return true when the snap length cut the packet short, so its tail (and any ICRC) is not in the file.
     */
    public boolean isTruncated()
    {
        return bytes.length < originalLength;
    }

    public long epochSeconds()
    {
        return epochSeconds;
    }

    public int nanos()
    {
        return nanos;
    }
}
