package io.netreduce.dataplane.bench;

import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * A/B of {@link PacketPathBenchmark}'s invocation on a noisy machine (scripts/bench-ab.sh): two builds, each in a
 * class loader of its own ({@link AbDriver}), invocations interleaved and which goes first alternating, so both see
 * the same load; prints each build's median and the median of the per-pair time ratios (after/before).
 * Arguments: payload, warm-up pairs, measured pairs, build A's class path, build B's class path.
 */
public final class AbMain
{
    public static void main(final String[] args) throws Exception
    {
        final int payload = Integer.parseInt(args[0]);
        final int warmup = Integer.parseInt(args[1]);
        final int measured = Integer.parseInt(args[2]);
        final Object[] drivers = new Object[2];
        final Method[] run = new Method[2];
        for (int v = 0; v < 2; v++)
        {
            final String[] entries = args[3 + v].split(":");
            final URL[] urls = new URL[entries.length];
            for (int i = 0; i < entries.length; i++)
            {
                urls[i] = Path.of(entries[i]).toUri().toURL();
            }
            final ClassLoader loader = new URLClassLoader(urls, ClassLoader.getPlatformClassLoader());
            final Class<?> driver = loader.loadClass("io.netreduce.dataplane.bench.AbDriver");
            drivers[v] = driver.getConstructor(int.class).newInstance(payload);
            run[v] = driver.getMethod("invocationNs");
        }
        final int frames = (int)drivers[0].getClass().getMethod("frames").invoke(drivers[0]);
        for (int i = 0; i < warmup; i++)
        {
            run[0].invoke(drivers[0]);
            run[1].invoke(drivers[1]);
        }
        final long[][] ns = new long[2][measured];
        for (int i = 0; i < measured; i++)
        {
            // Alternate which goes first, so neither always follows the other.
            final int first = i & 1;
            ns[first][i] = (long)run[first].invoke(drivers[first]);
            ns[1 - first][i] = (long)run[1 - first].invoke(drivers[1 - first]);
        }
        final double[] median = new double[2];
        for (int v = 0; v < 2; v++)
        {
            final long[] sorted = ns[v].clone();
            Arrays.sort(sorted);
            median[v] = sorted[measured / 2];
            System.out.printf("%s: median %.3f Mpps (p25 %.3f, p75 %.3f), %d invocations of %d frames%n",
                v == 0 ? "A" : "B", frames / median[v] * 1e3, frames / (double)sorted[measured * 3 / 4] * 1e3,
                frames / (double)sorted[measured / 4] * 1e3, measured, frames);
        }
        // Pairwise: each new invocation against the base one next to it.
        final double[] ratio = new double[measured];
        for (int i = 0; i < measured; i++)
        {
            ratio[i] = (double)ns[1][i] / ns[0][i];
        }
        Arrays.sort(ratio);
        System.out.printf("B/A time per invocation: median of pairs %.3f (p25 %.3f, p75 %.3f); medians %.3f%n",
            ratio[measured / 2], ratio[measured / 4], ratio[measured * 3 / 4], median[1] / median[0]);
    }
}
