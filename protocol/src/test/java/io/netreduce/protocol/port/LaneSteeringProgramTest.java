package io.netreduce.protocol.port;

import org.junit.jupiter.api.Test;

import java.net.InetAddress;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The lane classifier's logic, run by a classic BPF interpreter (the kernel runs it in AfPacketFanoutVethTest).
 */
class LaneSteeringProgramTest
{
    private static final InetAddress A = InetAddress.ofLiteral("10.0.0.1");
    private static final InetAddress B = InetAddress.ofLiteral("10.0.0.2");
    private static final InetAddress C = InetAddress.ofLiteral("10.0.0.3");
    private static final InetAddress V6A = InetAddress.ofLiteral("fd00::1");
    private static final InetAddress V6B = InetAddress.ofLiteral("fd00::2");
    private static final InetAddress V6C = InetAddress.ofLiteral("fd00:0:0:1::2");

    private final ClassicBpfProgram program = new LaneSteeringProgram()
        .route(A, B, 1)
        .route(B, C, 2)
        .route(V6A, V6B, 3)
        .build();

    @Test
    void shouldSendAListedIpv4PairToItsLane()
    {
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(A, B, 1, false), 99)).isEqualTo(1);
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(B, C, 1, false), 99)).isEqualTo(2);
    }

    @Test
    void shouldSendAPairToItsLaneOnlyInItsOwnDirection()
    {
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(B, A, 1, false), 99)).isEqualTo(99);
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(A, C, 1, false), 98)).isEqualTo(98);
    }

    @Test
    void shouldSendAListedIpv6PairToItsLaneAndNotOneThatDiffersInALaterWord()
    {
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(V6A, V6B, 1, false), 99)).isEqualTo(3);
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(V6A, V6C, 1, false), 99)).isEqualTo(99);
    }

    @Test
    void shouldSteerAFrameWhoseVlanTagTheKernelTookOff()
    {
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(A, B, 1, true), 99)).isEqualTo(1);
        assertThat(ClassicBpfInterpreter.run(program, IpFrames.frame(V6A, V6B, 1, true), 99)).isEqualTo(3);
    }

    @Test
    void shouldSpreadNonIpFramesAndShortFramesByFlowHash()
    {
        final byte[] arp = new byte[60];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assertThat(ClassicBpfInterpreter.run(program, arp, 7)).isEqualTo(7);
        // A frame cut short inside the IP header: the kernel's out-of-bounds load ends the program with 0.
        final byte[] cut = java.util.Arrays.copyOf(IpFrames.frame(A, B, 1, false), 28);
        assertThat(ClassicBpfInterpreter.run(program, cut, 7)).isZero();
    }

    @Test
    void shouldSteerByFlowHashWhenNoPairIsListed()
    {
        final ClassicBpfProgram empty = new LaneSteeringProgram().build();
        assertThat(ClassicBpfInterpreter.run(empty, IpFrames.frame(A, B, 1, false), 5)).isEqualTo(5);
        assertThat(ClassicBpfInterpreter.run(empty, IpFrames.frame(V6A, V6B, 1, false), 6)).isEqualTo(6);
    }

    @Test
    void shouldEmitTheInstructionCountItAnnounces()
    {
        final LaneSteeringProgram steering = new LaneSteeringProgram().route(A, B, 0).route(V6A, V6B, 1);
        assertThat(steering.build().length()).isEqualTo(steering.instructions());
    }

    @Test
    void shouldRefuseMorePairsThanTheKernelsInstructionLimit()
    {
        final LaneSteeringProgram steering = new LaneSteeringProgram();
        for (int i = 0; i < 900; i++)
        {
            steering.route(InetAddress.ofLiteral("10.1." + (i / 250) + "." + (i % 250)), B, 0);
        }
        assertThatThrownBy(steering::build).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("900 IPv4").hasMessageContaining("4096");
    }

    @Test
    void shouldRefuseARouteMixingAddressFamilies()
    {
        assertThatThrownBy(() -> new LaneSteeringProgram().route(A, V6B, 0))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mixes IPv4 and IPv6");
    }
}
