package io.netreduce.protocol.pcap;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The real capture Linux soft-RoCE wrote, read through {@link PcapReader}: every frame parses and its ICRC
 * verifies, and one flipped payload bit in any frame makes that frame fail. Runs on the in-repository copy and,
 * when present, on the original in {@code <repo>/../shared/testdata}.
 */
class SoftRoceCaptureTest
{
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    static Stream<Path> captures()
    {
        final List<Path> captures = new ArrayList<>();
        captures.add(TestCaptures.softRoceCopy());
        TestCaptures.sharedOriginal().ifPresent(captures::add);
        return captures.stream();
    }

    @ParameterizedTest
    @MethodSource("captures")
    void shouldParseEveryFrameAndVerifyItsIcrc(final Path capture) throws IOException
    {
        int frames = 0;
        try (PcapReader reader = PcapReader.open(capture))
        {
            final PcapRecord record = new PcapRecord();
            while (reader.next(record))
            {
                frames++;
                assertThat(frame.wrap(record.buffer(), 0, record.capturedLength()))
                    .as("frame %d status", frames).isEqualTo(RoceFrame.OK);
                assertThat(icrc.verify(frame)).as("frame %d (%s) ICRC", frames, Opcode.name(frame.opcode())).isTrue();
            }
        }
        assertThat(frames).isEqualTo(TestCaptures.SOFT_ROCE_FRAMES);
    }

    @ParameterizedTest
    @MethodSource("captures")
    void shouldFailVerificationOfAnyFrameWithOneFlippedPayloadBit(final Path capture) throws IOException
    {
        int withPayload = 0;
        try (PcapReader reader = PcapReader.open(capture))
        {
            final PcapRecord record = new PcapRecord();
            int frames = 0;
            while (reader.next(record))
            {
                frames++;
                frame.wrap(record.buffer(), 0, record.capturedLength());
                if (frame.payloadLength() == 0)
                {
                    continue;
                }
                withPayload++;
                // A different bit in each frame, spread over the payload.
                final int bit = (frames * 7919) % (frame.payloadLength() * 8);
                record.bytes()[frame.payloadOffset() + bit / 8] ^= (byte)(1 << (bit % 8));
                assertThat(frame.wrap(record.buffer(), 0, record.capturedLength())).isEqualTo(RoceFrame.OK);
                assertThat(icrc.verify(frame)).as("frame %d with payload bit %d flipped", frames, bit).isFalse();
            }
        }
        assertThat(withPayload).isEqualTo(100); // 120 frames less the 20 ACKNOWLEDGEs
    }
}
