package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class AnonymousMemoryTest
{
    private static final long BLOCK = 10L << 20;

    @Test
    void shouldGiveAZeroFilledPageAlignedBlockThatCanBeWrittenAndRead()
    {
        try (AnonymousMemory memory = AnonymousMemory.map(BLOCK))
        {
            final MemorySegment segment = memory.segment();
            assertThat(segment.byteSize()).isEqualTo(BLOCK);
            assertThat(segment.address() % 4096).isZero();
            assertThat(segment.get(ValueLayout.JAVA_LONG, BLOCK - 8)).isZero();
            segment.set(ValueLayout.JAVA_LONG, BLOCK - 8, 0x1122334455667788L);
            assertThat(segment.asByteBuffer().getLong((int)BLOCK - 8)).isEqualTo(0x8877665544332211L);
        }
    }

    @Test
    void shouldGiveTheBlockBackToTheSystemAtCloseAndRefuseAccessAfterIt() throws IOException
    {
        final AnonymousMemory memory = AnonymousMemory.map(BLOCK);
        final long address = memory.segment().address();
        memory.segment().fill((byte)1);
        assertThat(mapped(address)).isTrue();

        memory.close();
        memory.close();

        assertThat(memory.isMapped()).isFalse();
        assertThat(mapped(address)).as("the address is in no mapping of /proc/self/maps").isFalse();
        assertThatThrownBy(() -> memory.segment().get(ValueLayout.JAVA_BYTE, 0))
            .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void shouldMapTheBlockResidentSoThatItsFirstWritesTakeNoPageFault() throws IOException
    {
        final long before = anonymousResidentKb();
        try (AnonymousMemory memory = AnonymousMemory.map(BLOCK))
        {
            assertThat(anonymousResidentKb() - before).as("resident at once, before any write")
                .isGreaterThanOrEqualTo(BLOCK / 1024 * 9 / 10);
        }
    }

    @Test
    void shouldRefuseAnEmptyBlock()
    {
        assertThatThrownBy(() -> AnonymousMemory.map(0)).isInstanceOf(IllegalArgumentException.class);
    }

    private static long anonymousResidentKb() throws IOException
    {
        try (var lines = Files.lines(Path.of("/proc/self/status")))
        {
            return lines.filter(line -> line.startsWith("RssAnon:"))
                .mapToLong(line -> Long.parseLong(line.replaceAll("[^0-9]", ""))).findFirst().orElseThrow();
        }
    }

    /** Whether a mapping of the process holds {@code address} (the kernel may merge a block with a neighbour). */
    private static boolean mapped(final long address) throws IOException
    {
        try (var lines = Files.lines(Path.of("/proc/self/maps")))
        {
            return lines.anyMatch(line ->
            {
                final String range = line.substring(0, line.indexOf(' '));
                final int dash = range.indexOf('-');
                final long start = Long.parseUnsignedLong(range, 0, dash, 16);
                final long end = Long.parseUnsignedLong(range, dash + 1, range.length(), 16);
                return Long.compareUnsigned(address, start) >= 0 && Long.compareUnsigned(address, end) < 0;
            });
        }
    }
}
