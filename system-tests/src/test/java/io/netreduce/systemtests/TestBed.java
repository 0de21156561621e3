package io.netreduce.systemtests;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The namespace test bed of {@code scripts/testbed.sh}, brought up with a prefix of its own so that test classes
 * (and other users of the machine) never share namespaces, and taken down by {@link #close()}.
 */
final class TestBed implements AutoCloseable
{
    /** The outsider's address (testbed.sh --outsider): on the switch, in no ring. */
    static final String OUTSIDER_IP = "10.77.0.100";

    private final String prefix;
    private final int workers;
    private final int mtu;
    private final int racks;

    private TestBed(final String prefix, final int workers, final int mtu)
    {
        this(prefix, workers, mtu, 0);
    }

    private TestBed(final String prefix, final int workers, final int mtu, final int racks)
    {
        this.prefix = prefix;
        this.workers = workers;
        this.mtu = mtu;
        this.racks = racks;
    }

    /**
     * Bring a multi-rack bed up ({@code testbed.sh --racks}): {@code racks} racks of {@code workers / racks}
     * consecutive ranks, each with its switch and leaf appliance namespace, and the spine switch with the spine
     * appliance namespace.
     */
    static TestBed upRacks(final char tag, final int workers, final int racks, final int mtu)
    {
        return upRacks(tag, workers, racks, mtu, false);
    }

    /**
     * @param outsider also create the non-member namespace, on rack 0's switch.
     */
    static TestBed upRacks(final char tag, final int workers, final int racks, final int mtu, final boolean outsider)
    {
        final String prefix = "t" + tag + (ProcessHandle.current().pid() % 100_000);
        final TestBed bed = new TestBed(prefix, workers, mtu, racks);
        final List<String> command = new ArrayList<>(List.of("bash", script().toString(), "up", "-w",
            Integer.toString(workers), "--racks", Integer.toString(racks), "--mtu", Integer.toString(mtu), "--prefix",
            prefix));
        if (outsider)
        {
            command.add("--outsider");
        }
        try
        {
            run(command, 60);
        }
        catch (final RuntimeException ex)
        {
            bed.close();
            throw ex;
        }
        return bed;
    }

    int racks()
    {
        return racks;
    }

    /** The leaf appliance namespace of rack {@code k} (multi-rack bed). */
    String leafNamespace(final int k)
    {
        return prefix + "-app" + k;
    }

    /** The spine appliance namespace (multi-rack bed). */
    String spineNamespace()
    {
        return prefix + "-spine";
    }

    /** Rack {@code k}'s switch namespace (multi-rack bed); its port {@code uplink} goes to the spine switch. */
    String rackSwitchNamespace(final int k)
    {
        return prefix + "-sw" + k;
    }

    /**
     * Bring a bed up.
     *
     * @param tag      one letter naming the test class, so the prefix is unique per class and per JVM.
     * @param outsider also create the non-member namespace.
     */
    static TestBed up(final char tag, final int workers, final int mtu, final boolean outsider)
    {
        // testbed.sh limits the prefix to 10 characters (interface names are at most 15).
        final String prefix = "t" + tag + (ProcessHandle.current().pid() % 100_000);
        final TestBed bed = new TestBed(prefix, workers, mtu);
        final List<String> command = new ArrayList<>(List.of("bash", script().toString(), "up", "-w",
            Integer.toString(workers), "--mtu", Integer.toString(mtu), "--prefix", prefix));
        if (outsider)
        {
            command.add("--outsider");
        }
        try
        {
            run(command, 60);
        }
        catch (final RuntimeException ex)
        {
            bed.close();
            throw ex;
        }
        return bed;
    }

    /**
     * Bring a flat bed up with {@code trees} appliances on its switch ({@code testbed.sh --trees}): tree 0's in the
     * usual appliance namespace, tree t's in {@link #treeApplianceNamespace}(t), each tree's RoCE steered to its
     * appliance by the tree's UDP source port.
     */
    static TestBed upTrees(final char tag, final int workers, final int mtu, final int trees)
    {
        final String prefix = "t" + tag + (ProcessHandle.current().pid() % 100_000);
        final TestBed bed = new TestBed(prefix, workers, mtu);
        try
        {
            run(List.of("bash", script().toString(), "up", "-w", Integer.toString(workers), "--mtu",
                Integer.toString(mtu), "--trees", Integer.toString(trees), "--prefix", prefix), 60);
        }
        catch (final RuntimeException ex)
        {
            bed.close();
            throw ex;
        }
        return bed;
    }

    /** Tree {@code t}'s appliance namespace on a bed brought up with trees: tree 0's is the usual one. */
    String treeApplianceNamespace(final int t)
    {
        return t == 0 ? applianceNamespace() : prefix + "-app" + t;
    }

    /**
     * Bring a flat bed up with every worker link shaped to {@code rate} (testbed.sh --rate, tbf both ways).
     */
    static TestBed upShaped(final char tag, final int workers, final int mtu, final String rate)
    {
        final String prefix = "t" + tag + (ProcessHandle.current().pid() % 100_000);
        final TestBed bed = new TestBed(prefix, workers, mtu);
        try
        {
            run(List.of("bash", script().toString(), "up", "-w", Integer.toString(workers), "--mtu",
                Integer.toString(mtu), "--rate", rate, "--prefix", prefix), 60);
        }
        catch (final RuntimeException ex)
        {
            bed.close();
            throw ex;
        }
        return bed;
    }

    /**
     * Turn the shaped links' ECN marking on (phantom queue above {@code thresholdBytes}) or off: testbed.sh ecn.
     */
    void ecn(final boolean on, final int thresholdBytes)
    {
        run(List.of("bash", script().toString(), "ecn", on ? "on" : "off", "--ecn-threshold",
            Integer.toString(thresholdBytes), "--prefix", prefix), 120);
    }

    /**
     * @return whether the bed's ECN marker can be built here (clang and libbpf's headers).
     */
    static boolean canMarkEcn()
    {
        try
        {
            final Process process = new ProcessBuilder("sh", "-c", "command -v clang").start();
            return process.waitFor(10, TimeUnit.SECONDS) && process.exitValue() == 0 &&
                Files.isRegularFile(Path.of("/usr/include/bpf/bpf_helpers.h"));
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

    static boolean isRoot()
    {
        try
        {
            for (final String line : Files.readAllLines(Path.of("/proc/self/status")))
            {
                if (line.startsWith("Uid:"))
                {
                    return line.split("\\s+")[2].equals("0");
                }
            }
        }
        catch (final IOException ignored)
        {
            // not Linux: not root for our purposes
        }
        return false;
    }

    static Path repoRoot()
    {
        final String root = System.getProperty("netreduce.repo.root");
        Path dir = root != null ? Path.of(root) : Path.of("").toAbsolutePath();
        while (dir != null && !Files.isRegularFile(dir.resolve("scripts/testbed.sh")))
        {
            dir = dir.getParent();
        }
        if (dir == null)
        {
            throw new IllegalStateException("cannot find scripts/testbed.sh above " + root);
        }
        return dir;
    }

    private static Path script()
    {
        return repoRoot().resolve("scripts/testbed.sh");
    }

    String prefix()
    {
        return prefix;
    }

    int workers()
    {
        return workers;
    }

    int mtu()
    {
        return mtu;
    }

    String workerNamespace(final int rank)
    {
        return prefix + "-w" + rank;
    }

    String applianceNamespace()
    {
        return prefix + "-app";
    }

    String switchNamespace()
    {
        return prefix + "-sw";
    }

    String outsiderNamespace()
    {
        return prefix + "-out";
    }

    static InetAddress workerIp(final int rank)
    {
        return address("10.77.0." + (rank + 1));
    }

    static InetAddress address(final String literal)
    {
        try
        {
            return InetAddress.getByName(literal);
        }
        catch (final UnknownHostException ex)
        {
            throw new IllegalArgumentException(ex);
        }
    }

    static long workerMac(final int rank)
    {
        return 0x02_77_00_00_00_01L + rank;
    }

    @Override
    public void close()
    {
        run(List.of("bash", script().toString(), "down", "--prefix", prefix), 60);
    }

    /**
     * Run a command to completion.
     *
     * @return its standard output and error.
     * @throws IllegalStateException with that output if it fails or outlives the timeout.
     */
    static String run(final List<String> command, final int timeoutSeconds)
    {
        try
        {
            final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            final byte[][] output = new byte[1][];
            final Thread reader = Thread.ofPlatform().daemon().start(() ->
            {
                try
                {
                    output[0] = process.getInputStream().readAllBytes();
                }
                catch (final IOException ex)
                {
                    output[0] = ex.toString().getBytes(StandardCharsets.UTF_8);
                }
            });
            if (!process.waitFor(timeoutSeconds, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                throw new IllegalStateException(command + " did not finish in " + timeoutSeconds + " s");
            }
            reader.join(5_000);
            final String text = output[0] == null ? "" : new String(output[0], StandardCharsets.UTF_8);
            if (process.exitValue() != 0)
            {
                throw new IllegalStateException(command + " exited " + process.exitValue() + ":\n" + text);
            }
            return text;
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("cannot run " + command, ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted running " + command, ex);
        }
    }
}
