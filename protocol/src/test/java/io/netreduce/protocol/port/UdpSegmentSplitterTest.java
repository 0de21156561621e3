package io.netreduce.protocol.port;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.UdpHeader;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link UdpSegmentSplitter} on offload frames laid out as an AF_PACKET socket with PACKET_VNET_HDR hands them over:
 * a little-endian virtio_net_hdr in the 10 bytes in front of the frame, then one frame standing for several (the
 * first's headers with the lengths of the whole, the UDP payloads of all of them one after another). No kernel.
 */
class UdpSegmentSplitterTest
{
    private static final int HEADERS = EthernetHeader.LENGTH + Ipv4Header.MIN_LENGTH + UdpHeader.LENGTH;
    private static final int L3 = EthernetHeader.LENGTH;
    private static final int L4 = L3 + Ipv4Header.MIN_LENGTH;
    /** UDP payload of a SEND_MIDDLE with 4096 bytes: BTH, payload, ICRC. */
    private static final int SEGMENT = 12 + 4096 + 4;
    /** Where the frame starts in the test's buffer; the vnet header is in the 10 bytes before it. */
    private static final int OFFSET = 138;
    private static final int GSO_TCPV4 = 1;

    private final PortCounters counters = new PortCounters();
    private final List<byte[]> delivered = new ArrayList<>();
    private final List<Integer> flags = new ArrayList<>();
    private final UdpSegmentSplitter splitter = new UdpSegmentSplitter(counters).handler((buffer, offset, length, f) ->
    {
        final byte[] frame = new byte[length];
        buffer.getBytes(offset, frame);
        delivered.add(frame);
        flags.add(f);
    });
    private final RoceFrameWriter writer = new RoceFrameWriter()
        .macs(0x0200_0000_00A0L, 0x0200_0000_0101L)
        .ipv4(0x0A4D_0001, 0x0A4D_0101)
        .udpSrcPort(0xC001)
        .destQp(0x101);
    private final Random random = new Random(5);

    @Test
    void shouldHandOverExactlyTheFramesAnOffloadFrameStandsFor()
    {
        final List<byte[]> frames = new ArrayList<>();
        for (int psn = 0; psn < 6; psn++)
        {
            frames.add(write(psn == 5 ? Opcode.SEND_LAST : Opcode.SEND_MIDDLE, psn, psn == 5 ? 1000 : 4096));
        }
        final UnsafeBuffer buffer = offloadFrame(frames, VirtioNetHeader.GSO_UDP_L4, SEGMENT);

        splitter.onFrame(buffer, OFFSET, gsoLength(frames), FrameHandler.FLAG_CHECKSUM_NOT_READY);

        assertThat(delivered).containsExactlyElementsOf(frames);
        assertThat(flags).as("checksums are 0, none pending").containsOnly(0);
        assertValidRoce(delivered);
        // The ring counted the offload frame as one of its own length; the splitter adds the rest.
        assertThat(counters.get(PortCounters.RX_GSO_FRAMES)).isEqualTo(1);
        assertThat(counters.rxFrames()).isEqualTo(frames.size() - 1);
        assertThat(counters.rxBytes()).isEqualTo((long)(frames.size() - 1) * HEADERS);
        assertThat(counters.get(PortCounters.RX_GSO_UNSUPPORTED)).isZero();
    }

    @Test
    void shouldSplitSegmentsOfEqualLengthWithoutAShortLastOne()
    {
        final List<byte[]> frames = new ArrayList<>();
        for (int psn = 0; psn < 15; psn++)
        {
            frames.add(write(Opcode.SEND_MIDDLE, psn, 4096));
        }
        final UnsafeBuffer buffer = offloadFrame(frames, VirtioNetHeader.GSO_UDP_L4, SEGMENT);

        splitter.onFrame(buffer, OFFSET, gsoLength(frames), 0);

        assertThat(delivered).containsExactlyElementsOf(frames);
        assertValidRoce(delivered);
    }

    @Test
    void shouldNumberSegmentsOnPastTheEndOfTheIdentificationSpace()
    {
        final List<byte[]> frames = new ArrayList<>();
        for (int k = 0; k < 3; k++)
        {
            frames.add(withIdentification(write(Opcode.SEND_MIDDLE, k, 4096), 0xFFFE + k));
        }

        splitter.onFrame(offloadFrame(frames, VirtioNetHeader.GSO_UDP_L4, SEGMENT), OFFSET, gsoLength(frames), 0);

        assertThat(delivered).containsExactlyElementsOf(frames);
        assertValidRoce(delivered);
    }

    @Test
    void shouldSplitAnOffloadFrameMarkedWithEcn()
    {
        final List<byte[]> frames = List.of(write(Opcode.SEND_MIDDLE, 0, 4096), write(Opcode.SEND_MIDDLE, 1, 4096));

        splitter.onFrame(offloadFrame(frames, VirtioNetHeader.GSO_UDP_L4 | VirtioNetHeader.GSO_ECN, SEGMENT), OFFSET,
            gsoLength(frames), 0);

        assertThat(delivered).containsExactlyElementsOf(frames);
    }

    @Test
    void shouldCountATcpOffloadFrameAsUnsupportedAndDeliverNothing()
    {
        final List<byte[]> frames = List.of(write(Opcode.SEND_MIDDLE, 0, 4096), write(Opcode.SEND_MIDDLE, 1, 4096));

        splitter.onFrame(offloadFrame(frames, GSO_TCPV4, SEGMENT), OFFSET, gsoLength(frames), 0);

        assertThat(delivered).isEmpty();
        assertThat(counters.get(PortCounters.RX_GSO_UNSUPPORTED)).isEqualTo(1);
        assertThat(counters.get(PortCounters.RX_GSO_FRAMES)).isZero();
        assertThat(counters.rxFrames()).isZero();
    }

    @Test
    void shouldCountAnIpv6UdpOffloadFrameAsUnsupportedAndDeliverNothing()
    {
        final RoceFrameWriter v6 = new RoceFrameWriter().macs(0x0200_0000_00A0L, 0x0200_0000_0101L)
            .ipv6(InetAddress.ofLiteral("fd00::1").getAddress(), InetAddress.ofLiteral("fd00::2").getAddress());
        final UnsafeBuffer scratch = new UnsafeBuffer(new byte[9000]);
        final int length = v6.write(scratch, 0, Opcode.SEND_MIDDLE, 0, false, new UnsafeBuffer(new byte[4096]), 0, 4096);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[OFFSET + length]);
        buffer.putBytes(OFFSET, scratch, 0, length);
        vnetHeader(buffer, VirtioNetHeader.GSO_UDP_L4, 1000, EthernetHeader.LENGTH + 40);

        splitter.onFrame(buffer, OFFSET, length, 0);

        assertThat(delivered).isEmpty();
        assertThat(counters.get(PortCounters.RX_GSO_UNSUPPORTED)).isEqualTo(1);
    }

    @Test
    void shouldPassAFrameWithoutOffloadThroughUnchanged()
    {
        final byte[] frame = write(Opcode.SEND_MIDDLE, 0, 4096);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[OFFSET + frame.length]);
        buffer.putBytes(OFFSET, frame);
        vnetHeader(buffer, VirtioNetHeader.GSO_NONE, 0, 0);
        final int[] seen = new int[3];
        splitter.handler((b, offset, length, f) ->
        {
            assertThat(b).isSameAs(buffer);
            seen[0] = offset;
            seen[1] = length;
            seen[2] = f;
        });

        splitter.onFrame(buffer, OFFSET, frame.length, FrameHandler.FLAG_CHECKSUM_NOT_READY);

        assertThat(seen).containsExactly(OFFSET, frame.length, FrameHandler.FLAG_CHECKSUM_NOT_READY);
        final byte[] after = new byte[frame.length];
        buffer.getBytes(OFFSET, after);
        assertThat(after).isEqualTo(frame);
        assertThat(counters.get(PortCounters.RX_GSO_FRAMES)).isZero();
        assertThat(counters.rxFrames()).isZero();
    }

    private byte[] write(final int opcode, final int psn, final int payloadLength)
    {
        final byte[] bytes = new byte[payloadLength];
        random.nextBytes(bytes);
        final UnsafeBuffer scratch = new UnsafeBuffer(new byte[9000]);
        final int length = writer.write(scratch, 0, opcode, psn, false, new UnsafeBuffer(bytes), 0, payloadLength);
        final byte[] frame = new byte[length];
        scratch.getBytes(0, frame);
        assertThat(UdpHeader.checksum(scratch, L4)).as("RoCEv2 frames go with UDP checksum 0").isZero();
        return frame;
    }

    /**
     * The frame with another IPv4 identification, its IPv4 checksum and ICRC (which covers the identification)
     * made right for it.
     */
    private static byte[] withIdentification(final byte[] frame, final int identification)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(frame);
        buffer.putShort(L3 + Ipv4Header.IDENTIFICATION_OFFSET, (short)identification, ByteOrder.BIG_ENDIAN);
        Ipv4Header.updateChecksum(buffer, L3);
        final RoceFrame roce = new RoceFrame();
        assertThat(roce.wrap(buffer, 0, frame.length)).isEqualTo(RoceFrame.OK);
        new Icrc().write(buffer, roce);
        return frame;
    }

    private static int gsoLength(final List<byte[]> frames)
    {
        return HEADERS + frames.stream().mapToInt(frame -> frame.length - HEADERS).sum();
    }

    /**
     * The offload frame for {@code frames} at {@link #OFFSET}, as a sender's kernel would hand it over: the first
     * frame's headers, the IPv4 total length, IPv4 checksum and UDP length of the whole, the UDP checksum field
     * holding the pseudo-header sum (checksum left for offload), then every frame's UDP payload in turn.
     */
    private static UnsafeBuffer offloadFrame(final List<byte[]> frames, final int gsoType, final int gsoSize)
    {
        final int length = gsoLength(frames);
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[OFFSET + length + 64]);
        buffer.setMemory(0, buffer.capacity(), (byte)0x5A);
        buffer.putBytes(OFFSET, frames.getFirst(), 0, HEADERS);
        int at = OFFSET + HEADERS;
        for (final byte[] frame : frames)
        {
            buffer.putBytes(at, frame, HEADERS, frame.length - HEADERS);
            at += frame.length - HEADERS;
        }
        Ipv4Header.totalLength(buffer, OFFSET + L3, length - L3);
        Ipv4Header.updateChecksum(buffer, OFFSET + L3);
        UdpHeader.length(buffer, OFFSET + L4, length - L4);
        UdpHeader.checksum(buffer, OFFSET + L4, 0x1234);
        vnetHeader(buffer, gsoType, gsoSize, L4);
        return buffer;
    }

    /**
     * virtio_net_hdr in front of the frame at {@link #OFFSET}: NEEDS_CSUM, {@code gsoType}, hdr_len 42,
     * gso_size, csum_start, csum_offset 6 (the UDP checksum).
     */
    private static void vnetHeader(final UnsafeBuffer buffer, final int gsoType, final int gsoSize, final int csumStart)
    {
        final int vnet = OFFSET - VirtioNetHeader.LENGTH;
        buffer.putByte(vnet, (byte)VirtioNetHeader.F_NEEDS_CSUM);
        buffer.putByte(vnet + 1, (byte)gsoType);
        buffer.putShort(vnet + 2, (short)HEADERS, ByteOrder.LITTLE_ENDIAN);
        buffer.putShort(vnet + 4, (short)gsoSize, ByteOrder.LITTLE_ENDIAN);
        buffer.putShort(vnet + 6, (short)csumStart, ByteOrder.LITTLE_ENDIAN);
        buffer.putShort(vnet + 8, (short)UdpHeader.CHECKSUM_OFFSET, ByteOrder.LITTLE_ENDIAN);
    }

    private static void assertValidRoce(final List<byte[]> frames)
    {
        final RoceFrame roce = new RoceFrame();
        final Icrc icrc = new Icrc();
        for (final byte[] frame : frames)
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(frame);
            assertThat(roce.wrap(buffer, 0, frame.length)).isEqualTo(RoceFrame.OK);
            assertThat(icrc.verify(roce)).as("ICRC").isTrue();
            assertThat(Ipv4Header.computeChecksum(buffer, L3)).as("IPv4 checksum").isZero();
            assertThat(UdpHeader.checksum(buffer, L4)).isZero();
        }
    }
}
