package io.netreduce.host.allreduce;

/**
 * One job's all-reduce over several aggregation trees (PANAMA, MLSys '22, §4.1): T NetReduce rings of the same
 * ranks, each aggregated by a different appliance, with the tensor's messages spread round robin over them. Message
 * k of a call (cut as {@link NetReduceAllReduce} cuts a tensor) goes to tree k mod T, as the i-th message of that
 * tree's share ({@link NetReduceAllReduce#beginShare}), so every rank puts every message on the same tree without
 * any coordination, and each tree carries 1/T of the bytes.
 * <p>
 * Each tree is a ring of its own: its RingID, its {@link RingLink} (two queue pairs on the rank's one endpoint), its
 * MsgID sequence, its regions and its {@link CongestionWindow}, which PANAMA's law adapts on that tree's results
 * only, so a congested path slows its own tree and not the others (§4.2, "our congestion control operates
 * independently on each aggregation tree"). A tree's queue pairs send from that tree's UDP source port
 * ({@link #udpSourcePort}): what a switch (the bed's ACL; a fabric's ECMP hash) steers to the tree's appliance.
 * The trees run at once on the endpoint's thread; a call is done when every tree's share is.
 * <p>
 * Not thread-safe: the endpoint's thread only. A failure of any tree fails the call.
 */
public final class MultiTreeAllReduce implements AllReduce
{
    /** Most trees per job. */
    public static final int MAX_TREES = 16;

    /**
     * Tree t's queue pairs send from UDP source port {@code UDP_SOURCE_PORT_BASE + t}: below 0xC000..0xFFFF, where a
     * single-tree queue pair's port lies (0xC000 | QPN), so no other connection is taken for a tree's, and clear of
     * SwitchML's 0xBEE0..0xBEEF.
     */
    public static final int UDP_SOURCE_PORT_BASE = 0xBF00;

    private final NetReduceAllReduce[] trees;

    /**
     * @param trees the job's trees in tree order (tree t takes messages t mod T), 2..{@link #MAX_TREES}: connected
     *              rings of the same rank and world on one endpoint, with distinct RingIDs and the same message
     *              size (MsgLen x payloadSize), each link's ports set with {@link RingLink#udpSourcePort} before it
     *              was connected.
     */
    public MultiTreeAllReduce(final NetReduceAllReduce... trees)
    {
        if (trees.length < 2 || trees.length > MAX_TREES)
        {
            throw new IllegalArgumentException("a job spreads over 2.." + MAX_TREES + " trees: " + trees.length);
        }
        final NetReduceAllReduce first = trees[0];
        for (int t = 1; t < trees.length; t++)
        {
            final NetReduceAllReduce tree = trees[t];
            if (tree.link().endpoint() != first.link().endpoint() || tree.link().rank() != first.link().rank() ||
                tree.link().world() != first.link().world())
            {
                throw new IllegalArgumentException("tree " + t + " is not the same rank of the same world on the " +
                    "same endpoint as tree 0");
            }
            if (tree.config().dataBytesPerMessage() != first.config().dataBytesPerMessage())
            {
                throw new IllegalArgumentException("tree " + t + " carries " + tree.config().dataBytesPerMessage() +
                    " tensor bytes per message, tree 0 " + first.config().dataBytesPerMessage() +
                    ": the trees must cut the tensor alike");
            }
            for (int u = 0; u < t; u++)
            {
                if (trees[u].config().ringId() == tree.config().ringId())
                {
                    throw new IllegalArgumentException("trees " + u + " and " + t + " are both ring " +
                        tree.config().ringId());
                }
            }
        }
        this.trees = trees.clone();
    }

    /**
     * @return the UDP source port of tree {@code tree}'s queue pairs.
     */
    public static int udpSourcePort(final int tree)
    {
        if (tree < 0 || tree >= MAX_TREES)
        {
            throw new IllegalArgumentException("tree must be 0.." + (MAX_TREES - 1) + ": " + tree);
        }
        return UDP_SOURCE_PORT_BASE + tree;
    }

    /**
     * Tree t reduces the tensor's messages t, t + T, t + 2T, ... in place; the others are left to the other trees.
     */
    @Override
    public void begin(final Tensor tensor)
    {
        for (final NetReduceAllReduce tree : trees)
        {
            if (!tree.isDone())
            {
                throw new IllegalStateException("previous all-reduce has not finished");
            }
        }
        for (int t = 0; t < trees.length; t++)
        {
            trees[t].beginShare(tensor, t, trees.length);
        }
    }

    @Override
    public int poll()
    {
        int work = 0;
        for (final NetReduceAllReduce tree : trees)
        {
            work += tree.poll();
        }
        return work;
    }

    @Override
    public boolean isDone()
    {
        for (final NetReduceAllReduce tree : trees)
        {
            if (!tree.isDone())
            {
                return false;
            }
        }
        return true;
    }

    /**
     * @return tree 0's link (the rank's endpoint, which drives every tree).
     */
    @Override
    public RingLink link()
    {
        return trees[0].link();
    }

    @Override
    public long bytesPosted()
    {
        long bytes = 0;
        for (final NetReduceAllReduce tree : trees)
        {
            bytes += tree.bytesPosted();
        }
        return bytes;
    }

    /**
     * @return T.
     */
    public int treeCount()
    {
        return trees.length;
    }

    /**
     * @return tree {@code t}: its ring, window and counts.
     */
    public NetReduceAllReduce tree(final int t)
    {
        return trees[t];
    }
}
