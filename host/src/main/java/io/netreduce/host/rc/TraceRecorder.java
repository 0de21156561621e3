package io.netreduce.host.rc;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.util.Locale;

/**
 * A per-call timeline of what a rank's transport did, for explaining a slow call: when each message left and its
 * result came back, and each retransmission, with what triggered it (a timeout or a NAK). Events go into
 * preallocated arrays (no allocation, no logging on the endpoint's thread) and are written out after the run. When
 * the arrays are full further events are counted, not kept.
 */
public final class TraceRecorder
{
    public static final int MESSAGE_POSTED = 0;
    public static final int RESULT_RECEIVED = 1;
    public static final int TIMEOUT = 2;
    public static final int NAK = 3;
    public static final int RNR_NAK = 4;
    public static final int CALL_STARTED = 5;
    public static final int CALL_DONE = 6;

    private static final String[] NAMES = {
        "message_posted", "result_received", "timeout_go_back", "nak_go_back", "rnr_nak", "call_started", "call_done" };

    /** A recorder that records nothing: the default of every endpoint. */
    public static final TraceRecorder OFF = new TraceRecorder(0);

    private final long[] times;
    private final int[] kinds;
    private final long[] values;
    private final int[] qpns;
    private int size;
    private long lost;

    /**
     * @param capacity events kept at most.
     */
    public TraceRecorder(final int capacity)
    {
        times = new long[capacity];
        kinds = new int[capacity];
        values = new long[capacity];
        qpns = new int[capacity];
    }

    /**
     * Record one event (endpoint thread only).
     *
     * @param value the message index (message and result events) or the PSN gone back to (retransmissions).
     */
    public void record(final long nowNs, final int kind, final int qpn, final long value)
    {
        if (times.length == 0)
        {
            return;
        }
        if (size == times.length)
        {
            lost++;
            return;
        }
        times[size] = nowNs;
        kinds[size] = kind;
        qpns[size] = qpn;
        values[size] = value;
        size++;
    }

    public int size()
    {
        return size;
    }

    public int kind(final int index)
    {
        return kinds[index];
    }

    /**
     * Write the events as CSV: {@code time_us,event,qpn,value} (time relative to the first event), then the count
     * of events not kept.
     */
    public void writeCsv(final Writer out) throws IOException
    {
        final PrintWriter csv = new PrintWriter(out);
        csv.println("time_us,event,qpn,value");
        final long origin = size > 0 ? times[0] : 0;
        for (int i = 0; i < size; i++)
        {
            csv.printf(Locale.ROOT, "%.1f,%s,%d,%d%n", (times[i] - origin) / 1e3, NAMES[kinds[i]], qpns[i], values[i]);
        }
        if (lost > 0)
        {
            csv.printf(Locale.ROOT, "# %d more events not kept (trace full)%n", lost);
        }
        csv.flush();
    }
}
