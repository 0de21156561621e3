package io.netreduce.dataplane.counters;

import org.agrona.BitUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersManager;
import org.agrona.concurrent.status.CountersReader;

import java.nio.ByteBuffer;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The dataplane's counters in off-heap Agrona counter buffers: written by the dataplane thread with release
 * stores, readable by any thread through {@link #reader()} or {@link #get(DataplaneCounter)}.
 * <p>
 * Fixed counters are allocated at construction, one per {@link DataplaneCounter}; per-ring counters are
 * allocated when a ring is installed and freed when it is removed (type id {@link #RING_COUNTER_TYPE_ID},
 * key = ring id).
 */
public final class DataplaneCounters
{
    public static final int DATAPLANE_COUNTER_TYPE_ID = 1001;
    public static final int RING_COUNTER_TYPE_ID = 1002;
    private static final int MAX_COUNTERS = 1024;

    private final CountersManager manager;
    private final AtomicCounter[] fixed;

    public DataplaneCounters()
    {
        final UnsafeBuffer meta = new UnsafeBuffer(ByteBuffer.allocateDirect(
            MAX_COUNTERS * CountersReader.METADATA_LENGTH));
        final UnsafeBuffer values = new UnsafeBuffer(ByteBuffer.allocateDirect(
            BitUtil.align(MAX_COUNTERS * CountersReader.COUNTER_LENGTH, 4096)));
        manager = new CountersManager(meta, values);
        final DataplaneCounter[] all = DataplaneCounter.values();
        fixed = new AtomicCounter[all.length];
        for (final DataplaneCounter counter : all)
        {
            fixed[counter.ordinal()] = manager.newCounter(counter.label(), DATAPLANE_COUNTER_TYPE_ID);
        }
    }

    /**
     * @return the counter for the dataplane thread to increment.
     */
    public AtomicCounter counter(final DataplaneCounter counter)
    {
        return fixed[counter.ordinal()];
    }

    /**
     * Count one event (dataplane thread only).
     */
    public void increment(final DataplaneCounter counter)
    {
        fixed[counter.ordinal()].incrementRelease();
    }

    /**
     * @return the current value (any thread).
     */
    public long get(final DataplaneCounter counter)
    {
        return manager.getCounterValue(fixed[counter.ordinal()].id());
    }

    /**
     * @return the frames dropped, whatever the reason: the sum of every {@link DataplaneCounter#isDrop()} counter
     * (any thread).
     */
    public long drops()
    {
        long drops = 0;
        for (final DataplaneCounter counter : DataplaneCounter.values())
        {
            if (counter.isDrop())
            {
                drops += get(counter);
            }
        }
        return drops;
    }

    /**
     * Allocate a counter for a ring (dataplane thread, on install); its key holds the ring id and the kind
     * (see {@link RingCounter}).
     */
    public AtomicCounter newRingCounter(final int ringId, final RingCounter kind)
    {
        return manager.newCounter("ring " + ringId + " " + kind.what(), RING_COUNTER_TYPE_ID,
            key ->
            {
                key.putInt(RingCounter.RING_ID_KEY_OFFSET, ringId);
                key.putInt(RingCounter.KIND_KEY_OFFSET, kind.ordinal());
            });
    }

    /**
     * @return a reader over the counter buffers (any thread).
     */
    public CountersReader reader()
    {
        return manager;
    }

    /**
     * @return every allocated counter's label and value (any thread; allocates).
     */
    public Map<String, Long> snapshot()
    {
        final Map<String, Long> values = new LinkedHashMap<>();
        manager.forEach((counterId, typeId, keyBuffer, label) -> values.put(label, manager.getCounterValue(counterId)));
        return values;
    }
}
