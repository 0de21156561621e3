package io.netreduce.host.allreduce;

import io.netreduce.host.rc.Completion;
import io.netreduce.host.rc.CompletionHandler;
import io.netreduce.host.rc.CompletionQueue;
import io.netreduce.host.rc.CompletionStatus;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.MemoryRegion;
import io.netreduce.host.rc.QueuePair;
import io.netreduce.host.rc.RcEndpoint;
import org.agrona.concurrent.NanoClock;

/**
 * One worker's place in a ring: the RC connection to its successor (send queue pair, data flows out) and the one
 * from its predecessor (receive queue pair, data flows in), each with its completion queue, plus two registered
 * regions: the send region messages are posted from and the receive region the predecessor (or the appliance, on
 * the predecessor's connection) writes into.
 * <p>
 * Set-up: create, exchange {@link #sendInfo()} with the successor and {@link #receiveInfo()} with the predecessor
 * out of band (e.g. {@link io.netreduce.host.rc.Bootstrap}), then {@link #connect}. Both all-reduce algorithms
 * run over the same link; only one may use it at a time, because they share the regions and queues.
 */
public final class RingLink
{
    /** Most completions taken from each completion queue per {@link #pollCompletions} call. */
    public static final int POLL_LIMIT = 64;

    private final RcEndpoint endpoint;
    private final NanoClock clock;
    private final int rank;
    private final int world;
    private final CompletionQueue sendCq;
    private final CompletionQueue receiveCq;
    private final QueuePair sendQp;
    private final QueuePair receiveQp;
    private final MemoryRegion sendRegion;
    private final MemoryRegion receiveRegion;
    private final int receiveDepth;
    private long successorVa;
    private int successorRkey;
    private long successorLength;
    private boolean connected;

    /**
     * @param endpoint     the worker's RC endpoint; the link drives its duty cycle while an all-reduce runs.
     * @param clock        the endpoint's clock (timeouts are measured on it).
     * @param sendBytes    size of the send region (see the algorithms' {@code sendRegionBytes}).
     * @param receiveBytes size of the receive region (see the algorithms' {@code receiveRegionBytes}).
     */
    public RingLink(
        final RcEndpoint endpoint,
        final NanoClock clock,
        final int rank,
        final int world,
        final int sendBytes,
        final int receiveBytes)
    {
        this(endpoint, clock, rank, world, endpoint.registerMemory(sendBytes), endpoint.registerMemory(receiveBytes));
    }

    /**
     * A link over regions the caller registered on {@code endpoint} (e.g. areas of a mapping shared with a trainer:
     * {@link RcEndpoint#registerMemory(java.nio.ByteBuffer)}), so that messages are sent from and results land in
     * that memory itself.
     *
     * @param sendRegion    the region messages are posted from.
     * @param receiveRegion the region advertised to the predecessor ({@link #receiveInfo()}), where results land.
     */
    public RingLink(
        final RcEndpoint endpoint,
        final NanoClock clock,
        final int rank,
        final int world,
        final MemoryRegion sendRegion,
        final MemoryRegion receiveRegion)
    {
        if (world < 2 || rank < 0 || rank >= world)
        {
            throw new IllegalArgumentException("need 0 <= rank < world and world >= 2: rank=" + rank +
                " world=" + world);
        }
        this.endpoint = endpoint;
        this.clock = clock;
        this.rank = rank;
        this.world = world;
        final int depth = Math.max(endpoint.config().sendQueueDepth(), endpoint.config().receiveQueueDepth());
        this.sendCq = new CompletionQueue(2 * depth);
        this.receiveCq = new CompletionQueue(2 * depth);
        this.sendQp = endpoint.createQueuePair(sendCq, sendCq);
        this.receiveQp = endpoint.createQueuePair(receiveCq, receiveCq);
        this.sendRegion = sendRegion;
        this.receiveRegion = receiveRegion;
        this.receiveDepth = endpoint.config().receiveQueueDepth();
    }

    /**
     * Send both of the link's queue pairs' packets (the messages to the successor, the ACKs to the predecessor) from
     * UDP source port {@code port}: one aggregation tree's port ({@link MultiTreeAllReduce#udpSourcePort}), by which
     * the switch steers the tree to its appliance. Only before {@link #connect}.
     */
    public RingLink udpSourcePort(final int port)
    {
        if (connected)
        {
            throw new IllegalStateException("the UDP source port can only be set before connect");
        }
        sendQp.udpSourcePort(port);
        receiveQp.udpSourcePort(port);
        return this;
    }

    /**
     * @throws IllegalStateException if {@link #connect} has not been called; the algorithms' constructors check it.
     */
    void requireConnected()
    {
        if (!connected)
        {
            throw new IllegalStateException("ring link is not connected");
        }
    }

    /**
     * Poll the send completion queue, then the receive completion queue, up to {@link #POLL_LIMIT} each.
     *
     * @return completions handled.
     */
    public int pollCompletions(final CompletionHandler onSend, final CompletionHandler onReceive)
    {
        return sendCq.poll(onSend, POLL_LIMIT) + receiveCq.poll(onReceive, POLL_LIMIT);
    }

    /**
     * Keep the receive queue pair's queue full. Both algorithms receive only RDMA WRITE WITH IMMEDIATE, whose data
     * lands in the receive region by address, so each receive just consumes a queue entry and carries no buffer.
     *
     * @return receives posted.
     */
    public int topUpReceives()
    {
        int posted = 0;
        while (receiveQp.postedReceives() < receiveDepth &&
            receiveQp.postRecv(0, receiveRegion, 0, 0) == QueuePair.POST_OK)
        {
            posted++;
        }
        return posted;
    }

    /**
     * @param completion a failed completion on the receive queue pair.
     * @return the error message naming the predecessor, the status and both queue pairs' state.
     */
    public String receiveFailure(final Completion completion)
    {
        return "receive on the connection from rank " + predecessor() + " failed: " +
            CompletionStatus.name(completion.status()) + " (" + describe() + ")";
    }

    /**
     * @return what the successor needs to connect its receive queue pair to our send queue pair.
     */
    public ConnectionInfo sendInfo()
    {
        return sendQp.localInfo(null);
    }

    /**
     * @return what the predecessor needs: our receive queue pair and the receive region it writes into.
     */
    public ConnectionInfo receiveInfo()
    {
        return receiveQp.localInfo(receiveRegion);
    }

    /**
     * @param successor   the successor's {@link #receiveInfo()}.
     * @param predecessor the predecessor's {@link #sendInfo()}.
     */
    public void connect(final ConnectionInfo successor, final ConnectionInfo predecessor)
    {
        if (connected)
        {
            throw new IllegalStateException("ring link already connected");
        }
        if (successor.rkey() == 0 || successor.length() <= 0)
        {
            throw new IllegalArgumentException("successor advertised no receive region: " + successor.toLine());
        }
        sendQp.connect(successor);
        receiveQp.connect(predecessor);
        successorVa = successor.va();
        successorRkey = successor.rkey();
        successorLength = successor.length();
        connected = true;
    }

    public boolean isConnected()
    {
        return connected;
    }

    public RcEndpoint endpoint()
    {
        return endpoint;
    }

    public NanoClock clock()
    {
        return clock;
    }

    public int rank()
    {
        return rank;
    }

    public int world()
    {
        return world;
    }

    public int successor()
    {
        return (rank + 1) % world;
    }

    public int predecessor()
    {
        return (rank + world - 1) % world;
    }

    public QueuePair sendQp()
    {
        return sendQp;
    }

    public QueuePair receiveQp()
    {
        return receiveQp;
    }

    public CompletionQueue sendCq()
    {
        return sendCq;
    }

    public CompletionQueue receiveCq()
    {
        return receiveCq;
    }

    public MemoryRegion sendRegion()
    {
        return sendRegion;
    }

    public MemoryRegion receiveRegion()
    {
        return receiveRegion;
    }

    public long successorVa()
    {
        return successorVa;
    }

    public int successorRkey()
    {
        return successorRkey;
    }

    public long successorLength()
    {
        return successorLength;
    }

    /**
     * @return both queue pairs' state and counters, for error messages.
     */
    public String describe()
    {
        return "rank " + rank + "/" + world + " send " + sendQp + " " + sendQp.counters() + "; receive " +
            receiveQp + " " + receiveQp.counters();
    }
}
