package io.netreduce.protocol.pcap;

/**
 * Timestamp resolution of a classic pcap file, told apart by the file's magic number.
 */
public enum PcapPrecision
{
    /** Magic 0xA1B2C3D4: record timestamps carry microseconds. */
    MICRO(0xA1B2C3D4, 1_000),
    /** Magic 0xA1B23C4D: record timestamps carry nanoseconds. */
    NANO(0xA1B23C4D, 1);

    private final int magic;
    private final int nanosPerTick;

    PcapPrecision(final int magic, final int nanosPerTick)
    {
        this.magic = magic;
        this.nanosPerTick = nanosPerTick;
    }

    /**
     * @return the magic number as written in the file's own byte order.
     */
    public int magic()
    {
        return magic;
    }

    /**
     * @return how many nanoseconds one tick of the record's sub-second field stands for.
     */
    public int nanosPerTick()
    {
        return nanosPerTick;
    }
}
