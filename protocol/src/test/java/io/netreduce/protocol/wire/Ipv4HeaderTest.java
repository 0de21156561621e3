package io.netreduce.protocol.wire;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

class Ipv4HeaderTest
{
    private static final int OFFSET = 14;

    /** RFC 1071's sum, 16 bits at a time: what the header checksum is defined as. */
    private static int referenceChecksum(final UnsafeBuffer buffer, final int offset, final int length)
    {
        int sum = 0;
        for (int i = 0; i < length; i += 2)
        {
            sum += buffer.getShort(offset + i, ByteOrder.BIG_ENDIAN) & 0xFFFF;
        }
        while ((sum >>> 16) != 0)
        {
            sum = (sum & 0xFFFF) + (sum >>> 16);
        }
        return ~sum & 0xFFFF;
    }

    @Test
    void shouldWriteTheChecksumOfTheFieldsWrittenForAnyValues()
    {
        final Random random = new Random(791);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[64]);
        for (int i = 0; i < 100_000; i++)
        {
            final int tos = random.nextInt(256);
            final int totalLength = i < 4 ? new int[] {0, 0xFFFF, 20, 65_535}[i] : random.nextInt(65_536);
            final int identification = random.nextInt(65_536);
            final int ttl = random.nextInt(256);
            final int protocol = random.nextInt(256);
            final int src = i == 0 ? 0xFFFF_FFFF : random.nextInt();
            final int dst = i == 0 ? 0xFFFF_FFFF : random.nextInt();
            Ipv4Header.write(buffer, OFFSET, tos, totalLength, identification, ttl, protocol, src, dst);

            final int written = Ipv4Header.checksum(buffer, OFFSET);
            buffer.putShort(OFFSET + Ipv4Header.CHECKSUM_OFFSET, (short)0);
            assertThat(written).as("header %d", i).isEqualTo(referenceChecksum(buffer, OFFSET, Ipv4Header.MIN_LENGTH));
            buffer.putShort(OFFSET + Ipv4Header.CHECKSUM_OFFSET, (short)written, ByteOrder.BIG_ENDIAN);
            assertThat(Ipv4Header.computeChecksum(buffer, OFFSET)).as("a valid header sums to 0").isZero();
        }
    }

    @Test
    void shouldComputeTheChecksumOfAnyHeaderWithOrWithoutOptionsAsRfc1071Does()
    {
        final Random random = new Random(4791);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[128]);
        final byte[] bytes = new byte[60];
        for (int i = 0; i < 100_000; i++)
        {
            random.nextBytes(bytes);
            if (i % 7 == 0)
            {
                Arrays.fill(bytes, (byte)0xFF);
            }
            final int ihl = 5 + random.nextInt(11);
            bytes[0] = (byte)(0x40 | ihl);
            buffer.putBytes(OFFSET, bytes);
            assertThat(Ipv4Header.computeChecksum(buffer, OFFSET)).as("header %d, IHL %d", i, ihl)
                .isEqualTo(referenceChecksum(buffer, OFFSET, ihl * 4));
        }
    }
}
