package io.netreduce.protocol.pcap;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs the independent RoCE implementations the tests compare against: scapy (through
 * {@code scripts/check/scapy_icrc.py}, with Debian's {@code /usr/bin/python3}) and tshark. One process per
 * capture, never per frame.
 */
public final class ExternalTools
{
    public static final String PYTHON = "/usr/bin/python3";
    private static final long TIMEOUT_SECONDS = 120;
    /** tshark's heuristic dissectors for InfiniBand payloads, by their --disable-heuristic names. */
    private static final List<String> INFINIBAND_PAYLOAD_HEURISTICS = List.of(
        "rpcrdma_infiniband", "smb_direct_infiniband", "smcr_infiniband", "nvme_rdma", "lnet_ib",
        "iser_infiniband", "eth_over_ib", "mellanox_eoib", "sdp_infiniband", "fc_infiniband", "drbd_rdma");

    private ExternalTools()
    {
    }

    /**
     * scapy's verdict on one frame: {@code ok}, {@code bad}, {@code not-roce}, {@code truncated} or
     * {@code unsupported} (IPv6), with the wire ICRC and scapy's, both as wire-order hex.
     */
    public record ScapyVerdict(int frame, String verdict, String wire, String scapy)
    {
    }

    public static boolean scapyAvailable()
    {
        if (!Files.isExecutable(Path.of(PYTHON)))
        {
            return false;
        }
        try
        {
            return run(List.of(PYTHON, "-c", "import scapy.contrib.roce"), null).exitCode == 0;
        }
        catch (final IOException ex)
        {
            return false;
        }
    }

    public static boolean tsharkAvailable()
    {
        try
        {
            return run(List.of("tshark", "--version"), null).exitCode == 0;
        }
        catch (final IOException ex)
        {
            return false;
        }
    }

    /**
     * @return scapy's verdict for every frame of the capture, keyed by frame number (from 1).
     */
    public static Map<Integer, ScapyVerdict> scapyVerdicts(final Path pcap) throws IOException
    {
        final Path script = TestCaptures.repoRoot().resolve("scripts/check/scapy_icrc.py");
        final Result result = run(List.of(PYTHON, script.toString(), pcap.toString()), null);
        assertThat(result.exitCode).as("scapy_icrc.py exit status; stderr: %s", result.stderr).isIn(0, 1);
        final Map<Integer, ScapyVerdict> verdicts = new HashMap<>();
        for (final String line : result.stdout.split("\n"))
        {
            if (line.isBlank())
            {
                continue;
            }
            final String[] parts = line.split(" ");
            final ScapyVerdict verdict = new ScapyVerdict(
                Integer.parseInt(parts[0]), parts[1], parts[2].substring("wire=".length()),
                parts[3].substring("scapy=".length()));
            verdicts.put(verdict.frame(), verdict);
        }
        return verdicts;
    }

    /**
     * @return one map of field name to tshark's text per frame, in frame order; absent fields are empty strings.
     */
    public static List<Map<String, String>> tsharkFields(final Path pcap, final List<String> fields)
        throws IOException
    {
        final List<String> command = new ArrayList<>(List.of(
            "tshark", "-n", "-r", pcap.toString(), "-T", "fields", "-E", "separator=|", "-E", "occurrence=f"));
        // Payload heuristics (RPC-over-RDMA, SMB Direct, iSER...) sniff random payload bytes, sometimes claim
        // them and then declare the packet malformed, hiding the ICRC. The headers are what we compare.
        for (final String heuristic : INFINIBAND_PAYLOAD_HEURISTICS)
        {
            command.add("--disable-heuristic");
            command.add(heuristic);
        }
        for (final String field : fields)
        {
            command.add("-e");
            command.add(field);
        }
        final Result result = run(command, null);
        assertThat(result.exitCode).as("tshark exit status; stderr: %s", result.stderr).isZero();
        final List<Map<String, String>> frames = new ArrayList<>();
        for (final String line : result.stdout.split("\n"))
        {
            if (line.isEmpty())
            {
                continue;
            }
            final String[] values = line.split("\\|", -1);
            final Map<String, String> frame = new HashMap<>();
            for (int i = 0; i < fields.size(); i++)
            {
                frame.put(fields.get(i), i < values.length ? values[i] : "");
            }
            frames.add(frame);
        }
        return frames;
    }

    /**
     * The finished process: exit code and everything it printed.
     */
    public record Result(int exitCode, String stdout, String stderr)
    {
    }

    public static Result run(final List<String> command, final Path workingDirectory) throws IOException
    {
        final ProcessBuilder builder = new ProcessBuilder(command);
        if (null != workingDirectory)
        {
            builder.directory(workingDirectory.toFile());
        }
        final Path stderr = Files.createTempFile("netreduce-tool-", ".stderr");
        builder.redirectError(stderr.toFile());
        builder.redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
        final Process process;
        try
        {
            process = builder.start();
        }
        catch (final IOException ex)
        {
            Files.deleteIfExists(stderr);
            throw ex;
        }
        try
        {
            final String stdout = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!process.waitFor(TIMEOUT_SECONDS, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                throw new IOException(command + " did not finish in " + TIMEOUT_SECONDS + " s");
            }
            return new Result(process.exitValue(), stdout, Files.readString(stderr));
        }
        catch (final InterruptedException ex)
        {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted waiting for " + command, ex);
        }
        finally
        {
            Files.deleteIfExists(stderr);
        }
    }
}
