package io.netreduce.protocol.support;

import io.netreduce.protocol.pcap.PcapWriter;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs scripts/check/scapy_icrc.py (scapy's own ICRC code) over frames.
 */
public final class ScapyIcrc
{
    public static final Path PYTHON = Path.of("/usr/bin/python3");

    private ScapyIcrc()
    {
    }

    public static boolean available()
    {
        if (!Files.isExecutable(PYTHON))
        {
            return false;
        }
        try
        {
            final Process process = new ProcessBuilder(PYTHON.toString(), "-c", "import scapy.contrib.roce")
                .redirectErrorStream(true).start();
            return process.waitFor(60, TimeUnit.SECONDS) && process.exitValue() == 0;
        }
        catch (final IOException | InterruptedException ex)
        {
            return false;
        }
    }

    /**
     * @return "checked N mismatches M exit S": frames scapy judged, frames whose ICRC disagreed (or that scapy
     * could not check), and the script's exit status.
     */
    public static String check(final List<byte[]> frames) throws IOException, InterruptedException
    {
        final Path pcap = Files.createTempFile("netreduce-results", ".pcap");
        try
        {
            try (PcapWriter writer = PcapWriter.create(pcap))
            {
                int second = 0;
                for (final byte[] frame : frames)
                {
                    writer.write(new UnsafeBuffer(frame), 0, frame.length, second++, 0);
                }
            }
            final Path script = repoRoot().resolve("scripts/check/scapy_icrc.py");
            final Process process = new ProcessBuilder(PYTHON.toString(), script.toString(), pcap.toString())
                .redirectErrorStream(true).start();
            if (!process.waitFor(120, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                return "timeout";
            }
            final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            final int exit = process.exitValue();
            final List<String> lines = output.lines().toList();
            final long ok = lines.stream().filter(line -> line.matches("\\d+ ok .*")).count();
            return "checked " + lines.size() + " mismatches " + (lines.size() - ok) + " exit " + exit;
        }
        finally
        {
            Files.deleteIfExists(pcap);
        }
    }

    public static Path repoRoot()
    {
        final String root = System.getProperty("netreduce.repo.root");
        if (root != null)
        {
            return Path.of(root);
        }
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !Files.exists(dir.resolve("scripts/check/scapy_icrc.py")))
        {
            dir = dir.getParent();
        }
        return dir == null ? Path.of("") : dir;
    }
}
