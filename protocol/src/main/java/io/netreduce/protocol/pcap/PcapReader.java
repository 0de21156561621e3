package io.netreduce.protocol.pcap;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.sql.Timestamp;
import java.util.concurrent.TimeoutException;

import org.pcap4j.core.NotOpenException;
import org.pcap4j.core.PcapHandle;
import org.pcap4j.core.PcapNativeException;
import org.pcap4j.core.Pcaps;

/**
 * Reads the packet records of a capture file through pcap4j, that is through libpcap itself: classic pcap in
 * either byte order, with micro- or nanosecond timestamps, and pcapng. libpcap's own checks (truncated file,
 * record longer than the snap length, unknown format) come back as a {@link PcapException} whose message names
 * the file and the record, never as a native error or a bare stack trace.
 * <p>
 * Not thread-safe; one reader per file. Each packet costs an array allocation (pcap4j copies out of libpcap's
 * buffer): this is a tool's path, not the dataplane's.
 */
public final class PcapReader implements AutoCloseable
{
    /** libpcap's link type for Ethernet II (DLT_EN10MB / LINKTYPE_ETHERNET). */
    public static final int LINKTYPE_ETHERNET = 1;

    private static final int PCAPNG_MAGIC = 0x0A0D0D0A;

    private final Path file;
    private final PcapHandle handle;
    private final PcapPrecision precision;
    private final int linkType;
    private final int snapLength;
    private long recordsRead;

    private PcapReader(final Path file, final PcapHandle handle, final PcapPrecision precision)
        throws PcapException
    {
        this.file = file;
        this.handle = handle;
        this.precision = precision;
        this.linkType = handle.getDlt().value();
        try
        {
            this.snapLength = handle.getSnapshot();
        }
        catch (final NotOpenException ex)
        {
            throw new PcapException(file + ": capture closed while opening it", ex);
        }
    }

    /**
     * Open a capture file for reading.
     *
     * @param file the capture.
     * @return a reader positioned before the first record.
     * @throws PcapException if the file cannot be read, is not a capture, or libpcap cannot be loaded.
     */
    public static PcapReader open(final Path file) throws PcapException
    {
        final PcapPrecision precision = precisionOf(file);
        final PcapHandle handle;
        try
        {
            // Ask libpcap for the file's own resolution, so a rewrite keeps every timestamp digit and no more.
            handle = Pcaps.openOffline(file.toString(), precision == PcapPrecision.NANO ?
                PcapHandle.TimestampPrecision.NANO : PcapHandle.TimestampPrecision.MICRO);
        }
        catch (final PcapNativeException ex)
        {
            throw new PcapException(file + ": not a readable capture: " + ex.getMessage(), ex);
        }
        catch (final LinkageError ex)
        {
            throw new PcapException("cannot load libpcap through JNA (install libpcap0.8): " + ex.getMessage(), ex);
        }

        try
        {
            return new PcapReader(file, handle, precision);
        }
        catch (final PcapException ex)
        {
            handle.close();
            throw ex;
        }
    }

    /**
     * Read the next record into {@code record}.
     *
     * @param record refilled with the packet's bytes, lengths and timestamp.
     * @return true if a record was read, false at the end of the file.
     * @throws PcapException if the file is damaged at this record (for example cut off in the middle of it).
     */
    public boolean next(final PcapRecord record) throws PcapException
    {
        final byte[] bytes;
        try
        {
            bytes = handle.getNextRawPacketEx();
        }
        catch (final EOFException ex)
        {
            return false;
        }
        catch (final PcapNativeException ex)
        {
            throw new PcapException(file + ": record " + (recordsRead + 1) + ": " + stripPrefix(ex.getMessage()), ex);
        }
        catch (final NotOpenException ex)
        {
            throw new PcapException(file + ": read after close", ex);
        }
        catch (final TimeoutException ex)
        {
            // Offline handles never time out; treat it as damage rather than loop.
            throw new PcapException(file + ": record " + (recordsRead + 1) + ": unexpected timeout", ex);
        }

        recordsRead++;
        final Timestamp timestamp = handle.getTimestamp();
        final Integer originalLength = handle.getOriginalLength();
        record.set(
            bytes,
            null == originalLength ? bytes.length : originalLength,
            Math.floorDiv(timestamp.getTime(), 1000L),
            timestamp.getNanos());
        return true;
    }

    /**
     * @return the capture's link type; netreduce tools handle {@link #LINKTYPE_ETHERNET}.
     */
    public int linkType()
    {
        return linkType;
    }

    /**
     * @return the capture's snap length, the longest record it may hold.
     */
    public int snapLength()
    {
        return snapLength;
    }

    /**
     * @return the file's timestamp resolution (pcapng files report {@link PcapPrecision#NANO}).
     */
    public PcapPrecision precision()
    {
        return precision;
    }

    /**
     * @return how many records {@link #next(PcapRecord)} has returned so far.
     */
    public long recordsRead()
    {
        return recordsRead;
    }

    public Path file()
    {
        return file;
    }

    @Override
    public void close()
    {
        handle.close();
    }

    /**
     * The resolution libpcap should report timestamps in: the file's own for classic pcap, nanoseconds for pcapng
     * (whose resolution is per interface). Anything unrecognised is left to libpcap to reject with its own words.
     */
    private static PcapPrecision precisionOf(final Path file) throws PcapException
    {
        final ByteBuffer magic = ByteBuffer.allocate(4).order(ByteOrder.BIG_ENDIAN);
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ))
        {
            while (magic.hasRemaining() && channel.read(magic) >= 0)
            {
                // keep reading: a 4-byte read may come back short
            }
        }
        catch (final NoSuchFileException ex)
        {
            throw new PcapException(file + ": no such file", ex);
        }
        catch (final AccessDeniedException ex)
        {
            throw new PcapException(file + ": permission denied", ex);
        }
        catch (final IOException ex)
        {
            throw new PcapException(file + ": cannot read: " + ex.getMessage(), ex);
        }

        if (magic.hasRemaining())
        {
            return PcapPrecision.MICRO;
        }
        final int value = magic.getInt(0);
        if (value == PcapPrecision.NANO.magic() || Integer.reverseBytes(value) == PcapPrecision.NANO.magic() ||
            value == PCAPNG_MAGIC)
        {
            return PcapPrecision.NANO;
        }
        return PcapPrecision.MICRO;
    }

    private static String stripPrefix(final String message)
    {
        final String prefix = "Error occurred in pcap_next_ex(): ";
        return null != message && message.startsWith(prefix) ? message.substring(prefix.length()) : message;
    }
}
