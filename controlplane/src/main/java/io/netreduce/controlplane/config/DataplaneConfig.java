package io.netreduce.controlplane.config;

import io.netreduce.dataplane.agent.DataplaneContext;

/**
 * How the dataplane runs: how many lanes (agent threads), how they idle, and how much each does per duty cycle.
 *
 * @param idleStrategy          how a lane waits when a duty cycle found no work.
 * @param batchSize             frames received per port per duty cycle.
 * @param commandQueueCapacity  capacity of the bounded control-to-dataplane command queue (a power of two).
 * @param dropProbability       fault injection for tests and drills: the probability that an arriving RoCEv2 frame
 *                              is dropped (and counted) before the dataplane looks at it; 0 in production.
 * @param dropSeed              seed of the fault injector's random sequence, so a drill can be repeated.
 * @param lanes                 dataplane agents, each on its own thread and the single writer of its share of the
 *                              rings; every port is opened once per lane as an AF_PACKET fanout group, and the kernel
 *                              steers each ring's frames to its lane (docs/architecture.md, "Lanes").
 * @param laneNice              nice value of every lane's thread, -20..19 ({@link #DEFAULT_LANE_NICE}).
 * @param cltEntries            connections each lane's CLT holds (ring and foreign ones).
 * @param cltForeignEntries     foreign connections (traffic on a ring edge that is no ring's) each lane's CLT holds at
 *                              most: any host on the switch can send them, so they never take the ring connections'
 *                              room.
 * @param cltForeignPerSource   foreign connections with one source address each lane's CLT holds at most.
 * @param ecnBacklog            the fraction (0..1) of a port's receive queue that, filled, makes a lane mark the
 *                              ECN-capable packets it reads CE, so their positions' results carry the appliance's
 *                              own congestion to every rank ({@link #DEFAULT_ECN_BACKLOG}; 0: never).
 */
public record DataplaneConfig(
    IdleStrategyKind idleStrategy,
    int batchSize,
    int commandQueueCapacity,
    double dropProbability,
    long dropSeed,
    int lanes,
    int laneNice,
    int cltEntries,
    int cltForeignEntries,
    int cltForeignPerSource,
    double ecnBacklog)
{
    /** Default ECN marking threshold: a quarter of each receive queue (the dataplane's own default, which says why). */
    public static final double DEFAULT_ECN_BACKLOG = DataplaneContext.DEFAULT_ECN_BACKLOG;

    /** Default CLT size (the dataplane's own default): 16384 connections. */
    public static final int DEFAULT_CLT_ENTRIES = DataplaneContext.DEFAULT_CLT_ENTRIES;
    /** Smallest and largest CLT size accepted. */
    public static final int MIN_CLT_ENTRIES = 16;
    public static final int MAX_CLT_ENTRIES = 1 << 20;
    /** Default foreign per-source share (the dataplane's own default), or the foreign share when smaller. */
    public static final int DEFAULT_CLT_FOREIGN_PER_SOURCE = DataplaneContext.DEFAULT_CLT_FOREIGN_PER_SOURCE;

    /**
     * @return the default foreign share of a CLT of {@code cltEntries}: a quarter of it (4096 of the default 16384).
     */
    public static int defaultCltForeignEntries(final int cltEntries)
    {
        return Math.max(1, cltEntries / 4);
    }

    /**
     * @return the default per-source share: {@link #DEFAULT_CLT_FOREIGN_PER_SOURCE}, or the foreign share when smaller.
     */
    public static int defaultCltForeignPerSource(final int cltForeignEntries)
    {
        return Math.max(1, Math.min(DEFAULT_CLT_FOREIGN_PER_SOURCE, cltForeignEntries));
    }

    /**
     * The default CLT and ECN marking threshold.
     */
    public DataplaneConfig(
        final IdleStrategyKind idleStrategy,
        final int batchSize,
        final int commandQueueCapacity,
        final double dropProbability,
        final long dropSeed,
        final int lanes,
        final int laneNice)
    {
        this(idleStrategy, batchSize, commandQueueCapacity, dropProbability, dropSeed, lanes, laneNice,
            DEFAULT_CLT_ENTRIES, defaultCltForeignEntries(DEFAULT_CLT_ENTRIES),
            defaultCltForeignPerSource(defaultCltForeignEntries(DEFAULT_CLT_ENTRIES)), DEFAULT_ECN_BACKLOG);
    }

    /**
     * Default lanes: one. A lane is a core spent polling (or blocked in poll); more lanes pay only when one core
     * cannot keep up with the traffic (scripts/bench-appliance.sh measures it), and on the shared 2-core test bed the
     * workers need the other core.
     */
    public static final int DEFAULT_LANES = 1;
    /** Upper bound on lanes. */
    public static final int MAX_LANES = 64;

    /**
     * Default lane nice value: -10. A lane blocks in poll(2) when idle and is woken by each frame; on a box whose
     * cores also run other work (the test bed's workers and trainers), a woken lane of equal weight waits behind
     * busy threads for milliseconds while every rank of its rings waits for its results. -10 lets a wake-up take a
     * core at once and still leaves the lane only the CPU its frames need. Lowering the value needs RLIMIT_NICE (the
     * systemd unit sets LimitNICE=-10) or CAP_SYS_NICE; without either the lane keeps its value and the daemon logs a
     * warning. Measured with the workers' endpoints at -10 too, a busy process beside each worker (docs/performance.md,
     * "Packet threads ahead of the trainer"): 606 and 601 ms calls against 855 and 943 with the lane at 0.
     * Any value in {@code ThreadNice.MIN_NICE..MAX_NICE}.
     */
    public static final int DEFAULT_LANE_NICE = -10;

    /**
     * One lane at the default nice value.
     */
    public DataplaneConfig(
        final IdleStrategyKind idleStrategy,
        final int batchSize,
        final int commandQueueCapacity,
        final double dropProbability,
        final long dropSeed)
    {
        this(idleStrategy, batchSize, commandQueueCapacity, dropProbability, dropSeed, DEFAULT_LANES,
            DEFAULT_LANE_NICE);
    }

    /** Default drop probability: no fault injection (the dataplane's own default). */
    public static final double DEFAULT_DROP_PROBABILITY = DataplaneContext.DEFAULT_DROP_PROBABILITY;
    /** Default fault injector seed (the dataplane's own default). */
    public static final long DEFAULT_DROP_SEED = DataplaneContext.DEFAULT_DROP_SEED;

    /**
     * Default idle strategy: poll. The appliance shares small boxes (and, on the test bed, its cores with the
     * workers); blocking in poll(2) when idle wakes on the next frame and costs no CPU. Measured with
     * scripts/demo.sh --idle: 2.4-2.6 CPU-s of appliance per run against 2.8 with backoff, same wall time.
     */
    public static final IdleStrategyKind DEFAULT_IDLE_STRATEGY = IdleStrategyKind.POLL;
    /** Default batch size (the dataplane's own default). */
    public static final int DEFAULT_BATCH_SIZE = DataplaneContext.DEFAULT_BATCH_SIZE;
    /** Default command queue capacity (the dataplane's own default). */
    public static final int DEFAULT_COMMAND_QUEUE_CAPACITY = DataplaneContext.DEFAULT_COMMAND_QUEUE_CAPACITY;
    /** Upper bound on the batch size (frames per receive call). */
    public static final int MAX_BATCH_SIZE = 4096;
    /** Upper bound on the command queue capacity. */
    public static final int MAX_COMMAND_QUEUE_CAPACITY = 1 << 20;

    /**
     * @return the configuration used when the {@code dataplane} section is absent.
     */
    public static DataplaneConfig defaults()
    {
        return new DataplaneConfig(DEFAULT_IDLE_STRATEGY, DEFAULT_BATCH_SIZE,
            DEFAULT_COMMAND_QUEUE_CAPACITY, DEFAULT_DROP_PROBABILITY, DEFAULT_DROP_SEED, DEFAULT_LANES,
            DEFAULT_LANE_NICE);
    }
}
