package io.netreduce.dataplane.capture;

import io.netreduce.dataplane.agent.DataplaneAgent;
import io.netreduce.dataplane.agent.DataplaneContext;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapRecord;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.support.DataplaneHarness;
import io.netreduce.dataplane.support.Rings;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.TestPcap;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.concurrent.MessageHandler;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Capture taps on the real packet path over memory ports: what the tap copies is what arrived (or what was
 * dropped, with why), a full ring costs a counted lost frame and never a stalled dataplane, and the packet path
 * allocates nothing with or without a tap.
 */
class CaptureTapTest
{
    private static final RingDefinition RING_7 = Rings.ring(7, 4, ElementType.FP32, 2, 3, 128);
    private static final List<String> PORT_NAMES = List.of("test0");

    @Test
    void shouldCaptureEveryFrameReceivedOnAPortByteIdenticalAndInOrder(@TempDir final Path dir) throws Exception
    {
        final List<byte[]> input = new ArrayList<>(TestPcap.frames(TestPcap.RXE_CAPTURE));
        final RingWorker worker = RingWorker.of(RING_7, 1, 1000);
        input.addAll(worker.message(0, new byte[worker.gradientBytes()]));
        input.add(new byte[]{ 1, 2, 3 });
        final byte[] partial = udp();
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            final CaptureTap tap = CaptureTap.forPort(1, 0, CaptureTap.DEFAULT_RING_CAPACITY);
            harness.await(harness.proxy().startCapture(tap));

            input.forEach(harness.port(0)::inject);
            harness.port(0).inject(partial, FrameHandler.FLAG_CHECKSUM_NOT_READY);
            final List<byte[]> sent = harness.runAndDrain(0);
            assertThat(harness.await(harness.proxy().stopCapture(1))).isSameAs(tap);
            harness.port(0).inject(partial);
            harness.runUntilIdle();

            // The last frame left with its checksum completed; the capture shows it as it arrived.
            assertThat(sent.getLast()).isNotEqualTo(partial);
            final List<byte[]> expected = new ArrayList<>(input);
            expected.add(partial);
            final Path file = dir.resolve("port.pcap");
            assertThat(writeAll(tap, file, 0)).isEqualTo(expected.size());
            assertThat(readFrames(file)).usingElementComparator(java.util.Arrays::compare)
                .containsExactlyElementsOf(expected);
            assertThat(Files.exists(CaptureFileWriter.reasonsFileOf(file))).isFalse();
            assertThat(tap.captured()).isEqualTo(expected.size());
            assertThat(tap.lost()).isZero();
            assertThat(harness.counter(DataplaneCounter.CAPTURED)).isEqualTo(expected.size());
        }
    }

    @Test
    void shouldCaptureDroppedFramesWithTheirReasonsAndNothingElse(@TempDir final Path dir) throws Exception
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.install(RING_7);
            final CaptureTap tap = CaptureTap.forDrops(2, CaptureTap.ANY_PORT, CaptureTap.DEFAULT_RING_CAPACITY);
            harness.await(harness.proxy().startCapture(tap));

            final RingWorker worker = RingWorker.of(RING_7, 0, 40);
            final List<byte[]> first = worker.message(0, new byte[worker.gradientBytes()]);
            final List<byte[]> second = worker.message(1, new byte[worker.gradientBytes()]);
            final byte[] corrupt = first.getFirst().clone();
            corrupt[corrupt.length - 20] ^= 1;
            final RingWorker big = RingWorker.of(Rings.ring(7, 4, ElementType.FP32, 2, 3, 256), 0, 40);
            final byte[] wrongSize = big.message(0, new byte[big.gradientBytes()]).getFirst();

            final List<byte[]> dropped = List.of(first.get(1), corrupt, wrongSize, second.get(1));
            harness.process(first.get(1));          // middle packet of a connection never seen
            harness.process(udp());                 // passes through: not captured
            harness.process(corrupt);
            harness.process(wrongSize);
            harness.process(first.getFirst());      // accepted: not captured
            harness.process(second.get(1));         // message 1's first packet was never seen
            harness.await(harness.proxy().stopCapture(2));

            final Path file = dir.resolve("drops.pcap");
            assertThat(writeAll(tap, file, 0)).isEqualTo(dropped.size());
            assertThat(readFrames(file)).usingElementComparator(java.util.Arrays::compare)
                .containsExactlyElementsOf(dropped);
            assertThat(Files.readAllLines(CaptureFileWriter.reasonsFileOf(file))).containsExactly(
                CaptureFileWriter.REASONS_HEADER,
                "1\ttest0\tunknown_connection",
                "2\ttest0\tbad_icrc",
                "3\ttest0\twrong_size",
                "4\ttest0\tfirst_packet_lost");
        }
    }

    @Test
    void shouldCountFramesLostToAFullRingWithoutHoldingUpTheDataplane(@TempDir final Path dir) throws Exception
    {
        final SplittableRandom random = new SplittableRandom(42);
        final List<byte[]> input = new ArrayList<>();
        for (int i = 0; i < 200; i++)
        {
            final byte[] frame = new byte[60 + random.nextInt(140)];
            random.nextBytes(frame);
            frame[12] = 0x08;
            frame[13] = 0x06;
            input.add(frame);
        }
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            // 4 KiB of ring holds a few dozen of these; nobody drains it while they arrive.
            final CaptureTap tap = CaptureTap.forPort(3, 0, 4096);
            harness.await(harness.proxy().startCapture(tap));
            input.forEach(harness.port(0)::inject);

            final List<byte[]> sent = harness.runAndDrain(0);

            assertThat(sent).hasSize(input.size());
            assertThat(tap.lost()).isPositive();
            assertThat(tap.captured() + tap.lost()).isEqualTo(input.size());
            assertThat(harness.counter(DataplaneCounter.CAPTURE_LOST)).isEqualTo(tap.lost());
            assertThat(harness.counter(DataplaneCounter.CAPTURED)).isEqualTo(tap.captured());

            // What did fit is whole frames in arrival order (a short one can fit where a long one did not);
            // after a drain the tap captures again.
            final Path file = dir.resolve("full.pcap");
            final CaptureFileWriter writer = CaptureFileWriter.create(file, tap, PORT_NAMES, 0);
            writer.drainAll(tap);
            final long fitted = tap.captured();
            harness.port(0).inject(input.getFirst());
            harness.runUntilIdle();
            harness.await(harness.proxy().stopCapture(3));
            writer.drainAll(tap);
            writer.close();
            final List<byte[]> frames = readFrames(file);
            assertThat(frames).hasSize((int)fitted + 1);
            assertThat(frames.getLast()).isEqualTo(input.getFirst());
            int next = 0;
            for (final byte[] frame : frames.subList(0, (int)fitted))
            {
                while (next < input.size() && !java.util.Arrays.equals(input.get(next), frame))
                {
                    next++;
                }
                assertThat(next).as("captured frames are input frames in order").isLessThan(input.size());
                next++;
            }
        }
    }

    @Test
    void shouldStopWritingAfterMaxPackets(@TempDir final Path dir) throws Exception
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            final CaptureTap tap = CaptureTap.forPort(4, 0, CaptureTap.DEFAULT_RING_CAPACITY);
            harness.await(harness.proxy().startCapture(tap));
            final List<byte[]> input = new ArrayList<>();
            for (int i = 0; i < 10; i++)
            {
                final byte[] frame = udp();
                frame[frame.length - 1] = (byte)i;
                input.add(frame);
                harness.port(0).inject(frame);
            }
            harness.runUntilIdle();
            final Path file = dir.resolve("max.pcap");
            final CaptureFileWriter writer = CaptureFileWriter.create(file, tap, PORT_NAMES, 3);
            assertThat(writer.drain(tap, 100)).isEqualTo(10);
            writer.close();
            assertThat(writer.limitReached()).isTrue();
            assertThat(writer.written()).isEqualTo(3);
            assertThat(writer.ignored()).isEqualTo(7);
            assertThat(readFrames(file)).usingElementComparator(java.util.Arrays::compare)
                .containsExactlyElementsOf(input.subList(0, 3));
        }
    }

    @Test
    void shouldRefuseASecondTapOnTheSamePortOrOnDropsAndAnUnknownPort()
    {
        try (DataplaneHarness harness = new DataplaneHarness())
        {
            harness.await(harness.proxy().startCapture(CaptureTap.forPort(1, 0, 4096)));
            harness.await(harness.proxy().startCapture(CaptureTap.forDrops(2, CaptureTap.ANY_PORT, 4096)));

            assertThatThrownBy(() -> harness.await(harness.proxy().startCapture(CaptureTap.forPort(3, 0, 4096))))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("port test0 is already captured by capture 1");
            assertThatThrownBy(() -> harness.await(harness.proxy().startCapture(CaptureTap.forDrops(4, 0, 4096))))
                .hasMessage("drops are already captured by capture 2");
            assertThatThrownBy(() -> harness.await(harness.proxy().startCapture(CaptureTap.forPort(5, 1, 4096))))
                .hasMessage("capture 5: no port 1 (1 ports)");
            assertThatThrownBy(() -> harness.await(harness.proxy().stopCapture(9)))
                .hasMessage("no capture 9 is installed");

            harness.await(harness.proxy().stopCapture(1));
            harness.await(harness.proxy().startCapture(CaptureTap.forPort(3, 0, 4096)));
        }
    }

    @Test
    void shouldNotAllocateOnThePacketPathWithOrWithoutACapture()
    {
        final MemoryPort port = new MemoryPort("p0");
        final MemoryPort peer = new MemoryPort("peer");
        MemoryPort.wire(port, peer);
        final DataplaneAgent agent = new DataplaneAgent(new DataplaneContext().ports(List.<PacketPort>of(port)));
        try
        {
            runCommand(agent, agent.proxy().installRing(RING_7));
            final RingWorker worker = RingWorker.of(RING_7, 1, 1000);
            final byte[] corrupt = worker.message(0, new byte[worker.gradientBytes()]).getFirst().clone();
            corrupt[corrupt.length - 20] ^= 1;
            final UnsafeBuffer dropped = new UnsafeBuffer(corrupt);
            final UnsafeBuffer passed = new UnsafeBuffer(udp());
            final FrameHandler discard = (buffer, offset, length, flags) -> { };
            final MessageHandler drain = (type, buffer, index, length) -> { };
            final CaptureTap portTap = CaptureTap.forPort(1, 0, 1 << 16);
            final CaptureTap dropTap = CaptureTap.forDrops(2, CaptureTap.ANY_PORT, 1 << 16);
            final Runnable cycle = () ->
            {
                for (int i = 0; i < 8; i++)
                {
                    port.inject(passed, 0, passed.capacity(), 0);
                    port.inject(dropped, 0, dropped.capacity(), 0);
                }
                agent.doWork();
                peer.receive(discard, 64);
                portTap.read(drain, 64);
                dropTap.read(drain, 64);
            };

            assertThat(windowsUntilAllocationFree(cycle)).as("no tap").isPositive();
            runCommand(agent, agent.proxy().startCapture(portTap));
            runCommand(agent, agent.proxy().startCapture(dropTap));
            assertThat(windowsUntilAllocationFree(cycle)).as("port and drop taps").isPositive();
            assertThat(portTap.captured()).isPositive();
            assertThat(dropTap.captured()).isPositive();
            assertThat(portTap.lost() + dropTap.lost()).isZero();
        }
        finally
        {
            agent.onClose();
            port.close();
            peer.close();
        }
    }

    private static void runCommand(final DataplaneAgent agent, final java.util.concurrent.CompletableFuture<?> reply)
    {
        while (!reply.isDone())
        {
            agent.doWork();
        }
        assertThat(reply).isCompleted();
    }

    private static int windowsUntilAllocationFree(final Runnable cycle)
    {
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        for (int window = 1; window <= 30; window++)
        {
            final long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < 2_000; i++)
            {
                cycle.run();
            }
            if (threads.getCurrentThreadAllocatedBytes() == before)
            {
                return window;
            }
        }
        return -1;
    }

    private static int writeAll(final CaptureTap tap, final Path file, final long maxPackets) throws Exception
    {
        try (CaptureFileWriter writer = CaptureFileWriter.create(file, tap, PORT_NAMES, maxPackets))
        {
            writer.drainAll(tap);
            assertThat(writer.failure()).isNull();
            return (int)writer.written();
        }
    }

    private static List<byte[]> readFrames(final Path file) throws Exception
    {
        final List<byte[]> frames = new ArrayList<>();
        try (PcapReader reader = PcapReader.open(file))
        {
            assertThat(reader.linkType()).isEqualTo(PcapReader.LINKTYPE_ETHERNET);
            final PcapRecord record = new PcapRecord();
            while (reader.next(record))
            {
                assertThat(record.isTruncated()).isFalse();
                assertThat(record.epochSeconds()).isGreaterThan(1_600_000_000L);
                frames.add(record.bytes().clone());
            }
        }
        return frames;
    }

    /**
     * A UDP datagram 10.0.9.1 → 10.0.9.2 whose checksum field holds a partial sum, as the kernel leaves it.
     */
    private static byte[] udp()
    {
        final byte[] frame = new byte[14 + 20 + 8 + 13];
        final UnsafeBuffer buffer = new UnsafeBuffer(frame);
        frame[12] = 0x08;
        Ipv4Header.write(buffer, 14, 0, 20 + 8 + 13, 1, 64, 17, 0x0A000901, 0x0A000902);
        UdpHeader.write(buffer, 34, 5555, 9999, 8 + 13);
        for (int i = 42; i < frame.length; i++)
        {
            frame[i] = (byte)(i * 7);
        }
        frame[40] = 0x12;
        frame[41] = 0x34;
        return frame;
    }
}
