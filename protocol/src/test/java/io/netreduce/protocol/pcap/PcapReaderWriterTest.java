package io.netreduce.protocol.pcap;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assumptions.assumeThat;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PcapReaderWriterTest
{
    @TempDir
    Path tmp;

    @Test
    void shouldReadEveryRecordOfSoftRoceCapture() throws IOException
    {
        try (PcapReader reader = PcapReader.open(TestCaptures.softRoceCopy()))
        {
            assertThat(reader.linkType()).isEqualTo(PcapReader.LINKTYPE_ETHERNET);
            assertThat(reader.precision()).isEqualTo(PcapPrecision.MICRO);
            assertThat(reader.snapLength()).isEqualTo(262_144);

            final PcapRecord record = new PcapRecord();
            assertThat(reader.next(record)).isTrue();
            // Values as tshark shows frame 1: 1098 bytes at 01:46:54.351270 (epoch seconds from the header bytes).
            assertThat(record.capturedLength()).isEqualTo(1098);
            assertThat(record.originalLength()).isEqualTo(1098);
            assertThat(record.epochSeconds()).isEqualTo(0x6B02498EL);
            assertThat(record.nanos()).isEqualTo(351_270_000);
            assertThat(record.buffer().getShort(12, ByteOrder.BIG_ENDIAN)).isEqualTo((short)0x0800);

            int count = 1;
            while (reader.next(record))
            {
                count++;
            }
            assertThat(count).isEqualTo(TestCaptures.SOFT_ROCE_FRAMES);
            assertThat(reader.recordsRead()).isEqualTo(TestCaptures.SOFT_ROCE_FRAMES);
            assertThat(reader.next(record)).isFalse();
        }
    }

    @Test
    void shouldKeepInRepositoryCopyIdenticalToSharedOriginal() throws IOException
    {
        final Optional<Path> original = TestCaptures.sharedOriginal();
        assumeThat(original).as("../shared/testdata beside the repository").isPresent();
        assertThat(Files.readAllBytes(TestCaptures.softRoceCopy())).isEqualTo(Files.readAllBytes(original.get()));
    }

    @Test
    void shouldRewriteCaptureByteForByte() throws IOException
    {
        final Path in = TestCaptures.softRoceCopy();
        final Path out = tmp.resolve("copy.pcap");
        copy(in, out);
        assertThat(Files.readAllBytes(out)).isEqualTo(Files.readAllBytes(in));
    }

    @Test
    void shouldReadBigEndianCaptureAsTheSameRecords() throws IOException
    {
        final Path in = TestCaptures.softRoceCopy();
        final Path swapped = tmp.resolve("big-endian.pcap");
        Files.write(swapped, reorder(Files.readAllBytes(in), PcapPrecision.MICRO, ByteOrder.BIG_ENDIAN));

        assertThat(readAll(swapped)).usingRecursiveFieldByFieldElementComparator().isEqualTo(readAll(in));
        try (PcapReader reader = PcapReader.open(swapped))
        {
            assertThat(reader.precision()).isEqualTo(PcapPrecision.MICRO);
        }
    }

    @Test
    void shouldReadNanosecondCaptureWithEveryDigit() throws IOException
    {
        final Path file = tmp.resolve("nano.pcap");
        final byte[] frame = new byte[60];
        Arrays.fill(frame, (byte)0xA5);
        try (PcapWriter writer = PcapWriter.create(file, PcapReader.LINKTYPE_ETHERNET, 1500, PcapPrecision.NANO))
        {
            writer.write(new UnsafeBuffer(frame), 0, frame.length, 1_700_000_000L, 123_456_789);
            writer.write(new UnsafeBuffer(frame), 0, frame.length, 1_700_000_001L, 999_999_999);
        }

        try (PcapReader reader = PcapReader.open(file))
        {
            assertThat(reader.precision()).isEqualTo(PcapPrecision.NANO);
            assertThat(reader.snapLength()).isEqualTo(1500);
            final PcapRecord record = new PcapRecord();
            assertThat(reader.next(record)).isTrue();
            assertThat(record.epochSeconds()).isEqualTo(1_700_000_000L);
            assertThat(record.nanos()).isEqualTo(123_456_789);
            assertThat(record.bytes()).isEqualTo(frame);
            assertThat(reader.next(record)).isTrue();
            assertThat(record.nanos()).isEqualTo(999_999_999);
            assertThat(reader.next(record)).isFalse();
        }

        // Big-endian nanosecond files too: the magic decides the resolution in either byte order.
        final Path swapped = tmp.resolve("nano-be.pcap");
        Files.write(swapped, reorder(Files.readAllBytes(file), PcapPrecision.NANO, ByteOrder.BIG_ENDIAN));
        assertThat(readAll(swapped)).usingRecursiveFieldByFieldElementComparator().isEqualTo(readAll(file));
    }

    @Test
    void shouldTruncateNanosecondsToMicrosecondsInMicrosecondFile() throws IOException
    {
        final Path file = tmp.resolve("micro.pcap");
        try (PcapWriter writer = PcapWriter.create(file))
        {
            writer.write(new UnsafeBuffer(new byte[64]), 0, 64, 1_700_000_000L, 123_456_789);
        }
        final List<Rec> records = readAll(file);
        assertThat(records).singleElement().satisfies(r -> assertThat(r.nanos).isEqualTo(123_456_000));
    }

    @Test
    void shouldKeepOriginalLengthOfRecordCutBySnapLength() throws IOException
    {
        final Path file = tmp.resolve("snapped.pcap");
        final byte[] frame = new byte[96];
        try (PcapWriter writer = PcapWriter.create(file, PcapReader.LINKTYPE_ETHERNET, 96, PcapPrecision.MICRO))
        {
            writer.write(new UnsafeBuffer(frame), 0, 96, 1082, 1L, 0);
        }
        try (PcapReader reader = PcapReader.open(file))
        {
            final PcapRecord record = new PcapRecord();
            assertThat(reader.next(record)).isTrue();
            assertThat(record.capturedLength()).isEqualTo(96);
            assertThat(record.originalLength()).isEqualTo(1082);
            assertThat(record.isTruncated()).isTrue();
        }
    }

    @Test
    void shouldRefuseRecordLongerThanSnapLength() throws IOException
    {
        try (PcapWriter writer = PcapWriter.create(
            tmp.resolve("small.pcap"), PcapReader.LINKTYPE_ETHERNET, 64, PcapPrecision.MICRO))
        {
            assertThatThrownBy(() -> writer.write(new UnsafeBuffer(new byte[65]), 0, 65, 1L, 0))
                .isInstanceOf(PcapException.class)
                .hasMessageContaining("record 1")
                .hasMessageContaining("snap length");
        }
    }

    @Test
    void shouldReportFileCutInsideRecordNamingTheRecord() throws IOException
    {
        final Path cut = tmp.resolve("cut.pcap");
        // Header (24) + four 1082/1098-byte records fit in 5000 bytes; record 5 is cut part way.
        Files.write(cut, Arrays.copyOf(Files.readAllBytes(TestCaptures.softRoceCopy()), 5000));

        try (PcapReader reader = PcapReader.open(cut))
        {
            final PcapRecord record = new PcapRecord();
            for (int i = 0; i < 4; i++)
            {
                assertThat(reader.next(record)).isTrue();
            }
            assertThatThrownBy(() -> reader.next(record))
                .isInstanceOf(PcapException.class)
                .hasMessageContaining(cut.toString())
                .hasMessageContaining("record 5")
                .hasMessageContaining("truncated");
        }
    }

    @Test
    void shouldReportRecordHeaderClaimingMoreThanSnapLength() throws IOException
    {
        final byte[] bytes = Files.readAllBytes(TestCaptures.softRoceCopy());
        ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putInt(24 + 8, 0x7FFF_FFFF);
        final Path file = tmp.resolve("huge-caplen.pcap");
        Files.write(file, bytes);

        try (PcapReader reader = PcapReader.open(file))
        {
            assertThatThrownBy(() -> reader.next(new PcapRecord()))
                .isInstanceOf(PcapException.class)
                .hasMessageContaining("record 1");
        }
    }

    @Test
    void shouldRejectGarbageEmptyShortAndMissingFilesWithClearMessage() throws IOException
    {
        final byte[] garbage = new byte[4096];
        new java.util.Random(42).nextBytes(garbage);
        final Path garbageFile = Files.write(tmp.resolve("garbage.pcap"), garbage);
        final Path emptyFile = Files.write(tmp.resolve("empty.pcap"), new byte[0]);
        final Path shortFile = Files.write(
            tmp.resolve("short.pcap"), Arrays.copyOf(Files.readAllBytes(TestCaptures.softRoceCopy()), 10));
        final Path missingFile = tmp.resolve("missing.pcap");

        for (final Path file : List.of(garbageFile, emptyFile, shortFile, missingFile))
        {
            assertThatThrownBy(() -> PcapReader.open(file).close())
                .isInstanceOf(PcapException.class)
                .hasMessageStartingWith(file.toString());
        }
    }

    @Test
    void shouldOpenCaptureWithHeaderOnlyAsEmpty() throws IOException
    {
        final Path file = Files.write(
            tmp.resolve("header-only.pcap"), Arrays.copyOf(Files.readAllBytes(TestCaptures.softRoceCopy()), 24));
        assertThat(readAll(file)).isEmpty();
    }

    private record Rec(byte[] bytes, int originalLength, long seconds, int nanos)
    {
    }

    private static List<Rec> readAll(final Path file) throws IOException
    {
        final List<Rec> records = new ArrayList<>();
        try (PcapReader reader = PcapReader.open(file))
        {
            final PcapRecord record = new PcapRecord();
            while (reader.next(record))
            {
                records.add(new Rec(
                    record.bytes().clone(), record.originalLength(), record.epochSeconds(), record.nanos()));
            }
        }
        return records;
    }

    private static void copy(final Path in, final Path out) throws IOException
    {
        try (PcapReader reader = PcapReader.open(in);
            PcapWriter writer = PcapWriter.create(out, reader.linkType(), reader.snapLength(), reader.precision()))
        {
            final PcapRecord record = new PcapRecord();
            while (reader.next(record))
            {
                writer.write(record);
            }
        }
    }

    /**
     * Rewrite a little-endian classic pcap in another byte order, header and record headers alike.
     */
    private static byte[] reorder(final byte[] littleEndian, final PcapPrecision precision, final ByteOrder order)
    {
        final ByteBuffer in = ByteBuffer.wrap(littleEndian).order(ByteOrder.LITTLE_ENDIAN);
        final ByteBuffer out = ByteBuffer.allocate(littleEndian.length).order(order);
        assertThat(in.getInt(0)).isEqualTo(precision.magic());
        out.putInt(in.getInt()).putShort(in.getShort()).putShort(in.getShort())
            .putInt(in.getInt()).putInt(in.getInt()).putInt(in.getInt()).putInt(in.getInt());
        while (in.hasRemaining())
        {
            final int seconds = in.getInt();
            final int fraction = in.getInt();
            final int captured = in.getInt();
            final int original = in.getInt();
            out.putInt(seconds).putInt(fraction).putInt(captured).putInt(original);
            final byte[] data = new byte[captured];
            in.get(data);
            out.put(data);
        }
        return out.array();
    }
}
