package io.netreduce.host.allreduce;

/**
 * A NetReduce worker's window, in messages, adapted to the ECN marks its results carry: PANAMA's congestion control
 * (MLSys '22, §4.2, Fig. 5), which is DCTCP's law with results as implicit acknowledgements.
 * <p>
 * Each result is an implicit acknowledgement: the appliance sends a position's result only when every rank's packet
 * is in, and ORs the ECN fields of those packets into it, so a mark anywhere on the ring's paths reaches every rank,
 * and every rank sees the same marks on the same results (up to marks on its own last hop). The window is observed
 * over windows of results: when as many results as the window held at the observation's start have arrived, with F
 * the fraction of their packets that were marked (PANAMA counts marked packets, as DCTCP counts marked ACKs),
 * <pre>
 *   alpha  &lt;- (1 - g) alpha + g F
 *   window &lt;- window (1 - alpha / 2)   if any was marked (at least the floor)
 *   window &lt;- window + 1               if none was       (at most the cap)
 * </pre>
 * The cap is the ring's configured window N (PANAMA's {@code wnd_cap}: the appliance holds 2N messages of aggregators
 * per ring, and a rank must never run more than N ahead of a result), so a worker never exceeds what the appliance
 * was installed with. The window starts at the cap (no slow start: without marks, a worker runs exactly as one
 * without congestion control) and alpha at 1, as DCTCP's does (the first marked window halves the window). A
 * result of MsgLen packets with m of them marked CE adds m / MsgLen to the window's marked count; until
 * 2026-11-27 a result counted whole when any of its packets was marked, which overstated F up to MsgLen-fold and
 * cut the window deeper than the marks asked (docs/performance.md, "Shared links"). The floor is
 * {@link CongestionControl#minWindow()} (1 by default, as PANAMA states the law; Linux's DCTCP keeps 2 segments),
 * held at the cap when it is above it.
 * <p>
 * Disabled ({@link CongestionControl#OFF}), the window stays at the cap and results and marks are only counted.
 * Single-threaded; allocation-free.
 */
public final class CongestionWindow
{
    private final int cap;
    private final double gain;
    private final boolean enabled;
    private final int floor;
    private double window;
    private double alpha = 1.0;
    private int observation;
    private int observed;
    private double observedMarked;
    private long results;
    private long markedResults;
    private long decreases;
    private long increases;
    private int minWindow;
    private int minWindowSinceTaken;

    /**
     * @param cap the ring's configured window N, at least 1.
     */
    public CongestionWindow(final int cap, final CongestionControl control)
    {
        if (cap < 1)
        {
            throw new IllegalArgumentException("window cap must be at least 1: " + cap);
        }
        this.cap = cap;
        this.gain = control.gain();
        this.enabled = control.enabled();
        this.floor = Math.min(cap, control.minWindow());
        this.window = cap;
        this.observation = cap;
        this.minWindow = cap;
        this.minWindowSinceTaken = cap;
    }

    /**
     * @return messages that may be in flight (posted, result not in yet): floor..cap.
     */
    public int window()
    {
        return enabled ? Math.max(floor, (int)window) : cap;
    }

    /**
     * A result arrived: one implicit acknowledgement.
     *
     * @param marked whether a packet of it arrived with ECN = CE.
     */
    public void onResult(final boolean marked)
    {
        onResult(marked ? 1 : 0, 1);
    }

    /**
     * A result arrived: one implicit acknowledgement of a message of {@code packets} packets, {@code markedPackets}
     * of which arrived with ECN = CE.
     *
     * @param markedPackets packets of the result that arrived marked, 0..packets.
     * @param packets       packets the result came in, at least 1 (a count of 0 is taken as 1).
     */
    public void onResult(final int markedPackets, final int packets)
    {
        final boolean marked = markedPackets > 0;
        results++;
        if (marked)
        {
            markedResults++;
        }
        if (!enabled)
        {
            return;
        }
        observed++;
        if (marked)
        {
            observedMarked += Math.min(1.0, (double)markedPackets / Math.max(1, packets));
        }
        if (observed < observation)
        {
            return;
        }
        alpha = (1 - gain) * alpha + gain * observedMarked / observed;
        if (observedMarked == 0.0)
        {
            if (window < cap)
            {
                window = Math.min(cap, window + 1);
                increases++;
            }
        }
        else
        {
            window = Math.max(floor, window * (1 - alpha / 2));
            decreases++;
        }
        observation = window();
        minWindow = Math.min(minWindow, observation);
        minWindowSinceTaken = Math.min(minWindowSinceTaken, observation);
        observed = 0;
        observedMarked = 0.0;
    }

    public boolean enabled()
    {
        return enabled;
    }

    /**
     * @return the ring's configured window N, the most this window grows to.
     */
    public int cap()
    {
        return cap;
    }

    /**
     * @return the window before rounding down (at least the floor, at most the cap).
     */
    public double exactWindow()
    {
        return window;
    }

    /**
     * @return the moving average of the marked fraction of results (1 until the first window is observed).
     */
    public double alpha()
    {
        return alpha;
    }

    public double gain()
    {
        return gain;
    }

    /**
     * @return the floor a cut never takes the window below: {@link CongestionControl#minWindow()}, at most the cap.
     */
    public int floor()
    {
        return floor;
    }

    /**
     * @return results seen.
     */
    public long results()
    {
        return results;
    }

    /**
     * @return results a packet of which arrived CE-marked.
     */
    public long markedResults()
    {
        return markedResults;
    }

    /**
     * @return windows that ended with a mark (each cut the window, unless it was at the floor already).
     */
    public long decreases()
    {
        return decreases;
    }

    /**
     * @return windows without a mark that grew the window by one.
     */
    public long increases()
    {
        return increases;
    }

    /**
     * @return the smallest window since the start.
     */
    public int minWindow()
    {
        return minWindow;
    }

    /**
     * @return the smallest window since the last call of this method (or the start); starts the next such span at
     * the current window. For a per-call figure.
     */
    public int takeMinWindow()
    {
        final int min = minWindowSinceTaken;
        minWindowSinceTaken = window();
        return min;
    }

    @Override
    public String toString()
    {
        return String.format(java.util.Locale.ROOT, "window %d/%d alpha %.3f marked %d/%d cuts %d", window(), cap,
            alpha, markedResults, results, decreases);
    }
}
