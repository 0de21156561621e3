package io.netreduce.daemon.pcap;

import static io.netreduce.daemon.pcap.PcapCli.netreduce;
import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.netreduce.daemon.pcap.PcapCli.Frame;
import io.netreduce.daemon.pcap.PcapCli.Run;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * {@code netreduce pcap verify} and {@code fix} on hostile captures: frames of the real soft-RoCE capture cut
 * short, with bits flipped, or replaced by random bytes; and files that are random bytes from the first byte or
 * after a valid file header. The commands must always end with a defined exit code and their own words, never
 * an exception; verify's lines and summary must add up; and whatever fix writes must then verify with no bad
 * ICRC.
 */
class PcapCommandFuzzTest
{
    private static final Pattern SUMMARY = Pattern.compile(
        "frames=(\\d+) roce=(\\d+) icrc_ok=(\\d+) icrc_bad=(\\d+) malformed=(\\d+) other=(\\d+)");
    private static List<Frame> softRoce;
    private static Path dir;

    @BeforeContainer
    static void readCapture() throws IOException
    {
        softRoce = PcapCli.read(PcapCli.softRoceCopy());
        dir = Files.createTempDirectory("netreduce-pcap-fuzz-");
    }

    @AfterContainer
    static void removeFiles() throws IOException
    {
        try (var files = Files.list(dir))
        {
            for (final Path file : files.toList())
            {
                Files.deleteIfExists(file);
            }
        }
        Files.deleteIfExists(dir);
    }

    /** How one frame of the capture is damaged. */
    record Damage(int frame, int kind, int where, int bits, byte[] noise)
    {
    }

    @Property(tries = 150)
    void shouldVerifyAndFixDamagedCapturesWithoutThrowing(@ForAll("damage") @Size(max = 12) final List<Damage> damage)
        throws IOException
    {
        final List<Frame> frames = new ArrayList<>();
        for (final Frame frame : softRoce.subList(0, 24))
        {
            frames.add(frame.withBytes(frame.bytes().clone()));
        }
        for (final Damage d : damage)
        {
            final Frame frame = frames.get(d.frame() % frames.size());
            frames.set(d.frame() % frames.size(), frame.withBytes(apply(d, frame.bytes())));
        }
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
        Statistics.label("frames").collect(bad > 0 ? "some icrc=bad" : "no icrc=bad",
            malformed > 0 ? "some malformed" : "none malformed", other > 0 ? "some other" : "no other");

        final Path out = dir.resolve("fixed.pcap");
        final Run fix = netreduce("pcap", "fix", in.toString(), out.toString());
        assertThat(fix.exitCode()).as(fix.err()).isZero();
        assertThat(fix.out()).doesNotContain("Exception", "error");
        final Run again = netreduce("pcap", "verify", out.toString());
        assertThat(again.summary()).contains("icrc_bad=0", "malformed=" + malformed);
        assertThat(PcapCli.read(out)).hasSize(frames.size());
    }

    @Property(tries = 150)
    void shouldAnswerRandomFilesWithAnExitCodeAndNoTrace(
        @ForAll @Size(max = 3000) final byte[] noise, @ForAll final boolean behindValidHeader) throws IOException
    {
        final byte[] header = Arrays.copyOf(Files.readAllBytes(PcapCli.softRoceCopy()), 24);
        final byte[] bytes = behindValidHeader ? concat(header, noise) : noise;
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
    }

    @Provide
    Arbitrary<List<Damage>> damage()
    {
        return Combinators.combine(
            Arbitraries.integers().between(0, 23),
            Arbitraries.integers().between(0, 3),
            Arbitraries.integers().between(0, 1200),
            Arbitraries.integers().between(1, 8),
            Arbitraries.bytes().array(byte[].class).ofMaxSize(120))
            .as(Damage::new)
            .list();
    }

    private static byte[] apply(final Damage d, final byte[] bytes)
    {
        switch (d.kind())
        {
            case 0: // cut short (the record is then complete as written: a frame whose lengths lie)
                return Arrays.copyOf(bytes, d.where() % (bytes.length + 1));
            case 1: // flip bits anywhere
            {
                final byte[] copy = bytes.clone();
                for (int i = 0; i < d.bits() && copy.length > 0; i++)
                {
                    final int bit = (d.where() * 31 + i * 977) % (copy.length * 8);
                    copy[bit / 8] ^= (byte)(1 << (bit % 8));
                }
                return copy;
            }
            case 2: // random bytes after a prefix of the real headers
            {
                final int keep = Math.min(bytes.length, d.where() % 80);
                return concat(Arrays.copyOf(bytes, keep), d.noise());
            }
            default: // a frame of random bytes
                return d.noise().clone();
        }
    }

    private static byte[] concat(final byte[] a, final byte[] b)
    {
        final byte[] result = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, result, a.length, b.length);
        return result;
    }
}
