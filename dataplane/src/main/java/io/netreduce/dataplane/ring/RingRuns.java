package io.netreduce.dataplane.ring;

import io.netreduce.dataplane.aggregator.AggregatorRegion;

import java.util.Arrays;

/**
 * A ring's runs and the connections that carry its ranks in them.
 * <p>
 * A ring is used by a sequence of <em>runs</em>: each run is one connection per rank (workers make new QPs for
 * each all-reduce, and MsgIDs start again at 0). A rank that connects again while its current connection already
 * belongs to the current run begins a new run: the previous run is over (see {@link #connect(int, long)}), and its
 * aggregators must be discarded, or the results it kept for retransmissions would answer, or block, the new
 * run's messages with the same MsgID. Per rank it records the generation of the connection currently carrying the
 * rank, so that packets of a superseded connection (the worker re-created its QP) are recognised.
 * <p>
 * Until a run has completed its first sum, no connection of it has proven anything (no MAC is bound on a fresh
 * ring, and a stranger's frame with a member's addresses looks like the member's first packet): another connection
 * of a rank may then take the rank over within the run ({@link #REPLACED}), and the one it displaced may take it
 * back. From the first completed sum on, the run's connections are protected ({@link #mayConnect}). Owned by the
 * dataplane thread.
 */
public final class RingRuns
{
    /**
     * The default of how long a ring may see no aggregation progress while messages are in flight before its run
     * counts as abandoned (a job killed mid-call): only then may a new connection begin a new run without the old
     * one having finished. Longer than a live run's pauses (RC timeouts of a lossy link are milliseconds to about a
     * second), shorter than a new job's RC retry span, so the next job gets in on its retries.
     */
    public static final long DEFAULT_ABANDONED_RUN_NS = 2_000_000_000L;

    /** {@link #connect(int, long)}: the connection joins the current run (the rank had no connection in it). */
    public static final int JOINED = 0;
    /** {@link #connect(int, long)}: the connection begins a new run; the caller must discard the ring's aggregators. */
    public static final int NEW_RUN = 1;
    /**
     * {@link #connect(int, long)}: the connection takes its rank over within a run that has completed no sum; the
     * caller must discard the run's partial sums (they may hold the displaced connection's gradients) and not sum
     * the packet in hand: the rank's next packets are summed.
     */
    public static final int REPLACED = 2;
    /**
     * {@link #connect(int, long)}: the connection joins a run that has completed no sum and made no progress for
     * the abandoned-run time; the caller must discard the run's partial sums (they may be a killed job's) and sum
     * the packet in hand. The run's other connections stay: if they are alive, their go-back-N resends put their
     * contributions back.
     */
    public static final int JOINED_ABANDONED = 3;

    private final AggregatorRegion region;
    private final long abandonedRunNs;
    private final int[] generation;
    /** Per rank, the generation of its first connection in its current run. */
    private final int[] runFirstGeneration;
    private final int[] rankRun;
    private int run;
    /** Whether the current run has completed a sum. */
    private boolean runHasSum;
    private long lastProgressNs;

    /**
     * @param region         the ring's aggregators: whether any is in flight tells whether the run is over.
     * @param abandonedRunNs how long a run with messages in flight may make no progress before a new connection
     *                       may begin a new run.
     */
    RingRuns(final int ranks, final AggregatorRegion region, final long abandonedRunNs)
    {
        this.region = region;
        this.abandonedRunNs = abandonedRunNs;
        this.generation = new int[ranks];
        this.runFirstGeneration = new int[ranks];
        this.rankRun = new int[ranks];
        Arrays.fill(rankRun, -1);
    }

    /**
     * A ring packet added a rank's contribution to an aggregator at {@code nowNs} (not a duplicate, and not a
     * retransmission answered from a stored result).
     */
    public void progress(final long nowNs)
    {
        lastProgressNs = nowNs;
    }

    /**
     * A sum of the current run completed: from now on its connections are protected by {@link #mayConnect}.
     */
    public void onSumCompleted()
    {
        runHasSum = true;
    }

    /**
     * @return whether the current run has completed a sum.
     */
    public boolean runHasSum()
    {
        return runHasSum;
    }

    /**
     * Whether a new connection of {@code rank} may connect now. It may always join the current run (the rank has
     * no connection in it), and take the rank over while the run has completed no sum (nothing is protected before
     * then). Otherwise it would begin a new run, which it may only when the current run is over, which the
     * appliance sees as no message in flight (every aggregator free or complete: workers begin a new run only once
     * the previous one is finished), or the current run abandoned (messages in flight but no progress for the
     * abandoned-run time, {@link #DEFAULT_ABANDONED_RUN_NS} by default).
     */
    public boolean mayConnect(final int rank, final long nowNs)
    {
        return rankRun[rank] != run || !runHasSum || region.incomplete() == 0 ||
            nowNs - lastProgressNs > abandonedRunNs;
    }

    /**
     * Whether a superseded connection of {@code rank} (CLT generation {@code connectionGeneration}) may take its
     * rank back: only from a connection that took it over within the current run before the run's first sum
     * (a member whose first packets a stranger's frame displaced). A connection of an earlier run never may.
     */
    public boolean mayTakeBack(final int rank, final int connectionGeneration)
    {
        return rankRun[rank] == run && !runHasSum && connectionGeneration != generation[rank] &&
            connectionGeneration - runFirstGeneration[rank] >= 0;
    }

    public int generation(final int rank)
    {
        return generation[rank];
    }

    /**
     * A new connection now carries {@code rank}: older connections of the rank become stale (the rank's
     * generation advances, see {@link #generation(int)}) (its message start records are the caller's to forget: {@link Ring#connect}).
     * <p>
     * If the rank has no connection in the current run, this one joins it ({@link #JOINED}: a rank's first
     * connection, or a rank following another that began the run). If it has one and the run has completed no
     * sum, this one takes the rank over within the run ({@link #REPLACED}): the other ranks keep their
     * connections. Otherwise this connection begins a new run ({@link #NEW_RUN}): the other ranks' connections
     * belong to the old run until they connect again, and the caller must discard the ring's aggregators. This
     * relies on the workers' discipline that a new run starts only once every connection of the previous one is
     * finished (every result delivered and acknowledged): after that, no packet of the old run can need an
     * aggregator.
     *
     * A rank that joins a run stalled for the abandoned-run time joins it with its partial sums discarded
     * ({@link #JOINED_ABANDONED}).
     *
     * @return {@link #JOINED}, {@link #JOINED_ABANDONED}, {@link #REPLACED} or {@link #NEW_RUN}.
     */
    public int connect(final int rank, final long nowNs)
    {
        generation[rank]++;
        if (rankRun[rank] != run)
        {
            rankRun[rank] = run;
            runFirstGeneration[rank] = generation[rank];
            // A rank joins only a run with no sum (a sum needs every rank in the run). If the run has stalled, its
            // partial sums may be a killed job's, and this connection's first packet would complete them.
            return region.incomplete() != 0 && nowNs - lastProgressNs > abandonedRunNs ? JOINED_ABANDONED : JOINED;
        }
        if (!runHasSum)
        {
            return REPLACED;
        }
        run++;
        runHasSum = false;
        rankRun[rank] = run;
        runFirstGeneration[rank] = generation[rank];
        return NEW_RUN;
    }

    /**
     * @return whether the rank's current connection belongs to the current run (false once another rank began a
     * new run, until this rank connects again).
     */
    public boolean inCurrentRun(final int rank)
    {
        return rankRun[rank] == run;
    }

    /**
     * @return the number of the current run (0 for the first).
     */
    public int run()
    {
        return run;
    }
}
