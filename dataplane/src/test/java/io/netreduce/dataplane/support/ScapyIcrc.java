package io.netreduce.dataplane.support;

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
     * @return the script's output line ("checked N mismatches M [...]"), exit status appended.
     */
    public static String check(final List<byte[]> frames) throws IOException, InterruptedException
    {
        final Path pcap = Files.createTempFile("netreduce-results", ".pcap");
        try
        {
            PcapFile.write(pcap, frames);
            final Path script = repoRoot().resolve("scripts/check/scapy_icrc.py");
            final Process process = new ProcessBuilder(PYTHON.toString(), script.toString(), pcap.toString())
                .redirectErrorStream(true).start();
            if (!process.waitFor(120, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                return "timeout";
            }
            final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            return output.trim() + " exit " + process.exitValue();
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
