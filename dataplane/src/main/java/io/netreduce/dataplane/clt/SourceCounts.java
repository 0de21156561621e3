package io.netreduce.dataplane.clt;

/**
 * A count per source address (two longs, as {@link IpKey} keeps them): the CLT's foreign entries per source.
 * Open addressing with linear probing over primitive arrays; a source whose count falls to 0 leaves the map by
 * backward-shift deletion, so there are no tombstones. Holds at most {@code maxSources} sources (at load 1/2 or
 * less); a new source beyond them is not counted (its count reads 0). Single-threaded, allocation-free after
 * construction.
 */
final class SourceCounts
{
    private final int mask;
    private final int maxSources;
    private final long[] keys;
    private final int[] counts;
    private int size;

    SourceCounts(final int maxSources)
    {
        final int capacity = Integer.highestOneBit(Math.max(4, maxSources * 2) - 1) << 1;
        this.maxSources = maxSources;
        mask = capacity - 1;
        keys = new long[capacity * 2];
        counts = new int[capacity];
    }

    private int home(final long high, final long low)
    {
        long h = high * 0x9E37_79B9_7F4A_7C15L ^ low * 0xC2B2_AE3D_27D4_EB4FL;
        h ^= h >>> 29;
        return (int)h & mask;
    }

    int get(final long high, final long low)
    {
        for (int slot = home(high, low); counts[slot] != 0; slot = (slot + 1) & mask)
        {
            if (keys[slot * 2] == high && keys[slot * 2 + 1] == low)
            {
                return counts[slot];
            }
        }
        return 0;
    }

    /**
     * Add {@code delta} (+1 or -1) to the source's count; a count of 0 removes the source.
     */
    void add(final long high, final long low, final int delta)
    {
        int slot = home(high, low);
        while (counts[slot] != 0 && (keys[slot * 2] != high || keys[slot * 2 + 1] != low))
        {
            slot = (slot + 1) & mask;
        }
        if (counts[slot] == 0)
        {
            if (delta <= 0 || size >= maxSources)
            {
                return;
            }
            keys[slot * 2] = high;
            keys[slot * 2 + 1] = low;
            size++;
        }
        counts[slot] += delta;
        if (counts[slot] <= 0)
        {
            remove(slot);
        }
    }

    private void remove(final int slot)
    {
        int hole = slot;
        int next = (hole + 1) & mask;
        while (counts[next] != 0)
        {
            final int home = home(keys[next * 2], keys[next * 2 + 1]);
            final boolean homeAfterHole = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
            if (!homeAfterHole)
            {
                keys[hole * 2] = keys[next * 2];
                keys[hole * 2 + 1] = keys[next * 2 + 1];
                counts[hole] = counts[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        keys[hole * 2] = 0;
        keys[hole * 2 + 1] = 0;
        counts[hole] = 0;
        size--;
    }
}
