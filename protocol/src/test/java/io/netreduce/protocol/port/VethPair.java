package io.netreduce.protocol.port;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Test fixture: two fresh network namespaces joined by a veth pair ({@code va} in the first, {@code vb} in the
 * second), IPv6 off so the kernel sends nothing on its own, addresses 10.77.0.1/24 and 10.77.0.2/24.
 * Closing deletes both namespaces, which deletes the veth pair with them.
 */
final class VethPair implements AutoCloseable
{
    static final String DEVICE_A = "va";
    static final String DEVICE_B = "vb";
    static final String ADDRESS_A = "10.77.0.1";
    static final String ADDRESS_B = "10.77.0.2";

    final String namespaceA;
    final String namespaceB;

    VethPair(final String tag, final int mtu)
    {
        final long pid = ProcessHandle.current().pid();
        namespaceA = "nrt-" + tag + "a-" + pid;
        namespaceB = "nrt-" + tag + "b-" + pid;
        try
        {
            run("ip", "netns", "add", namespaceA);
            run("ip", "netns", "add", namespaceB);
            for (final String ns : List.of(namespaceA, namespaceB))
            {
                run("ip", "netns", "exec", ns, "sysctl", "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1");
            }
            run("ip", "-n", namespaceA, "link", "add", DEVICE_A, "mtu", Integer.toString(mtu),
                "type", "veth", "peer", "name", DEVICE_B, "mtu", Integer.toString(mtu), "netns", namespaceB);
            run("ip", "-n", namespaceA, "addr", "add", ADDRESS_A + "/24", "dev", DEVICE_A);
            run("ip", "-n", namespaceB, "addr", "add", ADDRESS_B + "/24", "dev", DEVICE_B);
            run("ip", "-n", namespaceA, "link", "set", DEVICE_A, "up");
            run("ip", "-n", namespaceB, "link", "set", DEVICE_B, "up");
        }
        catch (final RuntimeException ex)
        {
            close();
            throw ex;
        }
    }

    static boolean isRoot()
    {
        return "root".equals(System.getProperty("user.name"));
    }

    static String run(final String... command)
    {
        try
        {
            final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!process.waitFor(10, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                throw new IllegalStateException("timed out: " + String.join(" ", command));
            }
            if (process.exitValue() != 0)
            {
                throw new IllegalStateException(String.join(" ", command) + " failed: " + output);
            }
            return output;
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException(String.join(" ", command), ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(ex);
        }
    }

    @Override
    public void close()
    {
        final List<RuntimeException> failures = new ArrayList<>();
        for (final String ns : List.of(namespaceA, namespaceB))
        {
            try
            {
                if (run("ip", "netns", "list").contains(ns))
                {
                    run("ip", "netns", "del", ns);
                }
            }
            catch (final RuntimeException ex)
            {
                failures.add(ex);
            }
        }
        if (!failures.isEmpty())
        {
            throw failures.getFirst();
        }
    }
}
