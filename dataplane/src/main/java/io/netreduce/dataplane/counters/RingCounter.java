package io.netreduce.dataplane.counters;

/**
 * The counters every installed ring has. Each is an Agrona counter of type
 * {@link DataplaneCounters#RING_COUNTER_TYPE_ID} whose key holds the ring id at {@link #RING_ID_KEY_OFFSET} and
 * this kind's ordinal at {@link #KIND_KEY_OFFSET}, so readers (metrics, ctl) take both from the key and never
 * parse the label, which is for people.
 */
public enum RingCounter
{
    AGGREGATIONS_COMPLETED("aggregations completed"),
    RESULT_PACKETS("result packets");

    /** Offset of the ring id (int) in the counter's key. */
    public static final int RING_ID_KEY_OFFSET = 0;
    /** Offset of the kind's ordinal (int) in the counter's key. */
    public static final int KIND_KEY_OFFSET = 4;

    private static final RingCounter[] VALUES = values();

    private final String what;

    RingCounter(final String what)
    {
        this.what = what;
    }

    /**
     * @return what the counter counts, lower case, e.g. "aggregations completed".
     */
    public String what()
    {
        return what;
    }

    /**
     * @return the machine name: lower case, words joined by '_', e.g. "aggregations_completed".
     */
    public String key()
    {
        return name().toLowerCase(java.util.Locale.ROOT);
    }

    /**
     * @return the kind with that ordinal, as stored in a counter key.
     * @throws IllegalArgumentException if there is none.
     */
    public static RingCounter of(final int ordinal)
    {
        if (ordinal < 0 || ordinal >= VALUES.length)
        {
            throw new IllegalArgumentException("no ring counter kind " + ordinal);
        }
        return VALUES[ordinal];
    }
}
