package io.netreduce.systemtests;

import io.netreduce.daemon.NetreduceMain;
import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapRecord;
import io.netreduce.protocol.wire.InaHeader;
import io.netreduce.protocol.wire.Opcode;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.allreduce.NetReduceAllReduce;
import io.netreduce.host.allreduce.NetReduceConfig;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.rc.RcConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A capture taken by tshark on a worker's switch port during a NetReduce run holds the worker's gradient packets
 * and the appliance's rewritten result packets; every RoCEv2 ICRC in it must verify with {@code netreduce pcap
 * verify} and with scapy's independent RoCE implementation.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CaptureSystemTest
{
    private static final int WORLD = 2;
    private static final int RING = 11;
    private static final int PAYLOAD = 4096;
    private static final int FRAMES = 400;
    private static TestBed bed;

    @BeforeAll
    static void up()
    {
        Assumptions.assumeTrue(TestBed.isRoot(), "system tests need root (network namespaces)");
        bed = TestBed.up('c', WORLD, 9000, false);
        // The appliance sends each worker's results as segmentation offload batches, and each worker sends its
        // gradient the same way; veth carries both whole. A capture on the switch port should hold what a wire
        // carries, so both ends of the worker's link segment them in software, as a NIC cuts them for the wire.
        for (int r = 0; r < WORLD; r++)
        {
            segmentUdpLeaving(bed.switchNamespace(), "sw-w" + r);
            segmentUdpLeaving(bed.workerNamespace(r), "eth0");
        }
    }

    private static void segmentUdpLeaving(final String namespace, final String device)
    {
        try
        {
            final int status = new ProcessBuilder("ip", "netns", "exec", namespace, "ethtool", "-K", device,
                "tx-udp-segmentation", "off").inheritIO().start().waitFor();
            Assumptions.assumeTrue(status == 0, "ethtool -K " + device + " tx-udp-segmentation off in " + namespace);
        }
        catch (final java.io.IOException | InterruptedException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    @AfterAll
    static void down()
    {
        if (bed != null)
        {
            bed.close();
        }
    }

    @Test
    void shouldCaptureResultFramesWhoseIcrcVerifiesWithNetreduceAndScapy(@TempDir final Path dir) throws Exception
    {
        final Path capture = dir.resolve("sw-w0.pcap");
        final NetReduceConfig config = new NetReduceConfig(RING, 4, 4, PAYLOAD, TimeUnit.SECONDS.toNanos(10));
        final int elements = 100 * config.dataBytesPerMessage() / Float.BYTES;
        final Process tshark = new ProcessBuilder("ip", "netns", "exec", bed.switchNamespace(), "tshark", "-i",
            "sw-w0", "-B", "64", "-c", Integer.toString(FRAMES), "-f", "udp port 4791", "-F", "pcap", "-w",
            capture.toString())
            .redirectErrorStream(true).redirectOutput(dir.resolve("tshark.log").toFile()).start();
        try (Appliance appliance = Appliance.start(bed, 0.0,
                Appliance.ringJob("captured", RING, "fp32", WORLD, 4, 4, PAYLOAD));
            WorkerRing ring = new WorkerRing(bed, WORLD, r -> new RcConfig().pmtu(PAYLOAD)
                .retransmitTimeoutNs(TimeUnit.MILLISECONDS.toNanos(50)), config.regionBytes(), config.regionBytes()))
        {
            awaitCapturing(dir.resolve("tshark.log"), tshark);
            final AllReduce[] ops = new AllReduce[WORLD];
            for (int r = 0; r < WORLD; r++)
            {
                ops[r] = new NetReduceAllReduce(ring.link(r), config);
            }
            // 100 messages x 4 packets each way on w0's link per call: two calls are well over FRAMES, but dumpcap
            // drops frames when the machine is busy (seen once in CI: the capture stopped short of FRAMES), so the
            // ring keeps calling, up to a bound, until the capture is complete.
            for (int call = 0; call < 20 && tshark.isAlive(); call++)
            {
                final Tensor[] tensors = ring.inputs(ElementType.FP32, elements, call);
                final WorkerRing.Outcome outcome = ring.allReduce(ops, tensors, () -> 0, TimeUnit.SECONDS.toNanos(60));
                assertThat(outcome.allSucceeded()).as(outcome.describe()).isTrue();
                assertThat(ring.checkRankOrderSum(tensors, call)).isNull();
            }
            assertThat(tshark.waitFor(30, TimeUnit.SECONDS)).as("tshark got %d frames", FRAMES).isTrue();
        }
        finally
        {
            tshark.destroy();
        }

        final StringWriter out = new StringWriter();
        final CommandLine netreduce = NetreduceMain.commandLine();
        netreduce.setOut(new PrintWriter(out, true));
        final int verify = netreduce.execute("pcap", "verify", capture.toString());
        final String verdicts = out.toString();
        assertThat(verify).as("netreduce pcap verify exit status:\n%s", verdicts).isZero();
        assertThat(verdicts).contains("frames=" + FRAMES + " roce=" + FRAMES + " icrc_ok=" + FRAMES + " icrc_bad=0");
        // The capture holds both directions: w0's tagged gradients (NRED) and the appliance's results (NRES).
        final int[] tags = firstPacketTags(capture);
        assertThat(tags[0]).as("gradient messages (NRED) from w0").isPositive();
        assertThat(tags[1]).as("result messages (NRES) to w0").isPositive();

        final String scapy = TestBed.run(List.of("/usr/bin/python3",
            TestBed.repoRoot().resolve("scripts/check/scapy_icrc.py").toString(), capture.toString()), 120);
        final List<String> scapyLines = scapy.lines().filter(line -> line.matches("\\d+ \\S+ .*")).toList();
        assertThat(scapyLines).hasSize(FRAMES);
        assertThat(scapyLines).allSatisfy(line -> assertThat(line.split(" ")[1]).isEqualTo("ok"));
    }

    /**
     * @return {NRED count, NRES count} over the first packets of messages in the capture.
     */
    private static int[] firstPacketTags(final Path capture) throws Exception
    {
        final int[] tags = new int[2];
        try (PcapReader reader = PcapReader.open(capture))
        {
            final PcapRecord record = new PcapRecord();
            final RoceFrame frame = new RoceFrame();
            while (reader.next(record))
            {
                if (frame.wrap(record.buffer(), 0, record.capturedLength()) == RoceFrame.OK &&
                    Opcode.has(frame.opcode(), Opcode.IS_FIRST))
                {
                    final int tag = InaHeader.inetTag(record.buffer(), frame.payloadOffset());
                    tags[0] += tag == InaHeader.INET_TAG ? 1 : 0;
                    tags[1] += tag == InaHeader.RESULT_TAG ? 1 : 0;
                }
            }
        }
        return tags;
    }

    private static void awaitCapturing(final Path log, final Process tshark) throws Exception
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline)
        {
            if (java.nio.file.Files.readString(log).contains("Capturing on"))
            {
                return;
            }
            assertThat(tshark.isAlive()).as("tshark: %s", java.nio.file.Files.readString(log)).isTrue();
            Thread.sleep(50);
        }
        throw new AssertionError("tshark did not start capturing: " + java.nio.file.Files.readString(log));
    }
}
