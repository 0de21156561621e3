package io.netreduce.host.allreduce;

/**
 * How a NetReduce worker adapts its window to ECN marks on results (PANAMA, MLSys '22, §4.2 and Fig. 5; the law is
 * {@link CongestionWindow}'s).
 *
 * @param enabled whether the window adapts (on by default). Without marks it stays at the ring's configured window
 *                N, so a worker behaves as one without congestion control until a fabric, or the appliance, marks;
 *                and while it adapts, the ring's receive queue pair sends no CNPs for marked results (the marks are
 *                acted on once, by the window, on every rank, rather than by one rank's rate limiter).
 * @param gain    g, the weight of the latest window's marked fraction in the moving average alpha, in (0, 1]:
 *                DCTCP's 1/16 by default (alpha follows a change of the marked fraction within about 16 windows).
 * @param minWindow the floor, in messages, that a cut never takes the window below, at least 1 (1 by default: the
 *                  law as PANAMA states it). A floor above 1 keeps messages in flight when every result is marked,
 *                  as Linux's DCTCP keeps a congestion window of at least 2 segments: on this bed a message's round
 *                  trip is mostly CPU, and a window of 1-2 messages cannot fill a link that other traffic marks
 *                  (docs/performance.md, "Shared links"). A floor above the ring's window is held at that window.
 */
public record CongestionControl(boolean enabled, double gain, int minWindow)
{
    /** The law's own floor: one message. */
    public static final int DEFAULT_MIN_WINDOW = 1;

    /** DCTCP's g. */
    public static final double DEFAULT_GAIN = 1.0 / 16;
    /** Adapting, g = 1/16. */
    public static final CongestionControl DEFAULT = new CongestionControl(true, DEFAULT_GAIN, DEFAULT_MIN_WINDOW);
    /** A fixed window of N messages, as before congestion control: marks are counted, never acted on. */
    public static final CongestionControl OFF = new CongestionControl(false, DEFAULT_GAIN, DEFAULT_MIN_WINDOW);

    public CongestionControl
    {
        if (!(gain > 0 && gain <= 1))
        {
            throw new IllegalArgumentException("the ECN gain g must be in (0, 1]: " + gain);
        }
        if (minWindow < 1)
        {
            throw new IllegalArgumentException("the ECN minimum window must be at least 1 message: " + minWindow);
        }
    }

    /**
     * @param enabled whether the window adapts.
     * @param gain    g, in (0, 1].
     * @return control with the law's own floor of one message.
     */
    public CongestionControl(final boolean enabled, final double gain)
    {
        this(enabled, gain, DEFAULT_MIN_WINDOW);
    }
}
