package io.netreduce.daemon.pcap;

import static io.netreduce.daemon.pcap.PcapCli.netreduce;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.netreduce.daemon.pcap.PcapCli.Frame;
import io.netreduce.daemon.pcap.PcapCli.Run;
import io.netreduce.protocol.testing.SeededCases;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code netreduce pcap verify} and {@code fix} on hostile captures: frames of the real soft-RoCE capture cut
 * short, with bits flipped, or replaced by random bytes; and files that are random bytes from the first byte or
 * after a valid file header. The commands must always end with a defined exit code and their own words, never
 * an exception; verify's lines and summary must add up; and whatever fix writes must then verify with no bad
 * ICRC. Seeded random cases (see {@link SeededCases}).
 */
class PcapCommandFuzzTest
{
    private static final Pattern SUMMARY = Pattern.compile(
        "frames=(\\d+) roce=(\\d+) icrc_ok=(\\d+) icrc_bad=(\\d+) malformed=(\\d+) other=(\\d+)");
    private static final int FRAMES_PER_CAPTURE = 24;
    private static List<Frame> softRoce;

    @TempDir
    Path dir;

    @BeforeAll
    static void readCapture() throws IOException
    {
        softRoce = PcapCli.read(PcapCli.softRoceCopy());
    }

    @Test
    void shouldVerifyAndFixDamagedCapturesWithoutThrowing()
    {
        final long[] seen = new long[3]; // captures with a bad ICRC, with a malformed frame, with other frames
        SeededCases.run("damaged captures", 150, (random, i) ->
        {
            final List<Frame> frames = damagedCapture(random);
            final Path in = PcapCli.write(dir.resolve("damaged.pcap"), frames);

            final Run verify = netreduce("pcap", "verify", in.toString());
            assertThat(verify.exitCode()).as(verify.err()).isIn(PcapCommand.EXIT_OK, PcapCommand.EXIT_BAD_FRAMES);
            assertThat(verify.err()).isEmpty();
            assertThat(verify.out()).doesNotContain("Exception", "error");
            final Matcher summary = SUMMARY.matcher(verify.summary());
            assertThat(summary.matches()).as(verify.summary()).isTrue();
            final long total = Long.parseLong(summary.group(1));
            final long roce = Long.parseLong(summary.group(2));
            final long ok = Long.parseLong(summary.group(3));
            final long bad = Long.parseLong(summary.group(4));
            final long malformed = Long.parseLong(summary.group(5));
            final long other = Long.parseLong(summary.group(6));
            assertThat(total).isEqualTo(frames.size());
            assertThat(roce + other).isEqualTo(total);
            assertThat(ok + bad + malformed).isEqualTo(roce);
            assertThat(verify.lines()).hasSize((int)roce + 1);
            assertThat(verify.exitCode()).isEqualTo(bad + malformed == 0 ? 0 : 1);
            seen[0] += bad > 0 ? 1 : 0;
            seen[1] += malformed > 0 ? 1 : 0;
            seen[2] += other > 0 ? 1 : 0;

            final Path out = dir.resolve("fixed.pcap");
            final Run fix = netreduce("pcap", "fix", in.toString(), out.toString());
            assertThat(fix.exitCode()).as(fix.err()).isZero();
            assertThat(fix.out()).doesNotContain("Exception", "error");
            final Run again = netreduce("pcap", "verify", out.toString());
            assertThat(again.summary()).contains("icrc_bad=0", "malformed=" + malformed);
            assertThat(PcapCli.read(out)).hasSize(frames.size());
        });
        // The damage must actually reach every verdict, or this test proves little.
        assertThat(Arrays.stream(seen).min().orElse(0))
            .as("fewest captures reaching one verdict, of bad ICRC / malformed / other: %s", Arrays.toString(seen))
            .isGreaterThan(10);
    }

    @Test
    void shouldAnswerRandomFilesWithAnExitCodeAndNoTrace() throws IOException
    {
        final byte[] header = Arrays.copyOf(Files.readAllBytes(PcapCli.softRoceCopy()), 24);
        SeededCases.run("random files", 150, (random, i) ->
        {
            final byte[] noise = new byte[random.nextInt(3001)];
            random.nextBytes(noise);
            final byte[] bytes = random.nextBoolean() ? concat(header, noise) : noise;
            final Path file = Files.write(dir.resolve("random.pcap"), bytes);

            final Run verify = netreduce("pcap", "verify", file.toString());
            assertThat(verify.exitCode()).isIn(0, 1, 2);
            assertThat(verify.err()).doesNotContain("Exception:", "\tat ");
            assertThat(verify.out()).doesNotContain("Exception", "\tat ");
            if (verify.exitCode() == 2)
            {
                assertThat(verify.err()).startsWith("netreduce pcap verify: ").contains(file.toString());
            }

            final Path out = dir.resolve("random-fixed.pcap");
            Files.deleteIfExists(out);
            final Run fix = netreduce("pcap", "fix", file.toString(), out.toString());
            assertThat(fix.exitCode()).isIn(0, 2);
            assertThat(fix.err()).doesNotContain("Exception:", "\tat ");
            assertThat(Files.exists(out)).isEqualTo(fix.exitCode() == 0);
        });
    }

    /**
     * The first frames of the soft-RoCE capture with up to 12 of them damaged: cut short (the record is then
     * complete as written, a frame whose lengths lie), bits flipped, random bytes after a prefix of the real
     * headers, or replaced by random bytes.
     */
    private static List<Frame> damagedCapture(final SplittableRandom random)
    {
        final List<Frame> frames = new ArrayList<>();
        for (final Frame frame : softRoce.subList(0, FRAMES_PER_CAPTURE))
        {
            frames.add(frame.withBytes(frame.bytes().clone()));
        }
        final int damaged = random.nextInt(13);
        for (int d = 0; d < damaged; d++)
        {
            final int index = random.nextInt(frames.size());
            final byte[] bytes = frames.get(index).bytes();
            final byte[] noise = new byte[random.nextInt(121)];
            random.nextBytes(noise);
            final byte[] result = switch (random.nextInt(4))
            {
                case 0 -> Arrays.copyOf(bytes, random.nextInt(bytes.length + 1));
                case 1 -> flipBits(bytes, 1 + random.nextInt(8), random);
                case 2 -> concat(Arrays.copyOf(bytes, Math.min(bytes.length, random.nextInt(80))), noise);
                default -> noise;
            };
            frames.set(index, frames.get(index).withBytes(result));
        }
        return frames;
    }

    private static byte[] flipBits(final byte[] bytes, final int bits, final SplittableRandom random)
    {
        final byte[] copy = bytes.clone();
        for (int i = 0; i < bits && copy.length > 0; i++)
        {
            final int bit = random.nextInt(copy.length * 8);
            copy[bit / 8] ^= (byte)(1 << (bit % 8));
        }
        return copy;
    }

    private static byte[] concat(final byte[] a, final byte[] b)
    {
        final byte[] result = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, result, a.length, b.length);
        return result;
    }
}
