package io.netreduce.daemon.pcap;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import io.netreduce.daemon.NetreduceMain;
import io.netreduce.protocol.pcap.PcapReader;
import io.netreduce.protocol.pcap.PcapRecord;
import io.netreduce.protocol.pcap.PcapWriter;
import org.agrona.concurrent.UnsafeBuffer;
import picocli.CommandLine;

/**
 * Test support for the {@code netreduce pcap} commands: runs them in-process as the launcher would, finds the
 * test captures, reads and writes records, and asks scapy for its opinion (one python process per capture).
 */
final class PcapCli
{
    static final String PYTHON = "/usr/bin/python3";
    static final String SOFT_ROCE = "rxe-rc-write-send-ack.pcap";
    static final int SOFT_ROCE_FRAMES = 120;

    private PcapCli()
    {
    }

    /** What a command printed and returned. */
    record Run(int exitCode, String out, String err)
    {
        List<String> lines()
        {
            return out.isEmpty() ? List.of() : List.of(out.split("\n"));
        }

        String summary()
        {
            final List<String> lines = lines();
            return lines.isEmpty() ? "" : lines.get(lines.size() - 1);
        }
    }

    /** One capture record, detached from the reader. */
    record Frame(byte[] bytes, int originalLength, long seconds, int nanos)
    {
        Frame withBytes(final byte[] newBytes)
        {
            return new Frame(newBytes, Math.max(originalLength, newBytes.length), seconds, nanos);
        }
    }

    static Run netreduce(final String... args)
    {
        final StringWriter out = new StringWriter();
        final StringWriter err = new StringWriter();
        final CommandLine commandLine = NetreduceMain.commandLine();
        commandLine.setOut(new PrintWriter(out, true));
        commandLine.setErr(new PrintWriter(err, true));
        final int exitCode = commandLine.execute(args);
        return new Run(exitCode, out.toString(), err.toString());
    }

    static Path repoRoot()
    {
        final String property = System.getProperty("netreduce.repo.root");
        if (null != property && !property.isBlank())
        {
            return Path.of(property).toAbsolutePath().normalize();
        }
        Path dir = Path.of("").toAbsolutePath();
        while (null != dir && !Files.isRegularFile(dir.resolve("mvnw")))
        {
            dir = dir.getParent();
        }
        assertThat(dir).as("repository root above %s", Path.of("").toAbsolutePath()).isNotNull();
        return dir;
    }

    /** The in-repository copy of the soft-RoCE capture (kept with the protocol module's test resources). */
    static Path softRoceCopy()
    {
        return repoRoot().resolve("protocol/src/test/resources/pcap").resolve(SOFT_ROCE);
    }

    /** The original in {@code <repo>/../shared/testdata}, present in CI and on the development machine. */
    static Optional<Path> sharedOriginal()
    {
        final Path file = repoRoot().resolve("../shared/testdata").resolve(SOFT_ROCE).normalize();
        return Files.isRegularFile(file) ? Optional.of(file) : Optional.empty();
    }

    static List<Frame> read(final Path file) throws IOException
    {
        final List<Frame> frames = new ArrayList<>();
        try (PcapReader reader = PcapReader.open(file))
        {
            final PcapRecord record = new PcapRecord();
            while (reader.next(record))
            {
                frames.add(new Frame(
                    record.bytes().clone(), record.originalLength(), record.epochSeconds(), record.nanos()));
            }
        }
        return frames;
    }

    static Path write(final Path file, final List<Frame> frames) throws IOException
    {
        try (PcapWriter writer = PcapWriter.create(file))
        {
            for (final Frame frame : frames)
            {
                writer.write(new UnsafeBuffer(frame.bytes()), 0, frame.bytes().length, frame.originalLength(),
                    frame.seconds(), frame.nanos());
            }
        }
        return file;
    }

    static boolean scapyAvailable()
    {
        try
        {
            final Process process = new ProcessBuilder(PYTHON, "-c", "import scapy.contrib.roce")
                .redirectErrorStream(true).start();
            process.getInputStream().readAllBytes();
            return process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0;
        }
        catch (final IOException ex)
        {
            return false;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    static boolean tsharkAvailable()
    {
        try
        {
            final Process process = new ProcessBuilder("tshark", "--version").redirectErrorStream(true).start();
            process.getInputStream().readAllBytes();
            return process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0;
        }
        catch (final IOException ex)
        {
            return false;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * @return scapy's verdict word ({@code ok}, {@code bad}, {@code not-roce}, ...) per frame number, from
     * {@code scripts/check/scapy_icrc.py}.
     */
    static Map<Integer, String> scapyVerdicts(final Path pcap) throws IOException, InterruptedException
    {
        final String out = runTool(List.of(
            PYTHON, repoRoot().resolve("scripts/check/scapy_icrc.py").toString(), pcap.toString()), 0, 1);
        final Map<Integer, String> verdicts = new HashMap<>();
        for (final String line : out.split("\n"))
        {
            if (!line.isBlank())
            {
                final String[] parts = line.split(" ");
                verdicts.put(Integer.parseInt(parts[0]), parts[1]);
            }
        }
        return verdicts;
    }

    /**
     * Run a tool to completion and return its standard output.
     */
    static String runTool(final List<String> command, final int... acceptedExitCodes)
        throws IOException, InterruptedException
    {
        final Path stderr = Files.createTempFile("netreduce-tool-", ".err");
        try
        {
            final Process process = new ProcessBuilder(command)
                .redirectError(stderr.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                .start();
            final String out = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!process.waitFor(120, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                throw new IOException(command + " did not finish");
            }
            final List<Integer> accepted = new ArrayList<>();
            for (final int code : acceptedExitCodes)
            {
                accepted.add(code);
            }
            assertThat(process.exitValue()).as("%s exit status; stderr: %s", command, Files.readString(stderr))
                .isIn(accepted);
            return out;
        }
        finally
        {
            Files.deleteIfExists(stderr);
        }
    }
}
