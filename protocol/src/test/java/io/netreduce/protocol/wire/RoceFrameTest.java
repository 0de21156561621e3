package io.netreduce.protocol.wire;

import io.netreduce.protocol.writer.RoceFrameWriter;
import io.netreduce.protocol.icrc.Icrc;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

class RoceFrameTest
{
    private final RoceFrameWriter writer = new RoceFrameWriter()
        .macs(0x5254_0000_0001L, 0x5254_0000_0002L)
        .ipv4(0xC0A8_4D01, 0xC0A8_4D02)
        .destQp(0x11)
        .reth(0x1000_2000_3000L, 0x1234, 4096)
        .immediate(0xCAFE);
    private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[9000]);
    private final UnsafeBuffer payload = new UnsafeBuffer(new byte[4096]);
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    @Test
    void shouldParseEveryOpcodeItWrites()
    {
        for (int i = 0; i < payload.capacity(); i++)
        {
            payload.putByte(i, (byte)i);
        }
        for (final int opcode : Opcode.all())
        {
            final int payloadLength = !Opcode.has(opcode, Opcode.HAS_PAYLOAD) ? 0 :
                opcode == Opcode.CNP ? Opcode.CNP_RESERVED_LENGTH : 1021;
            final int length = writer.write(buffer, 0, opcode, 0xFFFFFE, true, payload, 0, payloadLength);
            assertThat(length).isEqualTo(writer.frameLength(opcode, payloadLength));
            assertThat(frame.wrap(buffer, 0, length)).as(Opcode.name(opcode)).isEqualTo(RoceFrame.OK);
            assertThat(frame.opcode()).isEqualTo(opcode);
            assertThat(frame.psn()).isEqualTo(0xFFFFFE);
            assertThat(frame.destQp()).isEqualTo(0x11);
            assertThat(frame.ackRequest()).isTrue();
            assertThat(frame.payloadLength()).isEqualTo(payloadLength);
            assertThat(frame.padCount()).isEqualTo((4 - (payloadLength & 3)) & 3);
            assertThat(frame.payloadOffset()).isEqualTo(frame.bthOffset() + Opcode.headerLength(opcode));
            assertThat(icrc.verify(frame)).isTrue();
            if (Opcode.has(opcode, Opcode.HAS_RETH))
            {
                assertThat(RethHeader.virtualAddress(buffer, frame.extensionOffset())).isEqualTo(0x1000_2000_3000L);
                assertThat(RethHeader.rkey(buffer, frame.extensionOffset())).isEqualTo(0x1234);
            }
            if (Opcode.has(opcode, Opcode.HAS_IMMDT))
            {
                assertThat(ImmDtHeader.immediate(buffer, frame.bthOffset() + Opcode.immDtOffset(opcode)))
                    .isEqualTo(0xCAFE);
            }
        }
    }

    @Test
    void shouldParseVlanTaggedIpv6Frames()
    {
        final byte[] src = new byte[16];
        final byte[] dst = new byte[16];
        src[0] = (byte)0xFD;
        dst[0] = (byte)0xFD;
        dst[15] = 2;
        writer.vlan(100).ipv6(src, dst).trafficClass(0x02, 0x12345);
        final int length = writer.write(buffer, 0, Opcode.RDMA_WRITE_ONLY, 7, false, payload, 0, 64);
        assertThat(frame.wrap(buffer, 0, length)).isEqualTo(RoceFrame.OK);
        assertThat(frame.vlanId()).isEqualTo(100);
        assertThat(frame.ipVersion()).isEqualTo(6);
        assertThat(frame.payloadLength()).isEqualTo(64);
        assertThat(icrc.verify(frame)).isTrue();
    }

    @Test
    void shouldReportTruncatedFrame()
    {
        final int length = writer.write(buffer, 0, Opcode.RDMA_WRITE_ONLY, 7, false, payload, 0, 256);
        assertThat(frame.wrap(buffer, 0, length - 10)).isEqualTo(RoceFrame.TRUNCATED);
    }

    @Test
    void shouldPassThroughNonRoceUdpAndArp()
    {
        final int length = writer.write(buffer, 0, Opcode.RDMA_WRITE_ONLY, 7, false, payload, 0, 256);
        final int udp = frame.wrap(buffer, 0, length) == RoceFrame.OK ? frame.udpOffset() : -1;
        UdpHeader.write(buffer, udp, 1234, 53, UdpHeader.length(buffer, udp));
        assertThat(frame.wrap(buffer, 0, length)).isEqualTo(RoceFrame.NOT_ROCE);
        EthernetHeader.etherType(buffer, 0, EthernetHeader.ETHER_TYPE_ARP);
        assertThat(frame.wrap(buffer, 0, 42)).isEqualTo(RoceFrame.NOT_ROCE);
    }

    @Test
    void shouldReportUnknownOpcodeWithBthFields()
    {
        final int length = writer.write(buffer, 0, Opcode.SEND_ONLY, 9, false, payload, 0, 16);
        frame.wrap(buffer, 0, length);
        BthHeader.opcode(buffer, frame.bthOffset(), 0x1F);
        assertThat(frame.wrap(buffer, 0, length)).isEqualTo(RoceFrame.UNKNOWN_OPCODE);
        assertThat(frame.psn()).isEqualTo(9);
    }

    @Test
    void shouldRejectPadCountLargerThanPayload()
    {
        final int length = writer.write(buffer, 0, Opcode.ACKNOWLEDGE, 9, false, payload, 0, 0);
        frame.wrap(buffer, 0, length);
        BthHeader.padCount(buffer, frame.bthOffset(), 3);
        assertThat(frame.wrap(buffer, 0, length)).isEqualTo(RoceFrame.MALFORMED);
    }

    @Test
    void shouldComputePsnDistanceAcrossWrap()
    {
        assertThat(BthHeader.psnDelta(2, 0xFFFFFE)).isEqualTo(4);
        assertThat(BthHeader.psnDelta(0xFFFFFE, 2)).isEqualTo(-4);
        assertThat(BthHeader.psnAdd(0xFFFFFF, 1)).isZero();
    }
}
