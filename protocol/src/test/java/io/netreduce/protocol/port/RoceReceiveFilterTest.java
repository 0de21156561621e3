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

    @Test
    void shouldKeepOnlyFramesToTheEndpointsQueuePairsOverIpv4AndIpv6TaggedOrNot()
    {
        final ClassicBpfProgram filter = RoceReceiveFilter.forQueuePairs(new int[] {0x113, 0x111, 0x112, 0x2000}, 4);
        for (final boolean vlan : new boolean[] {false, true})
        {
            for (final InetAddress[] pair : new InetAddress[][] {{A, B}, {V6A, V6B}})
            {
                for (final int qpn : new int[] {0x111, 0x112, 0x113, 0x2000})
                {
                    assertThat(accepted(filter, IpFrames.frameToQp(pair[0], pair[1], 1, vlan, 0, qpn)))
                        .as("QP 0x%x %s vlan %s", qpn, pair[0], vlan).isTrue();
                }
                for (final int qpn : new int[] {0x110, 0x114, 0x1FFF, 0x2001, 0x11, 0xFF_FFFF})
                {
                    assertThat(accepted(filter, IpFrames.frameToQp(pair[0], pair[1], 1, vlan, 0, qpn)))
                        .as("QP 0x%x %s vlan %s", qpn, pair[0], vlan).isFalse();
                }
            }
        }
    }

    @Test
    void shouldReadTheDestinationQpBehindIpv4OptionsAndIgnoreTheReservedByte()
    {
        final ClassicBpfProgram filter = RoceReceiveFilter.forQueuePairs(new int[] {0x42}, 1);
        assertThat(accepted(filter, withIpv4Options(IpFrames.frameToQp(A, B, 1, false, 0, 0x42), 1))).isTrue();
        final byte[] shifted = withIpv4Options(IpFrames.frameToQp(A, B, 1, false, 0, 0x43), 1);
        ByteBuffer.wrap(shifted).putInt(14 + 20 + 8 + 4, 0x42); // where the QP would be without the options
        assertThat(accepted(filter, shifted)).isFalse();
        assertThat(accepted(filter, IpFrames.frameToQp(A, B, 1, false, 0xFF, 0x42))).isTrue();
    }

    @Test
    void shouldStillRefuseWhatIsNotRoceV2AndEverythingWithoutQueuePairs()
    {
        final ClassicBpfProgram filter = RoceReceiveFilter.forQueuePairs(new int[] {0x42}, 1);
        final byte[] otherPort = IpFrames.frameToQp(A, B, 1, false, 0, 0x42);
        ByteBuffer.wrap(otherPort).putShort(14 + 20 + 2, (short)4792);
        assertThat(accepted(filter, otherPort)).isFalse();
        final byte[] tcp = IpFrames.frameToQp(A, B, 1, false, 0, 0x42);
        tcp[14 + 9] = 6;
        assertThat(accepted(filter, tcp)).isFalse();
        final byte[] arp = new byte[60];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assertThat(accepted(filter, arp)).isFalse();
        final byte[] cut = java.util.Arrays.copyOf(IpFrames.frameToQp(A, B, 1, false, 0, 0x42), 14 + 20 + 8 + 6);
        assertThat(accepted(filter, cut)).as("cut inside the QP").isFalse();

        final ClassicBpfProgram none = RoceReceiveFilter.forQueuePairs(new int[0], 0);
        assertThat(accepted(none, IpFrames.frameToQp(A, B, 1, false, 0, 0x42))).isFalse();
    }

    @Test
    void shouldMergeConsecutiveNumbersIntoRangesAndGiveUpPastTheLimit()
    {
        final int[] consecutive = new int[3000];
        for (int i = 0; i < consecutive.length; i++)
        {
            consecutive[i] = 0x11 + i;
        }
        final ClassicBpfProgram one = RoceReceiveFilter.forQueuePairs(consecutive, consecutive.length);
        assertThat(one.length()).as("one range").isEqualTo(RoceReceiveFilter.forQueuePairs(new int[] {7}, 1).length());
        assertThat(accepted(one, IpFrames.frameToQp(A, B, 1, false, 0, 0x11 + 2999))).isTrue();
        assertThat(accepted(one, IpFrames.frameToQp(A, B, 1, false, 0, 0x11 + 3000))).isFalse();

        final int[] scattered = new int[RoceReceiveFilter.MAX_QP_RANGES];
        for (int i = 0; i < scattered.length; i++)
        {
            scattered[i] = 0x100 + 2 * i;
        }
        final ClassicBpfProgram widest = RoceReceiveFilter.forQueuePairs(scattered, scattered.length);
        assertThat(widest.length()).isLessThanOrEqualTo(ClassicBpfProgram.MAX_INSTRUCTIONS);
        assertThat(accepted(widest, IpFrames.frameToQp(A, B, 1, false, 0, 0x100 + 2 * 1023))).isTrue();
        assertThat(accepted(widest, IpFrames.frameToQp(A, B, 1, false, 0, 0x100 + 2 * 1023 + 1))).isFalse();
        assertThat(accepted(widest, IpFrames.frameToQp(A, B, 1, false, 0, 0x101))).isFalse();

        final int[] tooMany = java.util.Arrays.copyOf(scattered, scattered.length + 1);
        tooMany[scattered.length] = 0x100 + 2 * scattered.length;
        assertThat(RoceReceiveFilter.forQueuePairs(tooMany, tooMany.length)).isNull();
    }

    private static boolean accepted(final byte[] frame)
    {
        return accepted(FILTER, frame);
    }

    private static boolean accepted(final ClassicBpfProgram filter, final byte[] frame)
    {
        final int kept = ClassicBpfInterpreter.runSocketFilter(filter, frame);
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
