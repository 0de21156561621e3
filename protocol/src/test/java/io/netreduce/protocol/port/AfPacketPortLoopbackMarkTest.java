package io.netreduce.protocol.port;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * On the loopback interface every packet socket sees every frame sent there, its own included: the daemon's warm-up
 * ({@code PacketPathWarmUp}) tells its feeder's frames from its own results by the mark each socket sends with.
 */
class AfPacketPortLoopbackMarkTest
{
    private static final int FEEDER_MARK = 0x4E52_7701;
    private static final int OTHER_MARK = 0x4E52_7702;

    @Test
    void shouldReceiveOnlyTheFramesOfTheSenderThatMarksWithTheMarkAsked()
    {
        final AfPacketConfiguration small = AfPacketConfiguration.defaults("lo")
            .withRxFrameSize(2048).withRxRing(1 << 16, 4, 1).withTxRing(2048, 64);
        try (AfPacketPort receiver = AfPacketPort.open(small);
            AfPacketPort feeder = AfPacketPort.open(small);
            AfPacketPort stranger = AfPacketPort.open(small))
        {
            receiver.receiveOnlyMarked(FEEDER_MARK);
            receiver.markTransmits(OTHER_MARK);
            feeder.markTransmits(FEEDER_MARK);
            feeder.receiveNothing();
            stranger.receiveNothing();

            for (int i = 0; i < 3; i++)
            {
                send(feeder, 'F', i);
                send(receiver, 'R', i); // its own frames come back in on lo, marked with its own mark
                send(stranger, 'S', i); // unmarked, as the host's other loopback traffic
            }

            final List<String> received = new ArrayList<>();
            final long deadline = System.nanoTime() + 500_000_000L;
            while (received.size() < 3 && System.nanoTime() < deadline)
            {
                receiver.receive((buffer, offset, length, flags) ->
                    received.add((char)buffer.getByte(offset + 14) + "" + buffer.getByte(offset + 15)), 16);
            }
            // a moment more for anything that should not have come
            final long settle = System.nanoTime() + 50_000_000L;
            while (System.nanoTime() < settle)
            {
                receiver.receive((buffer, offset, length, flags) ->
                    received.add((char)buffer.getByte(offset + 14) + "" + buffer.getByte(offset + 15)), 16);
            }

            assertThat(received).containsExactly("F0", "F1", "F2");
            assertThat(receiver.counters().rxDropped()).isZero();
        }
    }

    @Test
    void shouldDeliverAFrameSentWithItsChecksumLeftToTheKernelFlaggedChecksumNotReady()
    {
        final AfPacketConfiguration small = AfPacketConfiguration.defaults("lo")
            .withRxFrameSize(2048).withRxRing(1 << 16, 4, 1).withTxRing(2048, 64);
        try (AfPacketPort receiver = AfPacketPort.open(small);
            AfPacketPort feeder = AfPacketPort.open(small.withSegmentationOffload(true)
                .withRxFrameSize(AfPacketConfiguration.MIN_RX_FRAME_SIZE).withRxRing(4096, 2, 1).withTxRing(2048, 64)))
        {
            receiver.receiveOnlyMarked(FEEDER_MARK);
            feeder.markTransmits(FEEDER_MARK);
            feeder.receiveNothing();

            final byte[] udp = IpFrames.frame(InetAddress.ofLiteral("192.0.2.1"), InetAddress.ofLiteral("192.0.2.2"), 7, false);
            final UnsafeBuffer frame = new UnsafeBuffer(udp);
            // an IPv4 UDP frame: the checksum field 6 bytes into the UDP header, after Ethernet and IPv4
            assertThat(feeder.sendUnbatched(frame, 0, udp.length, 14 + 20, 6)).isTrue();
            assertThat(feeder.sendUnbatched(frame, 0, udp.length, -1, 0)).isTrue();
            assertThat(feeder.flush()).isEqualTo(2);

            final List<Integer> flags = new ArrayList<>();
            final long deadline = System.nanoTime() + 500_000_000L;
            while (flags.size() < 2 && System.nanoTime() < deadline)
            {
                receiver.receive((buffer, offset, length, f) -> flags.add(f & FrameHandler.FLAG_CHECKSUM_NOT_READY), 16);
            }

            assertThat(flags).containsExactly(FrameHandler.FLAG_CHECKSUM_NOT_READY, 0);
        }
    }

    /**
     * A frame no host takes for its own (a locally administered destination MAC, an EtherType no one handles), so the
     * loopback interface hands it only to packet sockets.
     */
    private static void send(final AfPacketPort port, final char who, final int sequence)
    {
        final byte[] frame = new byte[64];
        frame[0] = 0x02;
        frame[5] = 0x77;
        frame[6] = 0x02;
        frame[11] = (byte)who;
        frame[12] = (byte)0x88;
        frame[13] = (byte)0xB5; // IEEE 802 local experimental EtherType
        frame[14] = (byte)who;
        frame[15] = (byte)sequence;
        assertThat(port.send(new UnsafeBuffer(frame), 0, frame.length)).isTrue();
        port.flush();
    }
}
