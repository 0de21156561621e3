package io.netreduce.protocol.wire;

import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.writer.RoceFrameWriter;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The ECN field of IPv4 and IPv6 headers: read, written with the IPv4 checksum updated incrementally (equal to a
 * full recomputation), and invisible to the RoCEv2 ICRC, which masks the TOS / traffic class: a frame marked CE
 * after its ICRC was computed still verifies, so the appliance may mark results without a new ICRC.
 */
class EcnTest
{
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();

    @Test
    void shouldUpdateTheIpv4ChecksumAsAFullRecomputationWould()
    {
        final Random random = new Random(3168);
        final UnsafeBuffer header = new UnsafeBuffer(new byte[Ipv4Header.MIN_LENGTH]);
        for (int i = 0; i < 20_000; i++)
        {
            Ipv4Header.write(header, 0, random.nextInt(256), 20 + random.nextInt(9000), random.nextInt(65536),
                random.nextInt(256), Ipv4Header.PROTOCOL_UDP, random.nextInt(), random.nextInt());
            final int dscp = Ipv4Header.tos(header, 0) & 0xFC;
            final int codepoint = random.nextInt(4);
            Ecn.set(header, 0, codepoint);
            assertThat(Ecn.of(header, 0)).isEqualTo(codepoint);
            assertThat(Ipv4Header.tos(header, 0) & 0xFC).as("DSCP kept").isEqualTo(dscp);
            final int incremental = Ipv4Header.checksum(header, 0);
            Ipv4Header.updateChecksum(header, 0);
            assertThat(incremental).as("case %d", i).isEqualTo(Ipv4Header.checksum(header, 0));
            assertThat(Ipv4Header.computeChecksum(header, 0)).isZero();
        }
    }

    @Test
    void shouldReadAndWriteTheIpv6TrafficClassEcnBitsOnly()
    {
        final UnsafeBuffer header = new UnsafeBuffer(new byte[Ipv6Header.LENGTH]);
        Ipv6Header.write(header, 0, 0xB8 | Ecn.ECT_1, 0xABCDE, 100, Ipv4Header.PROTOCOL_UDP, 64, new byte[16],
            new byte[16]);
        assertThat(Ecn.of(header, 0)).isEqualTo(Ecn.ECT_1);
        Ecn.markCe(header, 0);
        assertThat(Ecn.of(header, 0)).isEqualTo(Ecn.CE);
        assertThat(Ipv6Header.trafficClass(header, 0)).isEqualTo(0xB8 | Ecn.CE);
        assertThat(Ipv6Header.flowLabel(header, 0)).isEqualTo(0xABCDE);
        assertThat(Ipv6Header.version(header, 0)).isEqualTo(6);
        Ecn.set(header, 0, Ecn.NOT_ECT);
        assertThat(Ipv6Header.trafficClass(header, 0)).isEqualTo(0xB8);
    }

    @ParameterizedTest(name = "ipv6={0}")
    @ValueSource(booleans = { false, true })
    void shouldLeaveTheIcrcValidWhenARoceFrameIsMarked(final boolean ipv6)
    {
        final RoceFrameWriter writer = new RoceFrameWriter().macs(0x020000000001L, 0x020000000002L).destQp(0x11)
            .trafficClass(Ecn.ECT_0, 0);
        if (ipv6)
        {
            final byte[] a = new byte[16];
            final byte[] b = new byte[16];
            a[15] = 1;
            b[15] = 2;
            writer.ipv6(a, b);
        }
        else
        {
            writer.ipv4(0x0A4D0001, 0x0A4D0002);
        }
        final UnsafeBuffer payload = new UnsafeBuffer(new byte[1024]);
        for (int i = 0; i < 1024; i++)
        {
            payload.putByte(i, (byte)(i * 7));
        }
        final UnsafeBuffer out = new UnsafeBuffer(new byte[2048]);
        for (final int opcode : List.of(Opcode.RDMA_WRITE_MIDDLE, Opcode.ACKNOWLEDGE))
        {
            if (opcode == Opcode.ACKNOWLEDGE)
            {
                writer.aeth(0, 5);
            }
            final int length = writer.write(out, 0, opcode, 77, false, payload, 0,
                opcode == Opcode.ACKNOWLEDGE ? 0 : 1024);
            assertThat(frame.wrap(out, 0, length)).isEqualTo(RoceFrame.OK);
            assertThat(frame.ecn()).isEqualTo(Ecn.ECT_0);
            assertThat(icrc.verify(frame)).isTrue();
            Ecn.markCe(out, frame.l3Offset());
            assertThat(frame.wrap(out, 0, length)).isEqualTo(RoceFrame.OK);
            assertThat(frame.ecn()).isEqualTo(Ecn.CE);
            assertThat(icrc.verify(frame)).as("ICRC masks the ECN field").isTrue();
            if (!ipv6)
            {
                assertThat(Ipv4Header.computeChecksum(out, frame.l3Offset())).isZero();
            }
        }
    }

    @Test
    void shouldNameTheCodepoints()
    {
        assertThat(Ecn.name(Ecn.NOT_ECT)).isEqualTo("Not-ECT");
        assertThat(Ecn.name(Ecn.ECT_1)).isEqualTo("ECT(1)");
        assertThat(Ecn.name(Ecn.ECT_0)).isEqualTo("ECT(0)");
        assertThat(Ecn.name(Ecn.CE)).isEqualTo("CE");
        assertThat(Ecn.isCapable(Ecn.NOT_ECT)).isFalse();
        assertThat(Ecn.isCapable(Ecn.ECT_1)).isTrue();
    }
}
