package io.netreduce.protocol.icrc;

import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.TestPcap;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.zip.CRC32;

import static org.assertj.core.api.Assertions.assertThat;

class IcrcTest
{
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    @Test
    void shouldVerifyEveryFrameWrittenByLinuxSoftRoce() throws Exception
    {
        final List<byte[]> frames = TestPcap.frames(TestPcap.RXE_CAPTURE);
        assertThat(frames).hasSize(120); // the testdata README says 100; the file holds 120 frames
        int index = 0;
        for (final byte[] bytes : frames)
        {
            assertThat(frame.wrap(new UnsafeBuffer(bytes), 0, bytes.length))
                .as("frame %d status", index).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(frame)).as("frame %d (%s) icrc", index, Opcode.name(frame.opcode())).isTrue();
            index++;
        }
    }

    @Test
    void shouldVerifyFramesHeldInDirectByteBuffers() throws Exception
    {
        for (final byte[] bytes : TestPcap.frames(TestPcap.RXE_CAPTURE))
        {
            final ByteBuffer direct = ByteBuffer.allocateDirect(bytes.length + 64);
            direct.position(32);
            direct.put(bytes);
            final UnsafeBuffer buffer = new UnsafeBuffer(direct, 16, bytes.length + 16);
            assertThat(frame.wrap(buffer, 16, bytes.length)).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(frame)).isTrue();
        }
    }

    @Test
    void shouldFailVerificationWhenOnePayloadBitIsFlipped() throws Exception
    {
        final byte[] bytes = TestPcap.frames(TestPcap.RXE_CAPTURE).get(0).clone();
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        frame.wrap(buffer, 0, bytes.length);
        assertThat(frame.payloadLength()).isPositive();
        bytes[frame.payloadOffset() + frame.payloadLength() / 2] ^= 0x10;
        frame.wrap(buffer, 0, bytes.length);
        assertThat(icrc.verify(frame)).isFalse();
        icrc.write(buffer, frame);
        assertThat(icrc.verify(frame)).isTrue();
    }

    @Test
    void shouldIgnoreMaskedFieldsTtlTosChecksumAndBthReserved() throws Exception
    {
        final byte[] bytes = TestPcap.frames(TestPcap.RXE_CAPTURE).get(3).clone();
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        frame.wrap(buffer, 0, bytes.length);
        bytes[frame.l3Offset() + 1] = (byte)0x03; // TOS: ECN CE, as a switch would mark it
        bytes[frame.l3Offset() + 8] = (byte)0x01; // TTL decremented
        bytes[frame.l3Offset() + 10] ^= 0x55;     // checksum changed
        bytes[frame.bthOffset() + 4] = (byte)0x80; // FECN
        frame.wrap(buffer, 0, bytes.length);
        assertThat(icrc.verify(frame)).isTrue();
    }

    @Test
    void shouldCombineCrcsOfAdjacentRangesLikeOnePass()
    {
        final byte[] data = new byte[5000];
        new java.util.Random(7).nextBytes(data);
        for (final int split : new int[]{ 0, 1, 3, 64, 1024, 4096, 5000 })
        {
            final CRC32 whole = new CRC32();
            whole.update(data);
            final CRC32 a = new CRC32();
            a.update(data, 0, split);
            final CRC32 b = new CRC32();
            b.update(data, split, data.length - split);
            assertThat(Crc32Combine.combine((int)a.getValue(), (int)b.getValue(), data.length - split))
                .as("split %d", split).isEqualTo((int)whole.getValue());
            assertThat(Crc32Combine.combineWithOperator((int)a.getValue(), (int)b.getValue(),
                Crc32Combine.shiftOperator(data.length - split))).isEqualTo((int)whole.getValue());
        }
    }

    @Test
    void shouldComputeIcrcFromHeaderCrcAndSharedPayloadCrc() throws Exception
    {
        final byte[] bytes = TestPcap.frames(TestPcap.RXE_CAPTURE).get(0);
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        frame.wrap(buffer, 0, bytes.length);
        final int split = frame.payloadOffset();
        final int tailLength = frame.icrcOffset() - split;
        final int head = icrc.crcUpTo(frame, split);
        final int tail = icrc.crcOf(buffer, split, tailLength);
        assertThat(Crc32Combine.combine(head, tail, tailLength)).isEqualTo(Icrc.read(buffer, frame.icrcOffset()));
    }

    @Test
    void shouldGiveTheCrcOfAMessageWithARewrittenIntFromTheOriginalCrcAndTheDelta()
    {
        final java.util.SplittableRandom random = new java.util.SplittableRandom(42);
        final Icrc icrc = new Icrc();
        for (int round = 0; round < 200; round++)
        {
            final int length = 8 + random.nextInt(200);
            final int bytesAfter = random.nextInt(length - 3);
            final byte[] bytes = new byte[length];
            for (int i = 0; i < length; i++)
            {
                bytes[i] = (byte)random.nextInt();
            }
            final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
            final int at = length - bytesAfter - Integer.BYTES;
            final int oldValue = buffer.getInt(at, java.nio.ByteOrder.BIG_ENDIAN);
            final int newValue = random.nextInt();
            final int before = icrc.crcOf(buffer, 0, length);
            buffer.putInt(at, newValue, java.nio.ByteOrder.BIG_ENDIAN);
            assertThat(icrc.crcOf(buffer, 0, length))
                .as("length %d, int ending %d bytes before the end", length, bytesAfter)
                .isEqualTo(before ^ Icrc.rewriteDelta(oldValue, newValue, bytesAfter));
        }
    }
}
