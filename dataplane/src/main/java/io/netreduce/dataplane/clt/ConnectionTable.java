package io.netreduce.dataplane.clt;

/**
 * The Connection Lookup Table (paper 000, §3.2): (srcIP, dstIP, dstQP) → (ring, rank, MsgID, PSN0).
 * <p>
 * First packets (those whose payload starts with the INA header) insert or update an entry; every other
 * packet of the connection reads it to find its message and its position in the message. Besides ring
 * connections the table remembers <em>foreign</em> connections: RDMA WRITE connections between two ring
 * members that are not ring traffic (their first packet carried no InetTag, or a tag for a ring that is not
 * installed), so that their middle packets can be told apart from ring packets whose connection is unknown.
 * <p>
 * Foreign entries are whatever any host on the switch sends on a ring edge, so they get a share of the table of their
 * own: at most {@code foreignLimit} of them in all and at most {@code foreignPerSource} with one source address
 * ({@link #insert} answers {@link #FOREIGN_LIMIT} or {@link #SOURCE_LIMIT} beyond it). Ring and down entries are
 * never refused for foreign ones: at least {@code maxEntries - foreignLimit} entries are theirs, and when the table
 * is full {@link #evict} frees a foreign entry or a stale one for them.
 * <p>
 * Open addressing with linear probing over primitive arrays, power-of-two capacity, load capped at 3/4;
 * deletion shifts the following run back so there are no tombstones. Slot indices are stable while no entry
 * is removed; removals happen on control commands and in the expiry sweep, between batches, and in
 * {@link #evict}, which the packet path calls only before an insert, while it holds no slot. Owned by the
 * dataplane thread.
 */
public final class ConnectionTable
{
    public static final int KIND_EMPTY = 0;
    public static final int KIND_RING = 1;
    public static final int KIND_FOREIGN = 2;
    /**
     * A leaf's entering cross-rack connection: it carries the spine's results down (paper 000, §3.3, the parent
     * connection of the multicast), placed by PSN like a ring connection; its rank is unused.
     */
    public static final int KIND_DOWN = 3;

    /** {@link #insert}'s answer when the table holds {@link #limit()} entries. */
    public static final int FULL = -1;
    /** {@link #insert}'s answer for a foreign entry when foreign entries hold their whole share. */
    public static final int FOREIGN_LIMIT = -2;
    /** {@link #insert}'s answer for a foreign entry when its source address holds its whole share. */
    public static final int SOURCE_LIMIT = -3;

    /**
     * Which ring entries are stale (a connection its rank has replaced), so that {@link #evict} may take them:
     * the ring table knows, the CLT does not.
     */
    @FunctionalInterface
    public interface StaleTest
    {
        boolean isStale(int ring, int rank, int generation);
    }

    private static final int KEY_LONGS = 5;
    private static final long USED = 1L << 32;

    private final int capacity;
    private final int mask;
    private final int limit;
    private final long[] keys;
    private final byte[] kinds;
    private final short[] rings;
    private final byte[] ranks;
    private final short[] msgIds;
    private final int[] psn0s;
    private final int[] generations;
    /** When a foreign entry last saw a packet (ring entries: when inserted or updated), for ageing. */
    private final long[] lastSeen;
    private int size;
    private int sweepCursor;
    private int staleCursor;
    private int evictCursor;
    private final int foreignLimit;
    private final int foreignPerSource;
    private int foreignCount;
    /**
     * Foreign entries per source address. Inserts keep foreign entries, and so their sources, within
     * {@code foreignLimit}; only ring entries turned foreign ({@link #setForeign}) can exceed it, and a source of
     * those beyond the map's room is not counted, which {@link #insert} never needs: foreign entries are then over
     * their total share.
     */
    private final SourceCounts sources;

    /**
     * A table whose foreign entries may take all of it.
     *
     * @param maxEntries entries the table must hold; the capacity is the next power of two of 4/3 of that.
     */
    public ConnectionTable(final int maxEntries)
    {
        this(maxEntries, maxEntries, maxEntries);
    }

    /**
     * @param maxEntries       entries the table must hold; the capacity is the next power of two of 4/3 of that.
     * @param foreignLimit     foreign entries it holds at most, 1..maxEntries.
     * @param foreignPerSource foreign entries with one source address it holds at most, 1..foreignLimit.
     */
    public ConnectionTable(final int maxEntries, final int foreignLimit, final int foreignPerSource)
    {
        if (maxEntries < 1 || maxEntries > (1 << 28))
        {
            throw new IllegalArgumentException("CLT size " + maxEntries + " is not in 1..2^28");
        }
        if (foreignLimit < 1 || foreignLimit > maxEntries || foreignPerSource < 1 || foreignPerSource > foreignLimit)
        {
            throw new IllegalArgumentException("CLT foreign share " + foreignLimit + " (per source " +
                foreignPerSource + ") is not in 1.." + maxEntries + " (per source 1..the share)");
        }
        this.foreignLimit = foreignLimit;
        this.foreignPerSource = foreignPerSource;
        this.sources = new SourceCounts(foreignLimit);
        capacity = Integer.highestOneBit(Math.max(4, (maxEntries * 4 + 2) / 3) - 1) << 1;
        mask = capacity - 1;
        limit = maxEntries;
        keys = new long[capacity * KEY_LONGS];
        kinds = new byte[capacity];
        rings = new short[capacity];
        ranks = new byte[capacity];
        msgIds = new short[capacity];
        psn0s = new int[capacity];
        generations = new int[capacity];
        lastSeen = new long[capacity];
    }

    public int capacity()
    {
        return capacity;
    }

    /**
     * @return the number of entries the table accepts before {@link #insert} reports it full.
     */
    public int limit()
    {
        return limit;
    }

    public int size()
    {
        return size;
    }

    /**
     * @return foreign entries held.
     */
    public int foreignCount()
    {
        return foreignCount;
    }

    /**
     * @return foreign entries held with this source address.
     */
    public int foreignCount(final long srcHigh, final long srcLow)
    {
        return sources.get(srcHigh, srcLow);
    }

    public int foreignLimit()
    {
        return foreignLimit;
    }

    public int foreignPerSource()
    {
        return foreignPerSource;
    }

    /**
     * @return the slot holding the connection, or -1.
     */
    public int find(final FlowKey key)
    {
        return find(key.srcHigh(), key.srcLow(), key.dstHigh(), key.dstLow(), key.qp());
    }

    /**
     * Insert a connection that is not in the table.
     *
     * @return the new entry's slot, or {@link #FULL}, {@link #FOREIGN_LIMIT}, {@link #SOURCE_LIMIT}.
     */
    public int insert(final FlowKey key, final int kind)
    {
        return insert(key.srcHigh(), key.srcLow(), key.dstHigh(), key.dstLow(), key.qp(), kind);
    }

    /**
     * @return the slot holding the key, or -1.
     */
    public int find(final long srcHigh, final long srcLow, final long dstHigh, final long dstLow, final int qp)
    {
        final long qpKey = USED | (qp & 0xFFFF_FFFFL);
        int slot = (int)IpKey.hash(srcHigh, srcLow, dstHigh, dstLow, qpKey) & mask;
        while (true)
        {
            final int k = slot * KEY_LONGS;
            final long stored = keys[k + 4];
            if (stored == 0)
            {
                return -1;
            }
            if (stored == qpKey && keys[k] == srcHigh && keys[k + 1] == srcLow && keys[k + 2] == dstHigh &&
                keys[k + 3] == dstLow)
            {
                return slot;
            }
            slot = (slot + 1) & mask;
        }
    }

    /**
     * Insert a key that is not in the table.
     *
     * @return the new entry's slot, or {@link #FULL} when the table is full, or, for a foreign entry,
     *         {@link #FOREIGN_LIMIT} or {@link #SOURCE_LIMIT} when foreign entries or those of its source address
     *         hold their share.
     */
    public int insert(
        final long srcHigh, final long srcLow, final long dstHigh, final long dstLow, final int qp, final int kind)
    {
        if (kind == KIND_FOREIGN)
        {
            if (foreignCount >= foreignLimit)
            {
                return FOREIGN_LIMIT;
            }
            if (sources.get(srcHigh, srcLow) >= foreignPerSource)
            {
                return SOURCE_LIMIT;
            }
        }
        if (size >= limit)
        {
            return FULL;
        }
        final long qpKey = USED | (qp & 0xFFFF_FFFFL);
        int slot = (int)IpKey.hash(srcHigh, srcLow, dstHigh, dstLow, qpKey) & mask;
        while (keys[slot * KEY_LONGS + 4] != 0)
        {
            slot = (slot + 1) & mask;
        }
        final int k = slot * KEY_LONGS;
        keys[k] = srcHigh;
        keys[k + 1] = srcLow;
        keys[k + 2] = dstHigh;
        keys[k + 3] = dstLow;
        keys[k + 4] = qpKey;
        kinds[slot] = (byte)kind;
        rings[slot] = 0;
        ranks[slot] = 0;
        msgIds[slot] = 0;
        psn0s[slot] = 0;
        generations[slot] = 0;
        size++;
        if (kind == KIND_FOREIGN)
        {
            countForeign(slot, 1);
        }
        return slot;
    }

    private void countForeign(final int slot, final int delta)
    {
        foreignCount += delta;
        sources.add(keys[slot * KEY_LONGS], keys[slot * KEY_LONGS + 1], delta);
    }

    private void setKind(final int slot, final int kind)
    {
        final boolean wasForeign = kinds[slot] == KIND_FOREIGN;
        if (wasForeign != (kind == KIND_FOREIGN))
        {
            countForeign(slot, wasForeign ? -1 : 1);
        }
        kinds[slot] = (byte)kind;
    }

    /**
     * Make the entry at {@code slot} a ring connection's entry.
     */
    public void setRing(
        final int slot, final int ring, final int rank, final int msgId, final int psn0, final int generation)
    {
        setKind(slot, KIND_RING);
        rings[slot] = (short)ring;
        ranks[slot] = (byte)rank;
        msgIds[slot] = (short)msgId;
        psn0s[slot] = psn0;
        generations[slot] = generation;
    }

    /**
     * Make the entry at {@code slot} a leaf's entering cross-rack connection, its newest message the one given.
     */
    public void setDown(final int slot, final int ring, final int msgId, final int psn0)
    {
        setKind(slot, KIND_DOWN);
        rings[slot] = (short)ring;
        ranks[slot] = 0;
        msgIds[slot] = (short)msgId;
        psn0s[slot] = psn0;
        generations[slot] = 0;
    }

    /**
     * Advance the entry to a newer message.
     */
    public void setLatest(final int slot, final int msgId, final int psn0)
    {
        msgIds[slot] = (short)msgId;
        psn0s[slot] = psn0;
    }

    /**
     * Make an entry a foreign one. The entry is held already, so this is never refused, even beyond the foreign
     * share (which it then exceeds by entries that were ring entries).
     */
    public void setForeign(final int slot)
    {
        setKind(slot, KIND_FOREIGN);
    }

    public int kind(final int slot)
    {
        return kinds[slot];
    }

    public int ring(final int slot)
    {
        return rings[slot];
    }

    public int rank(final int slot)
    {
        return ranks[slot] & 0xFF;
    }

    public int msgId(final int slot)
    {
        return msgIds[slot];
    }

    public int psn0(final int slot)
    {
        return psn0s[slot];
    }

    public int generation(final int slot)
    {
        return generations[slot];
    }

    public long srcHigh(final int slot)
    {
        return keys[slot * KEY_LONGS];
    }

    public long srcLow(final int slot)
    {
        return keys[slot * KEY_LONGS + 1];
    }

    public long dstHigh(final int slot)
    {
        return keys[slot * KEY_LONGS + 2];
    }

    public long dstLow(final int slot)
    {
        return keys[slot * KEY_LONGS + 3];
    }

    public int qp(final int slot)
    {
        return (int)keys[slot * KEY_LONGS + 4];
    }

    public boolean isUsed(final int slot)
    {
        return keys[slot * KEY_LONGS + 4] != 0;
    }

    /**
     * Remove the entry at {@code slot}, shifting back the entries of the probe run that follows it.
     */
    public void removeAt(final int slot)
    {
        if (kinds[slot] == KIND_FOREIGN)
        {
            countForeign(slot, -1);
        }
        int hole = slot;
        int next = (hole + 1) & mask;
        while (keys[next * KEY_LONGS + 4] != 0)
        {
            final int k = next * KEY_LONGS;
            final int home = (int)IpKey.hash(keys[k], keys[k + 1], keys[k + 2], keys[k + 3], keys[k + 4]) & mask;
            // Move the entry into the hole unless its home lies cyclically in (hole, next].
            final boolean homeAfterHole = hole <= next ? (home > hole && home <= next) : (home > hole || home <= next);
            if (!homeAfterHole)
            {
                move(next, hole);
                hole = next;
            }
            next = (next + 1) & mask;
        }
        final int k = hole * KEY_LONGS;
        for (int i = 0; i < KEY_LONGS; i++)
        {
            keys[k + i] = 0;
        }
        kinds[hole] = KIND_EMPTY;
        size--;
    }

    /**
     * Remove every ring entry of {@code ring} (control path).
     *
     * @return entries removed.
     */
    public int removeRing(final int ring)
    {
        int removed = 0;
        boolean again = true;
        while (again)
        {
            again = false;
            for (int slot = 0; slot < capacity; slot++)
            {
                if (isUsed(slot) && (kinds[slot] == KIND_RING || kinds[slot] == KIND_DOWN) && rings[slot] == ring)
                {
                    removeAt(slot);
                    removed++;
                    again = true;
                }
            }
        }
        return removed;
    }

    /**
     * A packet of the entry at {@code slot} was seen at {@code nowNs}.
     */
    public void touch(final int slot, final long nowNs)
    {
        lastSeen[slot] = nowNs;
    }

    /**
     * Remove foreign entries that have seen no packet for {@code idleNs}, looking at no more than
     * {@code maxSlots} slots from where the last sweep stopped (so a sweep is bounded work on the dataplane
     * thread). Ring entries are left alone: they are the rings' state, removed with their ring.
     *
     * @return entries removed.
     */
    public int expireForeign(final long nowNs, final long idleNs, final int maxSlots)
    {
        int removed = 0;
        for (int i = 0; i < maxSlots && size > 0; i++)
        {
            final int slot = sweepCursor;
            sweepCursor = (sweepCursor + 1) & mask;
            if (isUsed(slot) && kinds[slot] == KIND_FOREIGN && nowNs - lastSeen[slot] > idleNs)
            {
                removeAt(slot);
                removed++;
                // Backward-shift deletion may have moved a later entry into this slot: look at it again.
                sweepCursor = slot;
            }
        }
        return removed;
    }

    /**
     * Remove ring entries the {@code stale} test says their rank has replaced and that have seen no packet for
     * {@code idleNs}, looking at no more than {@code maxSlots} slots from where the last such sweep stopped. A
     * client that opens new queue pairs for every call (the standalone pyverbs client does) would otherwise leave W
     * entries per call until its ring is removed; the idle time keeps an entry whose retransmissions may still come.
     *
     * @return entries removed.
     */
    public int expireStale(final long nowNs, final long idleNs, final int maxSlots, final StaleTest stale)
    {
        int removed = 0;
        for (int i = 0; i < maxSlots && size > 0; i++)
        {
            final int slot = staleCursor;
            staleCursor = (staleCursor + 1) & mask;
            if (isUsed(slot) && kinds[slot] == KIND_RING && nowNs - lastSeen[slot] > idleNs &&
                stale.isStale(rings[slot], ranks[slot] & 0xFF, generations[slot]))
            {
                removeAt(slot);
                removed++;
                staleCursor = slot; // backward-shift deletion may have moved a later entry here
            }
        }
        return removed;
    }

    /**
     * Free one entry for a ring or down connection when the table is full: a foreign entry, or a ring entry the
     * {@code stale} test says its rank has replaced, the first found from where the last eviction stopped (at
     * most one pass over the table, and only when it is full). The caller must hold no slot: backward-shift
     * deletion moves entries.
     *
     * @return whether an entry was removed.
     */
    public boolean evict(final StaleTest stale)
    {
        for (int i = 0; i < capacity; i++)
        {
            final int slot = evictCursor;
            evictCursor = (evictCursor + 1) & mask;
            if (!isUsed(slot))
            {
                continue;
            }
            if (kinds[slot] == KIND_FOREIGN ||
                (kinds[slot] == KIND_RING && stale.isStale(rings[slot], ranks[slot] & 0xFF, generations[slot])))
            {
                removeAt(slot);
                evictCursor = slot;
                return true;
            }
        }
        return false;
    }

    private void move(final int from, final int to)
    {
        System.arraycopy(keys, from * KEY_LONGS, keys, to * KEY_LONGS, KEY_LONGS);
        kinds[to] = kinds[from];
        rings[to] = rings[from];
        ranks[to] = ranks[from];
        msgIds[to] = msgIds[from];
        psn0s[to] = psn0s[from];
        generations[to] = generations[from];
        lastSeen[to] = lastSeen[from];
    }
}
