package io.netreduce.protocol.pcap;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import org.agrona.DirectBuffer;

/**
 * Writes a classic pcap file (little-endian, micro- or nanosecond magic), one record per packet.
 * <p>
 * Written here rather than through pcap4j's {@code PcapDumper.dumpRaw}: that call stamps every record with
 * original length = captured length, so rewriting a capture whose snap length cut some packets would silently
 * change those records. Keeping the original length is what lets {@code netreduce pcap fix} copy frames unchanged.
 * The format is 24 bytes of file header and 16 bytes before each record; there is nothing else to get wrong.
 * <p>
 * Not thread-safe.
 */
public final class PcapWriter implements AutoCloseable
{
    /** The snap length tcpdump and libpcap use by default (and the largest libpcap accepts for Ethernet). */
    public static final int DEFAULT_SNAP_LENGTH = 262_144;

    private static final int FILE_HEADER_LENGTH = 24;
    private static final int RECORD_HEADER_LENGTH = 16;
    private static final short VERSION_MAJOR = 2;
    private static final short VERSION_MINOR = 4;

    private final Path file;
    private final FileChannel channel;
    private final PcapPrecision precision;
    private final int snapLength;
    private final ByteBuffer header = ByteBuffer.allocate(RECORD_HEADER_LENGTH).order(ByteOrder.LITTLE_ENDIAN);
    private ByteBuffer body = ByteBuffer.allocate(2048);
    private long recordsWritten;

    private PcapWriter(final Path file, final FileChannel channel, final PcapPrecision precision, final int snapLength)
    {
        this.file = file;
        this.channel = channel;
        this.precision = precision;
        this.snapLength = snapLength;
    }

    /**
     * Create (or replace) a capture file and write its file header.
     *
     * @param file       where to write.
     * @param linkType   the link type, e.g. {@link PcapReader#LINKTYPE_ETHERNET}.
     * @param snapLength the longest record the file may hold.
     * @param precision  the timestamp resolution to record.
     * @return a writer ready for records.
     * @throws PcapException if the file cannot be created.
     */
    public static PcapWriter create(
        final Path file, final int linkType, final int snapLength, final PcapPrecision precision) throws PcapException
    {
        return open(file, linkType, snapLength, precision,
            StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
    }

    /**
     * Create a capture file that must not exist yet, and write its file header. Unlike {@link #create} this neither
     * replaces an existing file nor follows a symbolic link at {@code file} (O_CREAT|O_EXCL): what a privileged
     * daemon writes on request stays where it was asked to.
     *
     * @throws PcapException if the file exists or cannot be created.
     */
    public static PcapWriter createNew(
        final Path file, final int linkType, final int snapLength, final PcapPrecision precision) throws PcapException
    {
        return open(file, linkType, snapLength, precision, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    }

    private static PcapWriter open(
        final Path file,
        final int linkType,
        final int snapLength,
        final PcapPrecision precision,
        final OpenOption... options) throws PcapException
    {
        if (snapLength <= 0)
        {
            throw new PcapException(file + ": snap length must be positive, got " + snapLength);
        }

        final ByteBuffer fileHeader = ByteBuffer.allocate(FILE_HEADER_LENGTH).order(ByteOrder.LITTLE_ENDIAN);
        fileHeader.putInt(precision.magic())
            .putShort(VERSION_MAJOR)
            .putShort(VERSION_MINOR)
            .putInt(0) // thiszone: timestamps are UTC
            .putInt(0) // sigfigs
            .putInt(snapLength)
            .putInt(linkType)
            .flip();

        FileChannel channel = null;
        try
        {
            channel = FileChannel.open(file, options);
            writeFully(channel, fileHeader);
            return new PcapWriter(file, channel, precision, snapLength);
        }
        catch (final IOException ex)
        {
            closeQuietly(channel);
            throw new PcapException(file + ": cannot write: " + ex, ex);
        }
    }

    /**
     * Create an Ethernet capture with the default snap length and microsecond timestamps.
     */
    public static PcapWriter create(final Path file) throws PcapException
    {
        return create(file, PcapReader.LINKTYPE_ETHERNET, DEFAULT_SNAP_LENGTH, PcapPrecision.MICRO);
    }

    /**
     * Append a record as read, keeping its original length and timestamp.
     */
    public void write(final PcapRecord record) throws PcapException
    {
        write(record.buffer(), 0, record.capturedLength(), record.originalLength(), record.epochSeconds(),
            record.nanos());
    }

    /**
     * Append a complete packet (original length = captured length).
     */
    public void write(
        final DirectBuffer buffer, final int offset, final int length, final long epochSeconds, final int nanos)
        throws PcapException
    {
        write(buffer, offset, length, length, epochSeconds, nanos);
    }

    /**
     * Append a record.
     *
     * @param buffer         holds the captured bytes.
     * @param offset         where they start in {@code buffer}.
     * @param capturedLength how many bytes to write, at most the snap length.
     * @param originalLength the packet's length on the wire, at least {@code capturedLength}.
     * @param epochSeconds   seconds since the epoch, 0..2^32-1 as classic pcap stores them.
     * @param nanos          nanoseconds within the second; truncated to microseconds in a microsecond file.
     * @throws PcapException if the record cannot be represented or written.
     */
    public void write(
        final DirectBuffer buffer,
        final int offset,
        final int capturedLength,
        final int originalLength,
        final long epochSeconds,
        final int nanos) throws PcapException
    {
        if (capturedLength < 0 || capturedLength > snapLength)
        {
            throw new PcapException(file + ": record " + (recordsWritten + 1) + ": captured length " +
                capturedLength + " outside 0.." + snapLength + " (snap length)");
        }
        if (originalLength < capturedLength)
        {
            throw new PcapException(file + ": record " + (recordsWritten + 1) + ": original length " +
                originalLength + " below captured length " + capturedLength);
        }
        if (epochSeconds < 0 || epochSeconds > 0xFFFF_FFFFL || nanos < 0 || nanos > 999_999_999)
        {
            throw new PcapException(file + ": record " + (recordsWritten + 1) + ": timestamp " + epochSeconds +
                "." + nanos + " not representable in pcap");
        }

        header.clear();
        header.putInt((int)epochSeconds)
            .putInt(nanos / precision.nanosPerTick())
            .putInt(capturedLength)
            .putInt(originalLength)
            .flip();

        if (body.capacity() < capturedLength)
        {
            body = ByteBuffer.allocate(Math.max(capturedLength, body.capacity() * 2));
        }
        body.clear();
        buffer.getBytes(offset, body, capturedLength);
        body.flip();

        try
        {
            writeFully(channel, header);
            writeFully(channel, body);
        }
        catch (final IOException ex)
        {
            throw new PcapException(file + ": record " + (recordsWritten + 1) + ": cannot write: " + ex, ex);
        }
        recordsWritten++;
    }

    public long recordsWritten()
    {
        return recordsWritten;
    }

    public PcapPrecision precision()
    {
        return precision;
    }

    @Override
    public void close() throws PcapException
    {
        try
        {
            channel.close();
        }
        catch (final IOException ex)
        {
            throw new PcapException(file + ": cannot close: " + ex, ex);
        }
    }

    private static void writeFully(final FileChannel channel, final ByteBuffer buffer) throws IOException
    {
        while (buffer.hasRemaining())
        {
            channel.write(buffer);
        }
    }

    private static void closeQuietly(final FileChannel channel)
    {
        if (null != channel)
        {
            try
            {
                channel.close();
            }
            catch (final IOException ignore)
            {
                // already failing with a better message
            }
        }
    }
}
