package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.nio.ByteBuffer;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The RoCEv2-only socket filter's logic, run by a classic BPF interpreter as the kernel runs a packet socket's filter
 * (the kernel runs it in AfPacketPortVethTest).
 */
class RoceReceiveFilterTest
{
    private static final InetAddress A = InetAddress.ofLiteral("10.0.0.1");
    private static final InetAddress B = InetAddress.ofLiteral("10.0.0.2");
    private static final InetAddress V6A = InetAddress.ofLiteral("fd00::1");
    private static final InetAddress V6B = InetAddress.ofLiteral("fd00::2");
    private static final ClassicBpfProgram FILTER = RoceReceiveFilter.program();

    @Test
    void shouldKeepWholeRoceV2FramesOverIpv4AndIpv6TaggedOrNot()
    {
        for (final boolean vlan : new boolean[] { false, true })
        {
            assertThat(accepted(IpFrames.frame(A, B, 1, vlan))).isTrue();
            assertThat(accepted(IpFrames.frame(V6A, V6B, 1, vlan))).isTrue();
        }
    }

    @Test
    void shouldReadTheUdpPortBehindIpv4Options()
    {
        final byte[] withOptions = withIpv4Options(IpFrames.frame(A, B, 1, false), 0);
        assertThat(accepted(withOptions)).isTrue();
        // The port's bytes moved by the options: a frame whose port is 4791 only at the optionless offset is refused.
        final byte[] otherPort = withIpv4Options(IpFrames.frame(A, B, 1, false), 0);
        ByteBuffer.wrap(otherPort).putShort(14 + 24 + 2, (short)5000).putShort(14 + 20 + 2, (short)4791);
        assertThat(accepted(otherPort)).isFalse();
    }

    @Test
    void shouldRefuseUdpToAnotherPortTcpAndOtherIpProtocols()
    {
        final byte[] otherPort = IpFrames.frame(A, B, 1, false);
        ByteBuffer.wrap(otherPort).putShort(14 + 20 + 2, (short)4792);
        assertThat(accepted(otherPort)).isFalse();

        final byte[] tcp = IpFrames.frame(A, B, 1, false);
        tcp[14 + 9] = 6;
        assertThat(accepted(tcp)).as("TCP with 4791 where UDP's destination port would be").isFalse();

        final byte[] v6Tcp = IpFrames.frame(V6A, V6B, 1, false);
        v6Tcp[14 + 6] = 6;
        assertThat(accepted(v6Tcp)).isFalse();

        final byte[] icmpv6 = IpFrames.frame(V6A, V6B, 1, false);
        icmpv6[14 + 6] = 58;
        assertThat(accepted(icmpv6)).isFalse();
    }

    @Test
    void shouldRefuseNonIpAndShortFrames()
    {
        final byte[] arp = new byte[60];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assertThat(accepted(arp)).isFalse();
        final byte[] truncated = java.util.Arrays.copyOf(IpFrames.frame(A, B, 1, false), 14 + 20 + 2);
        assertThat(accepted(truncated)).isFalse();
    }

    private static boolean accepted(final byte[] frame)
    {
        final int kept = ClassicBpfInterpreter.runSocketFilter(FILTER, frame);
        assertThat(kept == 0 || kept == -1).as("keeps all or nothing: " + kept).isTrue();
        return kept != 0;
    }

    /** The frame with {@code extraWords} + 1 words of IPv4 options (NOPs) after its 20-byte header. */
    private static byte[] withIpv4Options(final byte[] frame, final int extraWords)
    {
        final int options = 4 * (1 + extraWords);
        final byte[] longer = new byte[frame.length + options];
        System.arraycopy(frame, 0, longer, 0, 14 + 20);
        java.util.Arrays.fill(longer, 14 + 20, 14 + 20 + options, (byte)1);
        System.arraycopy(frame, 14 + 20, longer, 14 + 20 + options, frame.length - 14 - 20);
        longer[14] = (byte)(0x40 | (5 + 1 + extraWords));
        return longer;
    }
}
