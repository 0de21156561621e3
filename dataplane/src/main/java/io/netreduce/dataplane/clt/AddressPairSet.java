package io.netreduce.dataplane.clt;

/**
 * A counted set of (srcIP, dstIP) pairs: the ring edges (rank r → rank r+1) of all installed rings. A packet
 * of an unknown connection on a ring edge may be ring traffic whose first packet has not been seen, so it must
 * not reach the receiver unaggregated; anywhere else it is somebody else's traffic and passes through.
 * <p>
 * Open addressing over primitive arrays; written only by the dataplane thread on control commands.
 */
public final class AddressPairSet
{
    private static final int KEY_LONGS = 4;

    private final int mask;
    private final long[] keys;
    private final int[] counts;
    private int size;

    public AddressPairSet(final int maxPairs)
    {
        final int capacity = Integer.highestOneBit(Math.max(4, maxPairs * 2) - 1) << 1;
        mask = capacity - 1;
        keys = new long[capacity * KEY_LONGS];
        counts = new int[capacity];
    }

    /**
     * @return whether the connection's address pair (QP aside) is in the set.
     */
    public boolean contains(final FlowKey key)
    {
        return find(key.srcHigh(), key.srcLow(), key.dstHigh(), key.dstLow()) >= 0;
    }

    public boolean contains(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow)
    {
        return find(srcHigh, srcLow, dstHigh, dstLow) >= 0;
    }

    /**
     * Add one reference to the pair.
     *
     * @throws IllegalStateException when the set is full.
     */
    public void add(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow)
    {
        final int found = find(srcHigh, srcLow, dstHigh, dstLow);
        if (found >= 0)
        {
            counts[found]++;
            return;
        }
        if (size * 2 >= mask + 1)
        {
            throw new IllegalStateException("ring edge table full (" + size + " pairs)");
        }
        int slot = home(srcHigh, srcLow, dstHigh, dstLow);
        while (counts[slot] != 0)
        {
            slot = (slot + 1) & mask;
        }
        final int k = slot * KEY_LONGS;
        keys[k] = srcHigh;
        keys[k + 1] = srcLow;
        keys[k + 2] = dstHigh;
        keys[k + 3] = dstLow;
        counts[slot] = 1;
        size++;
    }

    /**
     * Drop one reference; the pair leaves the set with its last reference.
     */
    public void remove(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow)
    {
        final int found = find(srcHigh, srcLow, dstHigh, dstLow);
        if (found < 0)
        {
            return;
        }
        if (--counts[found] > 0)
        {
            return;
        }
        size--;
        int hole = found;
        int next = (hole + 1) & mask;
        while (counts[next] != 0)
        {
            final int k = next * KEY_LONGS;
            final int home = home(keys[k], keys[k + 1], keys[k + 2], keys[k + 3]);
            final boolean homeAfterHole = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
            if (!homeAfterHole)
            {
                System.arraycopy(keys, k, keys, hole * KEY_LONGS, KEY_LONGS);
                counts[hole] = counts[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        counts[hole] = 0;
    }

    public int size()
    {
        return size;
    }

    private int find(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow)
    {
        int slot = home(srcHigh, srcLow, dstHigh, dstLow);
        while (counts[slot] != 0)
        {
            final int k = slot * KEY_LONGS;
            if (keys[k] == srcHigh && keys[k + 1] == srcLow && keys[k + 2] == dstHigh && keys[k + 3] == dstLow)
            {
                return slot;
            }
            slot = (slot + 1) & mask;
        }
        return -1;
    }

    private int home(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow)
    {
        return (int)IpKey.hash(srcHigh, srcLow, dstHigh, dstLow, 0x5EED) & mask;
    }
}
