package io.netreduce.protocol.fuzz;

import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

/**
 * A seeded mutation fuzzer's mutations, applied to inputs from a corpus: bit flips, byte overwrites with
 * interesting values, truncation and extension, block duplication and splicing with another input. Deterministic for
 * a seed, so a failing input is replayed from its seed. (Our own rather than a library: the project does not use
 * jqwik, see docs/security.md; this needs nothing but the JDK and a corpus.)
 */
public final class Mutator
{
    private static final int[] INTERESTING = { 0x00, 0x01, 0x7F, 0x80, 0xFF, 0x40, 0x20, 0x10 };
    private static final int MAX_LENGTH = 10_000;

    private Mutator()
    {
    }

    /**
     * @return a mutated copy of one corpus input (1 to 4 mutations).
     */
    public static byte[] mutate(final List<byte[]> corpus, final SplittableRandom random)
    {
        byte[] data = corpus.get(random.nextInt(corpus.size())).clone();
        final int mutations = 1 + random.nextInt(4);
        for (int m = 0; m < mutations; m++)
        {
            data = once(data, corpus, random);
        }
        return data;
    }

    private static byte[] once(final byte[] data, final List<byte[]> corpus, final SplittableRandom random)
    {
        if (data.length == 0)
        {
            return new byte[] { (byte)random.nextInt() };
        }
        final int at = random.nextInt(data.length);
        switch (random.nextInt(7))
        {
            case 0 ->
            {
                data[at] ^= (byte)(1 << random.nextInt(8));
                return data;
            }
            case 1 ->
            {
                data[at] = (byte)INTERESTING[random.nextInt(INTERESTING.length)];
                return data;
            }
            case 2 ->
            {
                data[at] = (byte)random.nextInt();
                return data;
            }
            case 3 ->
            {
                return Arrays.copyOf(data, at);
            }
            case 4 ->
            {
                return Arrays.copyOf(data, Math.min(MAX_LENGTH, data.length + 1 + random.nextInt(64)));
            }
            case 5 ->
            {
                final int length = Math.min(data.length - at, 1 + random.nextInt(16));
                final byte[] out = Arrays.copyOf(data, Math.min(MAX_LENGTH, data.length + length));
                System.arraycopy(data, at, out, at + length, Math.min(data.length - at, out.length - at - length));
                return out;
            }
            default ->
            {
                final byte[] other = corpus.get(random.nextInt(corpus.size()));
                final int cut = Math.min(at, other.length);
                final byte[] out = Arrays.copyOf(data, Math.min(MAX_LENGTH, at + (other.length - cut)));
                System.arraycopy(other, cut, out, at, out.length - at);
                return out;
            }
        }
    }

    /**
     * @return iterations for a fuzz test: {@code -Dnetreduce.fuzz.iterations} (the long run of scripts/fuzz.sh)
     *         or the short default of the test command.
     */
    public static int iterations(final int shortRun)
    {
        return Integer.getInteger("netreduce.fuzz.iterations", shortRun);
    }
}
