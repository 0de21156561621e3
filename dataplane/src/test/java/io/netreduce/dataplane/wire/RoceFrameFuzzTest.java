package io.netreduce.dataplane.wire;

import static org.assertj.core.api.Assertions.assertThat;

import io.netreduce.dataplane.icrc.Icrc;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Hostile input never escapes the parser or the ICRC as an exception: random bytes, random bytes behind a
 * plausible RoCEv2 prefix, and valid frames cut short or with bits flipped. Every frame is parsed through a
 * buffer exactly its size, so a read past its end would throw (Agrona bounds checks) and fail the property.
 * When the parser says OK its layer offsets must lie inside the frame.
 */
class RoceFrameFuzzTest
{
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    @Property(tries = 2000)
    void shouldNeverThrowOnRandomBytes(@ForAll @Size(max = 1600) final byte[] bytes)
    {
        parseAndCheck(bytes, bytes.length);
    }

    @Property(tries = 2000)
    void shouldNeverThrowOnRandomBytesBehindRoceHeaders(
        @ForAll("roceFrames") final byte[] valid, @ForAll @Size(max = 200) final byte[] noise,
        @ForAll @IntRange(min = 0, max = 80) final int from)
    {
        // Keep the Ethernet/IP/UDP prefix up to a random point, then random bytes: reaches the BTH, length and
        // opcode checks that plain random bytes almost never get past.
        final byte[] bytes = new byte[Math.min(valid.length, from) + noise.length];
        System.arraycopy(valid, 0, bytes, 0, Math.min(valid.length, from));
        System.arraycopy(noise, 0, bytes, Math.min(valid.length, from), noise.length);
        parseAndCheck(bytes, bytes.length);
    }

    @Property(tries = 1000)
    void shouldReportEveryCutShortFrameAsNotOk(
        @ForAll("roceFrames") final byte[] valid, @ForAll @IntRange(min = 0, max = 5000) final int cut)
    {
        final int length = cut % valid.length; // strictly shorter than the frame
        final int status = parseAndCheck(valid, length);
        assertThat(status).isIn(RoceFrame.TRUNCATED, RoceFrame.NOT_ROCE, RoceFrame.MALFORMED);
    }

    @Property(tries = 1000)
    void shouldNeverThrowOnFramesWithFlippedBits(
        @ForAll("roceFrames") final byte[] valid, @ForAll @Size(min = 1, max = 8) final int[] positions)
    {
        final byte[] bytes = valid.clone();
        for (final int position : positions)
        {
            final int bit = Math.floorMod(position, bytes.length * 8);
            bytes[bit / 8] ^= (byte)(1 << (bit % 8));
        }
        parseAndCheck(bytes, bytes.length);
    }

    @Property(tries = 1000)
    void shouldFailIcrcOfAnyFrameWithOneFlippedPayloadBit(
        @ForAll("roceFrames") final byte[] valid, @ForAll final int position)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(valid.clone());
        assertThat(frame.wrap(buffer, 0, valid.length)).isEqualTo(RoceFrame.OK);
        assertThat(icrc.verify(frame)).isTrue();
        final int covered = frame.icrcOffset() - frame.payloadOffset();
        if (covered == 0)
        {
            return;
        }
        final int bit = Math.floorMod(position, covered * 8);
        final int index = frame.payloadOffset() + bit / 8;
        buffer.putByte(index, (byte)(buffer.getByte(index) ^ (1 << (bit % 8))));
        assertThat(frame.wrap(buffer, 0, valid.length)).isEqualTo(RoceFrame.OK);
        assertThat(icrc.verify(frame)).isFalse();
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
            icrc.verify(frame); // must not throw; the verdict itself is random here
        }
        return status;
    }

    @Provide
    Arbitrary<byte[]> roceFrames()
    {
        return Combinators.combine(
            Arbitraries.of(java.util.stream.IntStream.of(Opcode.all()).boxed().toList()),
            Arbitraries.of(false, true),
            Arbitraries.of(false, true),
            Arbitraries.integers().between(0, 1100),
            Arbitraries.longs())
            .as(RoceFrameFuzzTest::build);
    }

    private static byte[] build(
        final int opcode, final boolean ipv6, final boolean tagged, final int requestedPayload, final long seed)
    {
        final java.util.Random random = new java.util.Random(seed);
        final RoceFrameWriter writer = new RoceFrameWriter()
            .macs(random.nextLong() & 0xFEFF_FFFF_FFFFL, random.nextLong() & 0xFEFF_FFFF_FFFFL)
            .vlan(tagged ? random.nextInt(0x10000) : -1)
            .destQp(random.nextInt(0x100_0000))
            .reth(random.nextLong(), random.nextInt(), random.nextInt())
            .aeth(random.nextInt(256), random.nextInt(0x100_0000))
            .immediate(random.nextInt());
        if (ipv6)
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
            Opcode.has(opcode, Opcode.HAS_PAYLOAD) ? requestedPayload : 0;
        final byte[] payload = new byte[payloadLength];
        random.nextBytes(payload);
        final byte[] bytes = new byte[writer.frameLength(opcode, payloadLength)];
        writer.write(new UnsafeBuffer(bytes), 0, opcode, random.nextInt(0x100_0000), random.nextBoolean(),
            new UnsafeBuffer(payload), 0, payloadLength);
        return bytes;
    }
}
