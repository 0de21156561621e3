package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.ring.Ring;
import io.netreduce.dataplane.ring.RingRuns;

import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.PacketPort;

import java.util.List;
import java.util.Objects;

/**
 * Configuration of a {@link DataplaneAgent}, with defaults (Aeron's Context style: set what you need, the rest
 * is sensible).
 */
public final class DataplaneContext
{
    /**
     * Frames received per port per duty cycle. The defaults here are the only ones: the YAML configuration's
     * defaults ({@code DataplaneConfig}, {@code ApplianceConfig}) are defined as these constants.
     */
    public static final int DEFAULT_BATCH_SIZE = 64;
    /** CLT capacity: ring and foreign connections the appliance tracks at once. */
    public static final int DEFAULT_CLT_ENTRIES = 16 * 1024;
    /**
     * Foreign connections (RDMA traffic on a ring edge that is not a ring's: any host on the switch can send it) the
     * CLT holds at most: a quarter of it, so a flood of them never keeps a ring's connections out.
     */
    public static final int DEFAULT_CLT_FOREIGN_ENTRIES = DEFAULT_CLT_ENTRIES / 4;
    /** Foreign connections with one source address the CLT holds at most, so one source cannot take the share. */
    public static final int DEFAULT_CLT_FOREIGN_PER_SOURCE = 1024;
    /** Aggregator memory all rings may take together: 1 GiB. */
    public static final long DEFAULT_MEMORY_BUDGET = 1L << 30;
    /**
     * Capacity of the control-to-dataplane command queue; commands are rare (ring installs, captures, snapshots)
     * but a reload can send one per ring at once.
     */
    public static final int DEFAULT_COMMAND_QUEUE_CAPACITY = 1024;
    /** Commands applied per duty cycle, so a burst of commands cannot starve the ports. */
    public static final int DEFAULT_COMMANDS_PER_CYCLE = 4;
    /** Highest first-packet-to-result latency the histogram records, in ns; longer ones are recorded as this. */
    public static final long DEFAULT_HIGHEST_LATENCY_NS = 60_000_000_000L;
    /**
     * A foreign connection (RDMA traffic on a ring edge that is not a ring's) is forgotten after this long
     * without a packet, so strangers and old jobs cannot fill the CLT for good: 60 s.
     */
    public static final long DEFAULT_FOREIGN_IDLE_NS = 60_000_000_000L;
    /** Slots of the CLT the agent looks at per expiry sweep (one sweep every {@link #SWEEP_INTERVAL_NS}). */
    public static final int SWEEP_SLOTS = 1024;
    /** Time between two expiry sweeps of the CLT. */
    public static final long SWEEP_INTERVAL_NS = 100_000_000L;
    /** Fault injection: no frame dropped. */
    public static final double DEFAULT_DROP_PROBABILITY = 0.0;
    /** Fault injection: the seed of the drop sequence, so a drill can be repeated. */
    public static final long DEFAULT_DROP_SEED = 1;
    /**
     * Made-up ring frames the agent runs through a private copy of its packet path when it starts, after the
     * summation kernels ({@link PacketPathWarmUp}): none by default (tests, benchmarks); the daemon asks for
     * {@code netreduce.warmUpFrames}, 65,536 unless set.
     */
    public static final long DEFAULT_WARM_UP_FRAMES = 0;
    /**
     * The appliance's own ECN marking (PANAMA's switch AQM, at the appliance): the fraction of a port's receive queue
     * that, filled, makes the dataplane mark CE the ECN-capable packets of the batch it then reads, and so every
     * result of their positions. A quarter by default: marks are an early warning of the queue's overflow (a drop,
     * and a go-back-N resend by every rank behind it), not a latency target; a quarter of the bed's 3584-slot ring is
     * 896 frames, about 8 MB, which a lane only leaves waiting when it is behind its ports. When rings on a port can
     * have more frames in flight than its queue holds (two W = 8 jobs at window 16: 4096 frames), the marks shrink
     * their windows before it overflows: measured on the bed (docs/performance.md, "The appliance's own marks"),
     * with marking off 74,962 frames dropped and 159 RC timeouts; at a half 81-329 dropped, none timed out; at a
     * quarter nothing dropped or resent. 0 turns marking off; a port that cannot tell its backlog never marks.
     */
    public static final double DEFAULT_ECN_BACKLOG = 0.25;

    private List<PacketPort> ports = List.of();
    private int[] peers;
    private int batchSize = DEFAULT_BATCH_SIZE;
    private int cltEntries = DEFAULT_CLT_ENTRIES;
    private int cltForeignEntries = -1;
    private int cltForeignPerSource = -1;
    private long memoryBudget = DEFAULT_MEMORY_BUDGET;
    private int commandQueueCapacity = DEFAULT_COMMAND_QUEUE_CAPACITY;
    private int commandsPerCycle = DEFAULT_COMMANDS_PER_CYCLE;
    private long highestLatencyNs = DEFAULT_HIGHEST_LATENCY_NS;
    private DataplaneCounters counters;
    private double dropProbability = DEFAULT_DROP_PROBABILITY;
    private long dropSeed = DEFAULT_DROP_SEED;
    private long foreignIdleNs = DEFAULT_FOREIGN_IDLE_NS;
    private long abandonedRunNs = RingRuns.DEFAULT_ABANDONED_RUN_NS;
    private long warmUpFrames = DEFAULT_WARM_UP_FRAMES;
    private AfPacketConfiguration warmUpPortSettings;
    private double ecnBacklog = DEFAULT_ECN_BACKLOG;

    /**
     * The ports the agent polls, by index. Default peers: one-armed (every frame leaves on its own port).
     */
    public DataplaneContext ports(final List<PacketPort> ports)
    {
        this.ports = List.copyOf(ports);
        return this;
    }

    /**
     * One-armed: frames leave on the port they arrived on.
     */
    public DataplaneContext oneArmed()
    {
        peers = null;
        return this;
    }

    /**
     * Bump-in-the-wire between ports 0 and 1: what comes in on one leaves on the other.
     */
    public DataplaneContext bumpInTheWire()
    {
        peers = new int[]{ 1, 0 };
        return this;
    }

    /**
     * @param peers for each port index, the port its frames leave on.
     */
    public DataplaneContext peers(final int... peers)
    {
        this.peers = peers.clone();
        return this;
    }

    public DataplaneContext batchSize(final int batchSize)
    {
        this.batchSize = batchSize;
        return this;
    }

    public DataplaneContext cltEntries(final int cltEntries)
    {
        this.cltEntries = cltEntries;
        return this;
    }

    /**
     * @param entries foreign connections the CLT holds at most (default a quarter of {@link #cltEntries()}).
     */
    public DataplaneContext cltForeignEntries(final int entries)
    {
        this.cltForeignEntries = entries;
        return this;
    }

    /**
     * @param entries foreign connections with one source address the CLT holds at most (default
     *                {@link #DEFAULT_CLT_FOREIGN_PER_SOURCE}, or the foreign share when that is smaller).
     */
    public DataplaneContext cltForeignPerSource(final int entries)
    {
        this.cltForeignPerSource = entries;
        return this;
    }

    /**
     * @param bytes aggregator memory all rings together may use; an install beyond it is refused.
     */
    public DataplaneContext memoryBudget(final long bytes)
    {
        this.memoryBudget = bytes;
        return this;
    }

    public DataplaneContext commandQueueCapacity(final int capacity)
    {
        this.commandQueueCapacity = capacity;
        return this;
    }

    public DataplaneContext commandsPerCycle(final int commands)
    {
        this.commandsPerCycle = commands;
        return this;
    }

    public DataplaneContext highestLatencyNs(final long highestLatencyNs)
    {
        this.highestLatencyNs = highestLatencyNs;
        return this;
    }

    /**
     * Fault injection for tests and drills: drop each arriving RoCEv2 frame with this probability (counted as
     * {@link io.netreduce.dataplane.counters.DataplaneCounter#DROP_INJECTED}). Default 0: off.
     */
    public DataplaneContext dropProbability(final double probability, final long seed)
    {
        if (!(probability >= 0.0 && probability < 1.0))
        {
            throw new IllegalArgumentException("drop probability " + probability + " is not in [0, 1)");
        }
        this.dropProbability = probability;
        this.dropSeed = seed;
        return this;
    }

    public double dropProbability()
    {
        return dropProbability;
    }

    /**
     * How long a foreign CLT entry may see no packet before it is removed.
     */
    public DataplaneContext foreignIdleNs(final long ns)
    {
        if (ns <= 0)
        {
            throw new IllegalArgumentException("foreign idle time must be positive: " + ns);
        }
        this.foreignIdleNs = ns;
        return this;
    }

    public long foreignIdleNs()
    {
        return foreignIdleNs;
    }

    /**
     * How long a ring's run with messages in flight may make no progress before a new connection may begin a new
     * run (default {@link Ring#DEFAULT_ABANDONED_RUN_NS}).
     */
    public DataplaneContext abandonedRunNs(final long ns)
    {
        if (ns <= 0)
        {
            throw new IllegalArgumentException("abandoned-run time must be positive: " + ns);
        }
        this.abandonedRunNs = ns;
        return this;
    }

    public long abandonedRunNs()
    {
        return abandonedRunNs;
    }

    public long dropSeed()
    {
        return dropSeed;
    }

    /**
     * @param frames made-up ring frames to run through the packet path at start ({@link PacketPathWarmUp}; 0: none).
     */
    public DataplaneContext warmUpFrames(final long frames)
    {
        if (frames < 0)
        {
            throw new IllegalArgumentException("warmUpFrames must be at least 0: " + frames);
        }
        this.warmUpFrames = frames;
        return this;
    }

    public long warmUpFrames()
    {
        return warmUpFrames;
    }

    /**
     * @param settings the serving AF_PACKET ports' settings: the warm-up's private agent then takes its frames on a
     *                 port with them on the loopback interface, so that the port's code compiles with the rest
     *                 ({@link PacketPathWarmUp}); null (the default: tests, benchmarks, AF_XDP ports): in memory.
     */
    public DataplaneContext warmUpPortSettings(final AfPacketConfiguration settings)
    {
        this.warmUpPortSettings = settings;
        return this;
    }

    public AfPacketConfiguration warmUpPortSettings()
    {
        return warmUpPortSettings;
    }

    /**
     * @param fraction of each port's receive queue at which the dataplane marks ECN ({@link #DEFAULT_ECN_BACKLOG}):
     *                 0 (off) to 1.
     */
    public DataplaneContext ecnBacklog(final double fraction)
    {
        if (!(fraction >= 0 && fraction <= 1))
        {
            throw new IllegalArgumentException("ecnBacklog must be a fraction 0..1 of the receive queue: " + fraction);
        }
        this.ecnBacklog = fraction;
        return this;
    }

    public double ecnBacklog()
    {
        return ecnBacklog;
    }

    /**
     * @return frames waiting in {@code port}'s receive queue from which the dataplane marks, 0 when it never does
     *         (marking off, or a port that cannot tell its backlog).
     */
    public int ecnBacklogFrames(final PacketPort port)
    {
        final int capacity = port.receiveCapacity();
        return ecnBacklog <= 0 || capacity <= 0 ? 0 : Math.max(1, (int)Math.ceil(ecnBacklog * capacity));
    }

    public DataplaneContext counters(final DataplaneCounters counters)
    {
        this.counters = counters;
        return this;
    }

    public List<PacketPort> ports()
    {
        return ports;
    }

    /**
     * @return the peer of each port (one-armed unless set).
     */
    public int[] peers()
    {
        if (peers != null)
        {
            return peers.clone();
        }
        final int[] identity = new int[ports.size()];
        for (int i = 0; i < identity.length; i++)
        {
            identity[i] = i;
        }
        return identity;
    }

    public int batchSize()
    {
        return batchSize;
    }

    public int cltEntries()
    {
        return cltEntries;
    }

    public int cltForeignEntries()
    {
        return cltForeignEntries > 0 ? cltForeignEntries : Math.max(1, cltEntries / 4);
    }

    public int cltForeignPerSource()
    {
        return cltForeignPerSource > 0 ? cltForeignPerSource :
            Math.min(DEFAULT_CLT_FOREIGN_PER_SOURCE, cltForeignEntries());
    }

    public long memoryBudget()
    {
        return memoryBudget;
    }

    public int commandQueueCapacity()
    {
        return commandQueueCapacity;
    }

    public int commandsPerCycle()
    {
        return commandsPerCycle;
    }

    public long highestLatencyNs()
    {
        return highestLatencyNs;
    }

    public DataplaneCounters counters()
    {
        if (counters == null)
        {
            counters = new DataplaneCounters();
        }
        return counters;
    }

    /**
     * @return a copy of this context for one lane of a {@link DataplaneLanes}: the lane's own ports and its own
     *         counters (lanes never write each other's cache lines); a fault-injection seed of its own, so that
     *         lanes do not drop in step.
     */
    DataplaneContext forLane(final int lane, final List<PacketPort> lanePorts)
    {
        final DataplaneContext copy = new DataplaneContext();
        copy.ports = List.copyOf(lanePorts);
        copy.peers = peers == null ? null : peers.clone();
        copy.batchSize = batchSize;
        copy.cltEntries = cltEntries;
        copy.cltForeignEntries = cltForeignEntries;
        copy.cltForeignPerSource = cltForeignPerSource;
        copy.memoryBudget = memoryBudget;
        copy.commandQueueCapacity = commandQueueCapacity;
        copy.commandsPerCycle = commandsPerCycle;
        copy.highestLatencyNs = highestLatencyNs;
        copy.counters = new DataplaneCounters();
        copy.dropProbability = dropProbability;
        copy.dropSeed = dropSeed + lane;
        copy.foreignIdleNs = foreignIdleNs;
        copy.abandonedRunNs = abandonedRunNs;
        copy.ecnBacklog = ecnBacklog;
        // The JIT's code is the process's: one lane warming the packet path warms it for all.
        copy.warmUpFrames = lane == 0 ? warmUpFrames : 0;
        copy.warmUpPortSettings = warmUpPortSettings;
        return copy;
    }

    /**
     * @throws IllegalArgumentException when a value is out of range.
     */
    public void conclude()
    {
        Objects.requireNonNull(ports, "ports");
        if (ports.isEmpty())
        {
            throw new IllegalArgumentException("at least one port is needed");
        }
        if (peers != null && peers.length != ports.size())
        {
            throw new IllegalArgumentException("peers: " + peers.length + " entries for " + ports.size() + " ports");
        }
        if (cltEntries < 1 || cltForeignEntries() > cltEntries || cltForeignPerSource() > cltForeignEntries())
        {
            throw new IllegalArgumentException("cltEntries must be >= 1, cltForeignEntries in 1..cltEntries, " +
                "cltForeignPerSource in 1..cltForeignEntries: " + cltEntries + ", " + cltForeignEntries() + ", " +
                cltForeignPerSource());
        }
        if (batchSize < 1 || commandsPerCycle < 1 || commandQueueCapacity < 2 || memoryBudget < 0)
        {
            throw new IllegalArgumentException("batchSize, commandsPerCycle must be >= 1, commandQueueCapacity >= 2, " +
                "memoryBudget >= 0");
        }
    }
}
