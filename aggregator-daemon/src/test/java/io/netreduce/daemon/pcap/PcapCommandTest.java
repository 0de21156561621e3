package io.netreduce.daemon.pcap;

import static io.netreduce.daemon.pcap.PcapCli.netreduce;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import io.netreduce.daemon.pcap.PcapCli.Frame;
import io.netreduce.daemon.pcap.PcapCli.Run;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class PcapCommandTest
{
    private static final String OK_LINE = "\\d+ (RC|UC|UD)_[A-Z_]+ psn=\\d+ qp=0x[0-9a-f]{6} icrc=ok";

    @TempDir
    Path tmp;

    static Stream<Path> softRoceCaptures()
    {
        final List<Path> captures = new ArrayList<>();
        captures.add(PcapCli.softRoceCopy());
        PcapCli.sharedOriginal().ifPresent(captures::add);
        return captures.stream();
    }

    @ParameterizedTest
    @MethodSource("softRoceCaptures")
    void shouldVerifyEveryFrameOfTheSoftRoceCapture(final Path capture)
    {
        final Run run = netreduce("pcap", "verify", capture.toString());

        assertThat(run.exitCode()).as(run.err()).isZero();
        assertThat(run.err()).isEmpty();
        final List<String> lines = run.lines();
        assertThat(lines).hasSize(PcapCli.SOFT_ROCE_FRAMES + 1);
        for (int i = 0; i < PcapCli.SOFT_ROCE_FRAMES; i++)
        {
            assertThat(lines.get(i)).matches(OK_LINE).startsWith((i + 1) + " ");
        }
        assertThat(lines.get(0)).isEqualTo("1 RC_RDMA_WRITE_FIRST psn=9375052 qp=0x000011 icrc=ok");
        assertThat(run.summary()).isEqualTo("frames=120 roce=120 icrc_ok=120 icrc_bad=0 malformed=0 other=0");
    }

    @Test
    void shouldPrintTheOpcodePsnAndQpTsharkSeesForEveryFrame() throws Exception
    {
        assumeThat(PcapCli.tsharkAvailable()).as("tshark").isTrue();
        final Path capture = PcapCli.softRoceCopy();
        final List<String> ours = netreduce("pcap", "verify", capture.toString()).lines();
        final String[] theirs = PcapCli.runTool(List.of("tshark", "-n", "-r", capture.toString(), "-T", "fields",
            "-E", "separator= ", "-e", "frame.number", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn",
            "-e", "infiniband.bth.destqp"), 0).split("\n");

        assertThat(theirs).hasSize(PcapCli.SOFT_ROCE_FRAMES);
        for (int i = 0; i < PcapCli.SOFT_ROCE_FRAMES; i++)
        {
            final String[] t = theirs[i].split(" ");
            final String[] o = ours.get(i).split(" ");
            assertThat(o[0]).isEqualTo(t[0]);
            assertThat(o[1]).as("frame %s opcode %s", t[0], t[1]).isEqualTo(expectedName(Integer.parseInt(t[1])));
            assertThat(o[2]).isEqualTo("psn=" + t[2]);
            assertThat(o[3]).isEqualTo("qp=" + t[3]);
        }
    }

    @Test
    void shouldReportTheFrameWithAFlippedPayloadBitAsBadAndExitOne() throws IOException
    {
        final List<Frame> frames = PcapCli.read(PcapCli.softRoceCopy());
        final int victim = 37; // an RC SEND or WRITE frame with payload
        flipPayloadBit(frames.get(victim - 1).bytes(), 1234);
        final Path corrupted = PcapCli.write(tmp.resolve("flipped.pcap"), frames);

        final Run run = netreduce("pcap", "verify", corrupted.toString());

        assertThat(run.exitCode()).isEqualTo(PcapCommand.EXIT_BAD_FRAMES);
        assertThat(run.lines().get(victim - 1)).startsWith(victim + " ").endsWith(" icrc=bad");
        assertThat(run.lines().stream().filter(line -> line.endsWith("icrc=bad"))).hasSize(1);
        assertThat(run.summary()).isEqualTo("frames=120 roce=120 icrc_ok=119 icrc_bad=1 malformed=0 other=0");
    }

    @Test
    void shouldFixCorruptedIcrcsSoThatVerifyAndScapyAgree() throws Exception
    {
        final List<Frame> original = PcapCli.read(PcapCli.softRoceCopy());
        final List<Frame> damaged = new ArrayList<>();
        for (final Frame frame : original)
        {
            damaged.add(frame.withBytes(frame.bytes().clone()));
        }
        final int[] badIcrc = { 1, 2, 50, 119, 120 };
        for (final int number : badIcrc)
        {
            final byte[] bytes = damaged.get(number - 1).bytes();
            bytes[bytes.length - 1] ^= (byte)0x5A; // the ICRC's last byte
        }
        final int flipped = 60;
        flipPayloadBit(damaged.get(flipped - 1).bytes(), 99);
        final Path in = PcapCli.write(tmp.resolve("damaged.pcap"), damaged);
        final Path out = tmp.resolve("fixed.pcap");

        final Run before = netreduce("pcap", "verify", in.toString());
        assertThat(before.exitCode()).isEqualTo(PcapCommand.EXIT_BAD_FRAMES);
        assertThat(before.summary()).contains("icrc_bad=" + (badIcrc.length + 1));

        final Run fix = netreduce("pcap", "fix", in.toString(), out.toString());
        assertThat(fix.exitCode()).as(fix.err()).isZero();
        assertThat(fix.summary()).isEqualTo(
            "frames=120 roce=120 icrc_rewritten=6 icrc_unchanged=114 malformed=0 other=0");

        final Run after = netreduce("pcap", "verify", out.toString());
        assertThat(after.exitCode()).isZero();
        assertThat(after.summary()).isEqualTo("frames=120 roce=120 icrc_ok=120 icrc_bad=0 malformed=0 other=0");

        // Fixing only the ICRC restores the kernel's bytes exactly; timestamps and lengths pass through.
        final List<Frame> fixed = PcapCli.read(out);
        assertThat(fixed).hasSize(original.size());
        for (int i = 0; i < original.size(); i++)
        {
            assertThat(fixed.get(i).seconds()).isEqualTo(original.get(i).seconds());
            assertThat(fixed.get(i).nanos()).isEqualTo(original.get(i).nanos());
            assertThat(fixed.get(i).originalLength()).isEqualTo(original.get(i).originalLength());
            if (i + 1 != flipped)
            {
                assertThat(fixed.get(i).bytes()).as("frame %d", i + 1).isEqualTo(original.get(i).bytes());
            }
        }

        assumeThat(PcapCli.scapyAvailable()).as("/usr/bin/python3 with scapy").isTrue();
        final Map<Integer, String> scapyBefore = PcapCli.scapyVerdicts(in);
        assertThat(scapyBefore.values().stream().filter("bad"::equals)).hasSize(badIcrc.length + 1);
        final Map<Integer, String> scapyAfter = PcapCli.scapyVerdicts(out);
        assertThat(scapyAfter).hasSize(PcapCli.SOFT_ROCE_FRAMES);
        assertThat(scapyAfter.values()).containsOnly("ok");
    }

    @Test
    void shouldLeaveAGoodCaptureByteForByteAlone() throws IOException
    {
        final Path out = tmp.resolve("same.pcap");
        final Run fix = netreduce("pcap", "fix", PcapCli.softRoceCopy().toString(), out.toString());
        assertThat(fix.exitCode()).isZero();
        assertThat(fix.lines()).hasSize(1);
        assertThat(Files.readAllBytes(out)).isEqualTo(Files.readAllBytes(PcapCli.softRoceCopy()));
    }

    @Test
    void shouldFixACaptureInPlace() throws IOException
    {
        final List<Frame> frames = PcapCli.read(PcapCli.softRoceCopy());
        final byte[] bytes = frames.get(0).bytes();
        bytes[bytes.length - 2] ^= 1;
        final Path file = PcapCli.write(tmp.resolve("in-place.pcap"), frames);

        assertThat(netreduce("pcap", "fix", file.toString(), file.toString()).exitCode()).isZero();
        assertThat(Files.readAllBytes(file)).isEqualTo(Files.readAllBytes(PcapCli.softRoceCopy()));
        try (Stream<Path> left = Files.list(tmp))
        {
            assertThat(left).containsExactly(file);
        }
    }

    @Test
    void shouldCountAndSkipNonRoceFramesAndCopyThemUnchanged() throws IOException
    {
        final List<Frame> roce = PcapCli.read(PcapCli.softRoceCopy());
        final byte[] arp = hex("ffffffffffff52540000000108060001080006040001525400000001c0a84d01000000000000c0a84d02"
            + "000000000000000000000000000000000000");
        final byte[] otherUdp = roce.get(119).bytes().clone(); // an ACK, re-addressed to UDP port 53
        otherUdp[14 + 20 + 2] = 0;
        otherUdp[14 + 20 + 3] = 53;
        final List<Frame> frames = List.of(
            new Frame(arp, arp.length, 10, 0), roce.get(0), new Frame(otherUdp, otherUdp.length, 11, 5000),
            roce.get(119));
        final Path in = PcapCli.write(tmp.resolve("mixed.pcap"), frames);

        final Run verify = netreduce("pcap", "verify", in.toString());
        assertThat(verify.exitCode()).isZero();
        assertThat(verify.lines()).hasSize(3);
        assertThat(verify.lines().get(0)).startsWith("2 RC_RDMA_WRITE_FIRST ");
        assertThat(verify.lines().get(1)).startsWith("4 RC_ACKNOWLEDGE ");
        assertThat(verify.summary()).isEqualTo("frames=4 roce=2 icrc_ok=2 icrc_bad=0 malformed=0 other=2");

        final Path out = tmp.resolve("mixed-fixed.pcap");
        assertThat(netreduce("pcap", "fix", in.toString(), out.toString()).summary())
            .isEqualTo("frames=4 roce=2 icrc_rewritten=0 icrc_unchanged=2 malformed=0 other=2");
        assertThat(Files.readAllBytes(out)).isEqualTo(Files.readAllBytes(in));
    }

    @Test
    void shouldReportFramesCutBySnapLengthAsTruncatedAndCopyThemUnchanged() throws IOException
    {
        final List<Frame> roce = PcapCli.read(PcapCli.softRoceCopy());
        final Frame whole = roce.get(1);
        final Frame cut = new Frame(Arrays.copyOf(whole.bytes(), 100), whole.bytes().length, 20, 0);
        final Path in = PcapCli.write(tmp.resolve("snapped.pcap"), List.of(roce.get(0), cut));

        final Run verify = netreduce("pcap", "verify", in.toString());
        assertThat(verify.exitCode()).isEqualTo(PcapCommand.EXIT_BAD_FRAMES);
        assertThat(verify.lines().get(1))
            .isEqualTo("2 truncated (captured 100 of 1082 bytes; ICRC not in capture)");
        assertThat(verify.summary()).isEqualTo("frames=2 roce=2 icrc_ok=1 icrc_bad=0 malformed=1 other=0");

        final Path out = tmp.resolve("snapped-fixed.pcap");
        final Run fix = netreduce("pcap", "fix", in.toString(), out.toString());
        assertThat(fix.exitCode()).isZero();
        assertThat(fix.lines().get(0)).startsWith("2 truncated").endsWith(": copied unchanged");
        assertThat(Files.readAllBytes(out)).isEqualTo(Files.readAllBytes(in));
        assertThat(PcapCli.read(out).get(1).originalLength()).isEqualTo(1082);
    }

    @Test
    void shouldExplainUnreadableCapturesWithoutAStackTrace() throws IOException
    {
        final byte[] capture = Files.readAllBytes(PcapCli.softRoceCopy());
        final Path cut = Files.write(tmp.resolve("cut.pcap"), Arrays.copyOf(capture, 5000));
        final Path garbage = Files.write(tmp.resolve("garbage.pcap"), "not a capture at all\n".repeat(20).getBytes());
        final Path empty = Files.write(tmp.resolve("empty.pcap"), new byte[0]);
        final Path missing = tmp.resolve("missing.pcap");

        final Run cutRun = netreduce("pcap", "verify", cut.toString());
        assertThat(cutRun.exitCode()).isEqualTo(PcapCommand.EXIT_FILE_ERROR);
        assertThat(cutRun.lines()).hasSize(5); // four whole frames and the summary of what was read
        assertThat(cutRun.summary()).isEqualTo("frames=4 roce=4 icrc_ok=4 icrc_bad=0 malformed=0 other=0");
        assertThat(cutRun.err()).contains(cut.toString(), "record 5", "truncated");

        for (final Path file : List.of(cut, garbage, empty, missing))
        {
            final Run verify = netreduce("pcap", "verify", file.toString());
            final Path out = tmp.resolve("out-" + file.getFileName());
            final Run fix = netreduce("pcap", "fix", file.toString(), out.toString());
            for (final Run run : List.of(verify, fix))
            {
                assertThat(run.exitCode()).isEqualTo(PcapCommand.EXIT_FILE_ERROR);
                assertThat(run.err()).startsWith("netreduce pcap ").contains(file.toString())
                    .doesNotContain("Exception:", "\tat ");
                assertThat(run.out()).doesNotContain("Exception", "\tat ");
            }
            assertThat(out).doesNotExist();
        }
        try (Stream<Path> left = Files.list(tmp))
        {
            assertThat(left).noneMatch(path -> path.getFileName().toString().endsWith(".tmp"));
        }
    }

    private static String expectedName(final int opcode)
    {
        return switch (opcode)
        {
            case 6 -> "RC_RDMA_WRITE_FIRST";
            case 7 -> "RC_RDMA_WRITE_MIDDLE";
            case 0 -> "RC_SEND_FIRST";
            case 1 -> "RC_SEND_MIDDLE";
            case 2 -> "RC_SEND_LAST";
            case 17 -> "RC_ACKNOWLEDGE";
            default -> throw new AssertionError("opcode " + opcode + " is not in the soft-RoCE capture");
        };
    }

    private static void flipPayloadBit(final byte[] bytes, final int seed)
    {
        final RoceFrame frame = new RoceFrame();
        assertThat(frame.wrap(new UnsafeBuffer(bytes), 0, bytes.length)).isEqualTo(RoceFrame.OK);
        assertThat(frame.payloadLength()).isPositive();
        final int bit = seed % (frame.payloadLength() * 8);
        bytes[frame.payloadOffset() + bit / 8] ^= (byte)(1 << (bit % 8));
    }

    private static byte[] hex(final String text)
    {
        return java.util.HexFormat.of().parseHex(text);
    }
}
