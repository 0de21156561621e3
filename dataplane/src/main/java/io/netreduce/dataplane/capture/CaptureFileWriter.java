package io.netreduce.dataplane.capture;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.pcap.PcapException;
import io.netreduce.protocol.pcap.PcapPrecision;
import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapWriter;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.MessageHandler;

import java.io.BufferedWriter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.List;

/**
 * The control side of a capture: drains a {@link CaptureTap}'s ring into a classic pcap file (Ethernet,
 * microsecond timestamps) and stops writing after a maximum number of frames.
 * <p>
 * A drop capture also writes a sidecar text file, the pcap's name plus {@value #REASONS_SUFFIX}, with one line
 * per frame giving why it was dropped (classic pcap has no per-record comment):
 * <pre>
 * # frame	port	reason
 * 1	eth1	bad_icrc
 * </pre>
 * {@code frame} is the record's 1-based number in the pcap (Wireshark's frame.number), {@code port} the port the
 * frame arrived on, {@code reason} the drop reason as in the {@code reason} label of
 * {@code netreduce_dataplane_drops} (see {@link DataplaneCounter#reason()}).
 * <p>
 * Timestamps are those of the dataplane batch the frame arrived in, converted from {@link System#nanoTime()} to
 * wall-clock time with one offset taken when the writer is created.
 * <p>
 * Used on one thread (the capture's writer thread); allocates per record, which is fine off the packet path.
 */
public final class CaptureFileWriter implements MessageHandler, AutoCloseable
{
    /** Suffix of a drop capture's reasons file. */
    public static final String REASONS_SUFFIX = ".reasons";
    /** First line of a reasons file. */
    public static final String REASONS_HEADER = "# frame\tport\treason";

    private static final long NANOS_PER_SECOND = 1_000_000_000L;
    private static final DataplaneCounter[] COUNTERS = DataplaneCounter.values();

    private final Path file;
    private final Path reasonsFile;
    private final PcapWriter pcap;
    private final BufferedWriter reasons;
    private final List<String> portNames;
    private final long maxPackets;
    private final long epochNanosAtStart;
    private final long nanoTimeAtStart;
    private long written;
    private long ignored;
    private IOException failure;

    private CaptureFileWriter(
        final Path file,
        final Path reasonsFile,
        final PcapWriter pcap,
        final BufferedWriter reasons,
        final List<String> portNames,
        final long maxPackets)
    {
        this.file = file;
        this.reasonsFile = reasonsFile;
        this.pcap = pcap;
        this.reasons = reasons;
        this.portNames = List.copyOf(portNames);
        this.maxPackets = maxPackets;
        final Instant now = Instant.now();
        this.nanoTimeAtStart = System.nanoTime();
        this.epochNanosAtStart = now.getEpochSecond() * NANOS_PER_SECOND + now.getNano();
    }

    /**
     * Create the capture file (and for a drop capture its reasons file). Neither may exist yet: an existing
     * file or a symbolic link in its place is refused rather than replaced or followed.
     *
     * @param file       the pcap file.
     * @param tap        the tap whose records will be written (its kind and snap length).
     * @param portNames  port names by index, for the reasons file.
     * @param maxPackets frames to write at most; 0 for no limit.
     * @throws IOException if a file exists or cannot be created.
     */
    public static CaptureFileWriter create(
        final Path file, final CaptureTap tap, final List<String> portNames, final long maxPackets) throws IOException
    {
        if (maxPackets < 0)
        {
            throw new IllegalArgumentException("maxPackets must be >= 0: " + maxPackets);
        }
        final Path reasonsFile = tap.drops() ? reasonsFileOf(file) : null;
        BufferedWriter reasons = null;
        if (reasonsFile != null)
        {
            reasons = Files.newBufferedWriter(reasonsFile, StandardCharsets.UTF_8,
                StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        }
        final PcapWriter pcap;
        try
        {
            pcap = PcapWriter.createNew(file, PcapReader.LINKTYPE_ETHERNET, tap.snapLength(), PcapPrecision.MICRO);
            if (reasons != null)
            {
                reasons.write(REASONS_HEADER);
                reasons.newLine();
            }
        }
        catch (final IOException ex)
        {
            if (reasons != null)
            {
                reasons.close();
                Files.deleteIfExists(reasonsFile);
            }
            throw ex;
        }
        return new CaptureFileWriter(file, reasonsFile, pcap, reasons, portNames, maxPackets);
    }

    /**
     * @return where a drop capture writes the reasons of {@code file}'s frames.
     */
    public static Path reasonsFileOf(final Path file)
    {
        return file.resolveSibling(file.getFileName() + REASONS_SUFFIX);
    }

    /**
     * Write up to {@code limit} records from the tap's ring. Records beyond the maximum are read and discarded.
     *
     * @return how many records were taken from the ring.
     */
    public int drain(final CaptureTap tap, final int limit)
    {
        return tap.read(this, limit);
    }

    /**
     * Write everything left in the tap's ring (after the dataplane removed the tap, nothing more arrives).
     *
     * @return how many records were taken from the ring.
     */
    public long drainAll(final CaptureTap tap)
    {
        long records = 0;
        while (!tap.isEmpty())
        {
            records += tap.read(this, Integer.MAX_VALUE);
        }
        return records;
    }

    @Override
    public void onMessage(final int msgTypeId, final MutableDirectBuffer buffer, final int index, final int length)
    {
        if (msgTypeId != CaptureTap.RECORD_TYPE || failure != null || limitReached())
        {
            ignored++;
            return;
        }
        final long timestamp = buffer.getLong(index + CaptureTap.TIMESTAMP_OFFSET);
        final int port = buffer.getInt(index + CaptureTap.PORT_OFFSET);
        final int reason = buffer.getInt(index + CaptureTap.REASON_OFFSET);
        final int originalLength = buffer.getInt(index + CaptureTap.ORIGINAL_LENGTH_OFFSET);
        final int capturedLength = length - CaptureTap.FRAME_OFFSET;
        final long epochNanos = Math.max(0, epochNanosAtStart + (timestamp - nanoTimeAtStart));
        try
        {
            pcap.write(buffer, index + CaptureTap.FRAME_OFFSET, capturedLength, originalLength,
                epochNanos / NANOS_PER_SECOND, (int)(epochNanos % NANOS_PER_SECOND));
            written++;
            if (reasons != null)
            {
                reasons.write(written + "\t" + portName(port) + "\t" + reasonName(reason));
                reasons.newLine();
            }
        }
        catch (final IOException ex)
        {
            failure = ex;
        }
    }

    private String portName(final int port)
    {
        return port >= 0 && port < portNames.size() ? portNames.get(port) : "port" + port;
    }

    private static String reasonName(final int reason)
    {
        return reason >= 0 && reason < COUNTERS.length ? COUNTERS[reason].reason() : "unknown";
    }

    /**
     * @return whether the maximum number of frames has been written (never, without a maximum).
     */
    public boolean limitReached()
    {
        return maxPackets > 0 && written >= maxPackets;
    }

    /**
     * @return frames written to the pcap so far.
     */
    public long written()
    {
        return written;
    }

    /**
     * @return records read from the ring but not written (beyond the maximum, or after a write failed).
     */
    public long ignored()
    {
        return ignored;
    }

    /**
     * @return the write error that stopped the capture, or null.
     */
    public IOException failure()
    {
        return failure;
    }

    public Path file()
    {
        return file;
    }

    /**
     * @return the reasons file, or null for a port capture.
     */
    public Path reasonsFile()
    {
        return reasonsFile;
    }

    @Override
    public void close() throws IOException
    {
        IOException error = null;
        if (reasons != null)
        {
            try
            {
                reasons.close();
            }
            catch (final IOException ex)
            {
                error = ex;
            }
        }
        try
        {
            pcap.close();
        }
        catch (final PcapException ex)
        {
            error = error == null ? ex : error;
        }
        if (error != null)
        {
            throw error;
        }
    }
}
