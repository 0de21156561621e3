package io.netreduce.protocol.wire;

import io.netreduce.protocol.writer.RoceFrameWriter;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.testing.SeededCases;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

/**
 * Hostile input never escapes the parser or the ICRC as an exception: random bytes, random bytes behind a
 * plausible RoCEv2 prefix, and valid frames cut short or with bits flipped. Every frame is parsed through a
 * buffer exactly its size, so a read past its end would throw (Agrona bounds checks) and fail the test.
 * When the parser says OK its layer offsets must lie inside the frame. Seeded random cases (see
 * {@link SeededCases}).
 */
class RoceFrameFuzzTest
{
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    @Test
    void shouldNeverThrowOnRandomBytes()
    {
        SeededCases.run("random bytes", 5000, (random, i) ->
        {
            final byte[] bytes = new byte[random.nextInt(1601)];
            random.nextBytes(bytes);
            parseAndCheck(bytes, bytes.length);
        });
    }

    @Test
    void shouldNeverThrowOnRandomBytesBehindRoceHeaders()
    {
        // Keep the Ethernet/IP/UDP prefix of a valid frame up to a random point, then random bytes: reaches the
        // BTH, length and opcode checks that plain random bytes almost never get past.
        SeededCases.run("random bytes behind RoCE headers", 5000, (random, i) ->
        {
            final byte[] valid = roceFrame(random);
            final int keep = Math.min(valid.length, random.nextInt(81));
            final byte[] bytes = new byte[keep + random.nextInt(201)];
            System.arraycopy(valid, 0, bytes, 0, keep);
            final byte[] noise = new byte[bytes.length - keep];
            random.nextBytes(noise);
            System.arraycopy(noise, 0, bytes, keep, noise.length);
            parseAndCheck(bytes, bytes.length);
        });
    }

    @Test
    void shouldReportEveryCutShortFrameAsNotOk()
    {
        SeededCases.run("cut-short frames", 2000, (random, i) ->
        {
            final byte[] valid = roceFrame(random);
            final int length = random.nextInt(valid.length); // strictly shorter than the frame
            assertThat(parseAndCheck(valid, length))
                .as("frame of %d bytes cut to %d", valid.length, length)
                .isIn(RoceFrame.TRUNCATED, RoceFrame.NOT_ROCE, RoceFrame.MALFORMED);
        });
    }

    @Test
    void shouldNeverThrowOnFramesWithFlippedBits()
    {
        SeededCases.run("bit-flipped frames", 2000, (random, i) ->
        {
            final byte[] bytes = roceFrame(random);
            final int flips = 1 + random.nextInt(8);
            for (int f = 0; f < flips; f++)
            {
                final int bit = random.nextInt(bytes.length * 8);
                bytes[bit / 8] ^= (byte)(1 << (bit % 8));
            }
            parseAndCheck(bytes, bytes.length);
        });
    }

    @Test
    void shouldFailIcrcOfAnyFrameWithOneFlippedPayloadBit()
    {
        SeededCases.run("one flipped payload bit", 2000, (random, i) ->
        {
            final byte[] bytes = roceFrame(random);
            final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
            assertThat(frame.wrap(buffer, 0, bytes.length)).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(frame)).isTrue();
            final int covered = frame.icrcOffset() - frame.payloadOffset(); // payload and pad
            if (covered == 0)
            {
                return;
            }
            final int bit = random.nextInt(covered * 8);
            final int index = frame.payloadOffset() + bit / 8;
            buffer.putByte(index, (byte)(buffer.getByte(index) ^ (1 << (bit % 8))));
            assertThat(frame.wrap(buffer, 0, bytes.length)).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(frame)).as("%s with payload bit %d flipped", Opcode.name(frame.opcode()), bit)
                .isFalse();
        });
    }

    private int parseAndCheck(final byte[] array, final int length)
    {
        final UnsafeBuffer exact = new UnsafeBuffer(array, 0, length);
        final int status = frame.wrap(exact, 0, length);
        assertThat(status).isBetween(RoceFrame.OK, RoceFrame.UNKNOWN_OPCODE);
        if (status == RoceFrame.OK || status == RoceFrame.UNKNOWN_OPCODE)
        {
            assertThat(frame.l3Offset()).isLessThan(frame.udpOffset());
            assertThat(frame.udpOffset()).isLessThan(frame.bthOffset());
            assertThat(frame.icrcOffset() + RoceFrame.ICRC_LENGTH).isLessThanOrEqualTo(length);
            assertThat(frame.payloadOffset()).isGreaterThanOrEqualTo(frame.bthOffset() + BthHeader.LENGTH);
            if (status == RoceFrame.OK)
            {
                assertThat(frame.payloadOffset() + frame.payloadLength() + frame.padCount())
                    .isEqualTo(frame.icrcOffset());
            }
            icrc.verify(frame); // must not throw; the verdict itself is arbitrary here
        }
        return status;
    }

    /**
     * A valid frame from our writer: any opcode, IPv4 or IPv6, tagged or not, payload 0..1100 bytes.
     */
    static byte[] roceFrame(final SplittableRandom random)
    {
        final int[] opcodes = Opcode.all();
        final int opcode = opcodes[random.nextInt(opcodes.length)];
        final RoceFrameWriter writer = new RoceFrameWriter()
            .macs(random.nextLong() & 0xFEFF_FFFF_FFFFL, random.nextLong() & 0xFEFF_FFFF_FFFFL)
            .vlan(random.nextBoolean() ? random.nextInt(0x10000) : -1)
            .destQp(random.nextInt(0x100_0000))
            .reth(random.nextLong(), random.nextInt(), random.nextInt())
            .aeth(random.nextInt(256), random.nextInt(0x100_0000))
            .immediate(random.nextInt());
        if (random.nextBoolean())
        {
            final byte[] src = new byte[16];
            final byte[] dst = new byte[16];
            random.nextBytes(src);
            random.nextBytes(dst);
            writer.ipv6(src, dst).trafficClass(random.nextInt(256), random.nextInt(0x10_0000));
        }
        else
        {
            writer.ipv4(random.nextInt(), random.nextInt()).trafficClass(random.nextInt(256), 0);
        }
        final int payloadLength = opcode == Opcode.CNP ? Opcode.CNP_RESERVED_LENGTH :
            Opcode.has(opcode, Opcode.HAS_PAYLOAD) ? random.nextInt(1101) : 0;
        final byte[] payload = new byte[payloadLength];
        random.nextBytes(payload);
        final byte[] bytes = new byte[writer.frameLength(opcode, payloadLength)];
        writer.write(new UnsafeBuffer(bytes), 0, opcode, random.nextInt(0x100_0000), random.nextBoolean(),
            new UnsafeBuffer(payload), 0, payloadLength);
        return bytes;
    }
}
