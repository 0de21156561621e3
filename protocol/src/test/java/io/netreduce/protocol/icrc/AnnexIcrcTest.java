package io.netreduce.protocol.icrc;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;

import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapRecord;
import io.netreduce.protocol.pcap.TestCaptures;
import org.junit.jupiter.api.Test;

/**
 * The test oracle must itself agree with a RoCE stack before it can judge ours: every ICRC the Linux kernel
 * wrote into the soft-RoCE capture equals the annex computation.
 */
class AnnexIcrcTest
{
    @Test
    void shouldAgreeWithEveryIcrcTheKernelWrote() throws IOException
    {
        int frames = 0;
        try (PcapReader reader = PcapReader.open(TestCaptures.softRoceCopy()))
        {
            final PcapRecord record = new PcapRecord();
            while (reader.next(record))
            {
                frames++;
                assertThat(AnnexIcrc.compute(record.bytes()))
                    .as("frame %d", frames)
                    .isEqualTo(AnnexIcrc.carried(record.bytes()));
            }
        }
        assertThat(frames).isEqualTo(TestCaptures.SOFT_ROCE_FRAMES);
    }

    @Test
    void shouldDisagreeAfterAnyUnmaskedBitFlips() throws IOException
    {
        try (PcapReader reader = PcapReader.open(TestCaptures.softRoceCopy()))
        {
            final PcapRecord record = new PcapRecord();
            assertThat(reader.next(record)).isTrue();
            final byte[] frame = record.bytes();
            final int good = AnnexIcrc.compute(frame);
            frame[frame.length - 100] ^= 0x01; // payload
            assertThat(AnnexIcrc.compute(frame)).isNotEqualTo(good);
            frame[frame.length - 100] ^= 0x01;
            frame[14 + 8] ^= 0x01;             // IPv4 TTL is masked: no change
            assertThat(AnnexIcrc.compute(frame)).isEqualTo(good);
        }
    }
}
