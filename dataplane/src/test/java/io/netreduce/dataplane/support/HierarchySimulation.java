package io.netreduce.dataplane.support;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.ring.Hierarchy;
import io.netreduce.dataplane.ring.RingDefinition;
import io.netreduce.dataplane.testing.RingWorker;
import io.netreduce.protocol.icrc.Icrc;
import io.netreduce.protocol.support.Gradients;
import io.netreduce.protocol.wire.BthHeader;
import io.netreduce.protocol.wire.RoceFrame;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

/**
 * A multi-rack ring around R leaf appliances and one spine appliance (each a {@link DataplaneHarness} on a memory
 * port), with a lossy network at every tier and the workers' RC go-back-N as the only recovery.
 * <p>
 * Rank r's frames go to its rack's leaf. What a leaf emits goes to a worker when its destination is in the rack
 * (results), else up to the spine (the rack's partial sum on its leaving cross-rack connection); what the spine
 * emits goes down to the leaf of its destination's rack. Each hop may lose a frame with its own probability;
 * worker-to-leaf frames may also be duplicated. A receiver accepts only the next expected PSN of its incoming
 * connection (RC); when no sender may move, each goes back to its receiver's first missing PSN (timeout,
 * go-back-N), and senders time out spuriously now and then. Frames and bytes on the spine's links are counted.
 */
public final class HierarchySimulation
{
    private static final int TO_LEAF = 0;
    private static final int TO_SPINE = 1;
    private static final int TO_WORKER = 2;

    private final RingDefinition config;
    private final Hierarchy racks;
    private final DataplaneHarness[] leaves;
    private final DataplaneHarness spine;
    private final int messages;
    private final Random random;
    private final double dropLeafToSpine;
    private final double dropSpineToLeaf;
    private final double dropLeafToWorker;
    private final int ranks;
    private final int[] firstPsn;
    private final RingWorker[] workers;
    private final byte[][][] gradients;
    private final List<List<byte[]>> frames;
    private final GoBackNWorkers senders;
    private final List<List<byte[]>> delivered = new ArrayList<>();
    private final Map<Integer, Integer> rankOfAddress = new HashMap<>();
    private final long[] upFrames;
    private final long[] upBytes;
    private final long[] downFrames;
    private final long[] downBytes;
    private final RoceFrame frame = new RoceFrame();
    private final Icrc icrc = new Icrc();
    private final ArrayDeque<Object[]> network = new ArrayDeque<>();
    private int badIcrc;
    private int misrouted;
    private HopHook hook;

    /** A worker's frame on its way to its rack's leaf. */
    public static final int HOP_WORKER_TO_LEAF = 0;
    /** A leaf's partial on its way up to the spine. */
    public static final int HOP_LEAF_TO_SPINE = 1;
    /** A spine's result on its way down to a leaf. */
    public static final int HOP_SPINE_TO_LEAF = 2;
    /** A leaf's result on its way to a worker. */
    public static final int HOP_LEAF_TO_WORKER = 3;

    /**
     * Sees (and may change in place, e.g. mark ECN) every frame about to cross a link, lost ones excepted.
     */
    @FunctionalInterface
    public interface HopHook
    {
        /**
         * @param hop    one of the {@code HOP_*} values.
         * @param target the leaf or worker the frame goes to (-1: the spine).
         */
        void onHop(int hop, int target, byte[] frame);
    }

    /**
     * @param config   the flat ring (all W members, IPv4 from {@link Rings}); each appliance gets its own tier of it.
     * @param rackEnds the last rank of each rack.
     */
    public HierarchySimulation(
        final RingDefinition config,
        final List<Integer> rackEnds,
        final int messages,
        final long dataSeed,
        final long networkSeed,
        final double dropWorkerToLeaf,
        final double duplicate,
        final double dropLeafToSpine,
        final double dropSpineToLeaf,
        final double dropLeafToWorker,
        final double spuriousTimeout)
    {
        this.config = config;
        this.racks = Hierarchy.spine(rackEnds);
        this.messages = messages;
        this.random = new Random(networkSeed);
        this.dropLeafToSpine = dropLeafToSpine;
        this.dropSpineToLeaf = dropSpineToLeaf;
        this.dropLeafToWorker = dropLeafToWorker;
        this.ranks = config.worldSize();
        this.leaves = new DataplaneHarness[rackEnds.size()];
        for (int k = 0; k < leaves.length; k++)
        {
            leaves[k] = new DataplaneHarness();
            leaves[k].install(config.withHierarchy(Hierarchy.leaf(rackEnds, k)));
        }
        this.spine = new DataplaneHarness();
        spine.install(config.withHierarchy(racks));
        this.upFrames = new long[leaves.length];
        this.upBytes = new long[leaves.length];
        this.downFrames = new long[leaves.length];
        this.downBytes = new long[leaves.length];
        final Random data = new Random(dataSeed);
        this.workers = new RingWorker[ranks];
        this.firstPsn = new int[ranks];
        for (int r = 0; r < ranks; r++)
        {
            firstPsn[r] = data.nextBoolean() ? data.nextInt(1 << 24) : (1 << 24) - 1 - data.nextInt(50);
            workers[r] = RingWorker.of(config, r, firstPsn[r]);
            final byte[] address = config.member(r).address().getAddress();
            rankOfAddress.put(new UnsafeBuffer(address).getInt(0), r);
        }
        gradients = GoBackNWorkers.randomGradients(workers, config.elementType(), messages, data);
        frames = GoBackNWorkers.framesOf(workers, gradients);
        for (int r = 0; r < ranks; r++)
        {
            delivered.add(new ArrayList<>());
        }
        senders = new GoBackNWorkers(config.window(), config.msgLen(), frames, random, dropWorkerToLeaf, duplicate,
            spuriousTimeout);
    }

    /**
     * Let {@code hook} see every frame about to cross a link (before {@link #run()}).
     */
    public HierarchySimulation onHop(final HopHook hook)
    {
        this.hook = hook;
        return this;
    }

    private void hop(final int hop, final int target, final byte[] frame)
    {
        if (hook != null)
        {
            hook.onHop(hop, target, frame);
        }
    }

    public static HierarchySimulation lossless(
        final RingDefinition config, final List<Integer> rackEnds, final int messages, final long seed)
    {
        return new HierarchySimulation(config, rackEnds, messages, seed, seed + 1, 0, 0, 0, 0, 0, 0);
    }

    /**
     * Run to completion.
     *
     * @throws IllegalStateException if the ring stops making progress.
     */
    public HierarchySimulation run()
    {
        senders.run(messages, 200, 20, (rank, frame) -> send(TO_LEAF, racks.rackOf(rank), frame), this::progress);
        return this;
    }

    private void send(final int kind, final int target, final byte[] bytes)
    {
        hop(HOP_WORKER_TO_LEAF, target, bytes);
        network.add(new Object[]{ kind, target, bytes });
        while (!network.isEmpty())
        {
            final Object[] hop = network.poll();
            final byte[] out = (byte[])hop[2];
            switch ((int)hop[0])
            {
                case TO_LEAF -> fromLeaf((int)hop[1], leaves[(int)hop[1]].process(out));
                case TO_SPINE -> fromSpine(spine.process(out));
                default -> toWorker((int)hop[1], out);
            }
        }
    }

    private int destinationRank(final byte[] bytes)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        if (frame.wrap(buffer, 0, bytes.length) != RoceFrame.OK)
        {
            return -1;
        }
        final Integer rank = rankOfAddress.get(buffer.getInt(frame.dstAddressOffset()));
        return rank == null ? -1 : rank;
    }

    private void fromLeaf(final int leaf, final List<byte[]> outputs)
    {
        for (final byte[] out : outputs)
        {
            final int destination = destinationRank(out);
            if (destination < 0)
            {
                misrouted++;
                continue;
            }
            if (racks.rackOf(destination) == leaf)
            {
                if (dropLeafToWorker > 0 && random.nextDouble() < dropLeafToWorker)
                {
                    continue;
                }
                hop(HOP_LEAF_TO_WORKER, destination, out);
                network.add(new Object[]{ TO_WORKER, destination, out });
            }
            else
            {
                upFrames[leaf]++;
                upBytes[leaf] += out.length;
                if (dropLeafToSpine > 0 && random.nextDouble() < dropLeafToSpine)
                {
                    continue;
                }
                hop(HOP_LEAF_TO_SPINE, -1, out);
                network.add(new Object[]{ TO_SPINE, -1, out });
            }
        }
    }

    private void fromSpine(final List<byte[]> outputs)
    {
        for (final byte[] out : outputs)
        {
            final int destination = destinationRank(out);
            if (destination < 0)
            {
                misrouted++;
                continue;
            }
            final int leaf = racks.rackOf(destination);
            downFrames[leaf]++;
            downBytes[leaf] += out.length;
            if (dropSpineToLeaf > 0 && random.nextDouble() < dropSpineToLeaf)
            {
                continue;
            }
            hop(HOP_SPINE_TO_LEAF, leaf, out);
            network.add(new Object[]{ TO_LEAF, leaf, out });
        }
    }

    private void toWorker(final int destination, final byte[] out)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(out);
        if (frame.wrap(buffer, 0, out.length) != RoceFrame.OK || !icrc.verify(frame))
        {
            badIcrc++;
            return;
        }
        final int connection = (destination + ranks - 1) % ranks;
        final int index = BthHeader.psnDelta(frame.psn(), firstPsn[connection]);
        if (senders.accept(connection, index))
        {
            delivered.get(connection).add(out);
        }
    }

    private String progress()
    {
        final StringBuilder text = new StringBuilder(senders.progress());
        for (int k = 0; k <= leaves.length; k++)
        {
            final DataplaneHarness appliance = k < leaves.length ? leaves[k] : spine;
            text.append(k < leaves.length ? "\n leaf " + k + ":" : "\n spine:");
            text.append(' ').append(appliance.await(appliance.proxy().occupancy(config.ringId(), 8)));
            for (final DataplaneCounter counter : DataplaneCounter.values())
            {
                if (appliance.counter(counter) != 0)
                {
                    text.append(' ').append(counter.name().toLowerCase()).append('=').append(appliance.counter(counter));
                }
            }
        }
        return text.toString();
    }

    /**
     * @return the sum the hierarchy defines for message {@code m}: each rack's ranks summed in rank order (rounded
     * to the element type: that is what goes up), then the racks' partial sums in rack order.
     */
    public byte[] hierarchicalSum(final int m)
    {
        final byte[][] partials = new byte[racks.racks()][];
        for (int k = 0; k < partials.length; k++)
        {
            partials[k] = Gradients.referenceSum(config.elementType(),
                Arrays.copyOfRange(gradients[m], racks.rackFirst(k), racks.rackLast(k) + 1));
        }
        return Gradients.referenceSum(config.elementType(), partials);
    }

    /**
     * @return the flat rank-order sum of message {@code m} (what a single appliance would deliver).
     */
    public byte[] flatSum(final int m)
    {
        return Gradients.referenceSum(config.elementType(), gradients[m]);
    }

    /**
     * @return what connection {@code rank} must deliver for message {@code m}: the rank's own INA header with the
     * ring's result tag, then the hierarchical sum.
     */
    public byte[] expectedMessage(final int rank, final int m)
    {
        return GoBackNWorkers.resultMessage(config, rank, m, hierarchicalSum(m));
    }

    /**
     * @return the bytes connection {@code rank} delivered for message {@code m} (RC payloads concatenated).
     */
    public byte[] deliveredMessage(final int rank, final int m)
    {
        return GoBackNWorkers.payloadsOf(delivered.get(rank), m, config.msgLen());
    }

    /**
     * @return PSN of the first packet of rank {@code rank}'s connection.
     */
    public int firstPsn(final int rank)
    {
        return firstPsn[rank];
    }

    public RingWorker worker(final int rank)
    {
        return workers[rank];
    }

    public List<List<byte[]>> delivered()
    {
        return delivered;
    }

    public DataplaneHarness leaf(final int rack)
    {
        return leaves[rack];
    }

    public DataplaneHarness spine()
    {
        return spine;
    }

    public int racks()
    {
        return leaves.length;
    }

    /** Frames leaf {@code rack} sent towards the spine (lost ones included). */
    public long upFrames(final int rack)
    {
        return upFrames[rack];
    }

    public long upBytes(final int rack)
    {
        return upBytes[rack];
    }

    /** Frames the spine sent towards leaf {@code rack} (lost ones included). */
    public long downFrames(final int rack)
    {
        return downFrames[rack];
    }

    public long downBytes(final int rack)
    {
        return downBytes[rack];
    }

    public int badIcrcResults()
    {
        return badIcrc;
    }

    /** Frames an appliance emitted towards an address that is no rank's. */
    public int misrouted()
    {
        return misrouted;
    }

    public void close()
    {
        for (final DataplaneHarness leaf : leaves)
        {
            leaf.close();
        }
        spine.close();
    }
}
