package io.netreduce.systemtests;

import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.NetworkNamespace;
import io.netreduce.host.allreduce.AllReduce;
import io.netreduce.host.allreduce.AllReduceException;
import io.netreduce.host.allreduce.Arithmetic;
import io.netreduce.protocol.element.ElementType;
import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.allreduce.Tensor;
import io.netreduce.host.allreduce.TensorPattern;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcConfig;
import io.netreduce.host.rc.RcEndpoint;
import org.agrona.concurrent.SystemNanoClock;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.util.function.Function;
import java.util.function.IntSupplier;

/**
 * W workers of one ring, in this JVM: rank r is a software RC endpoint on an AF_PACKET port opened inside the
 * test bed's worker namespace r, so its frames cross the real veth, bridge, tc redirect and appliance. The ring's
 * connection parameters are exchanged in memory (the CLI does the same over TCP). All ranks are driven from the
 * calling thread, round robin, with the non-blocking {@link AllReduce} API: one busy thread instead of W, which
 * matters on a 2-core machine, and no rank can starve another of CPU.
 */
final class WorkerRing implements AutoCloseable
{
    /** Inputs of rank r, iteration i: {@link TensorPattern} with this seed, as the CLI's. */
    static final long SEED = 42;

    private final int world;
    private final RcEndpoint[] endpoints;
    private final RingLink[] links;
    /** Rings added on the same endpoints ({@link #addRing}): a job's aggregation trees. */
    private final java.util.List<RingLink[]> addedRings = new java.util.ArrayList<>();

    /**
     * @param rc per-rank RC settings (PMTU, retransmission timeout, send-side drop probability and seed).
     */
    WorkerRing(final TestBed bed, final int world, final Function<Integer, RcConfig> rc, final int sendBytes,
        final int receiveBytes)
    {
        this(bed, 0, world, rc, sendBytes, receiveBytes);
    }

    /**
     * @param firstWorker the bed's worker that is rank 0; rank r is worker firstWorker + r.
     */
    WorkerRing(final TestBed bed, final int firstWorker, final int world, final Function<Integer, RcConfig> rc,
        final int sendBytes, final int receiveBytes)
    {
        this.world = world;
        endpoints = new RcEndpoint[world];
        links = new RingLink[world];
        try
        {
            for (int r = 0; r < world; r++)
            {
                final AfPacketPort port = openPort(bed.workerNamespace(firstWorker + r), true);
                endpoints[r] = new RcEndpoint(port, rc.apply(r), SystemNanoClock.INSTANCE,
                    TestBed.workerIp(firstWorker + r),
                    ConnectionInfo.macFromBytes(port.macAddress()));
                links[r] = new RingLink(endpoints[r], SystemNanoClock.INSTANCE, r, world, sendBytes, receiveBytes);
            }
        }
        catch (final RuntimeException ex)
        {
            close();
            throw ex;
        }
        for (int r = 0; r < world; r++)
        {
            links[r].connect(links[(r + 1) % world].receiveInfo(), links[(r + world - 1) % world].sendInfo());
        }
    }

    /**
     * Another ring of the same ranks on the same endpoints (two new queue pairs per rank), its packets sent from
     * UDP source port {@code udpSourcePort}: one aggregation tree of a job (MultiTreeAllReduce), which the bed's
     * switch steers to the tree's appliance by that port.
     *
     * @return rank r's link of the new ring, connected.
     */
    RingLink[] addRing(final int udpSourcePort, final int sendBytes, final int receiveBytes)
    {
        final RingLink[] ring = new RingLink[world];
        for (int r = 0; r < world; r++)
        {
            ring[r] = new RingLink(endpoints[r], SystemNanoClock.INSTANCE, r, world, sendBytes, receiveBytes)
                .udpSourcePort(udpSourcePort);
        }
        for (int r = 0; r < world; r++)
        {
            ring[r].connect(ring[(r + 1) % world].receiveInfo(), ring[(r + world - 1) % world].sendInfo());
        }
        addedRings.add(ring);
        return ring;
    }

    /**
     * A port that sees every frame on the namespace's eth0 (a tap, a stranger's sender, a SwitchML worker's).
     */
    static AfPacketPort openPort(final String namespace)
    {
        return openPort(namespace, false);
    }

    /**
     * @param roceOnly RoCEv2 only, and from the endpoint's first queue pair on only RoCE to its own QPs (the
     *                 kernel's socket filter), as `netreduce worker allreduce` opens an endpoint's port.
     */
    static AfPacketPort openPort(final String namespace, final boolean roceOnly)
    {
        // With segmentation offload, as `netreduce worker allreduce` opens it: the appliance's (on by default) result
        // batches reach a worker whole over veth, as they reach a NIC that splits them.
        final AfPacketConfiguration config = AfPacketConfiguration.defaults("eth0")
            .withTxRing(8192, 512)
            .withSegmentationOffload(true)
            .withRoceOnly(roceOnly);
        return NetworkNamespace.callIn(namespace, () -> AfPacketPort.open(config));
    }

    RingLink link(final int rank)
    {
        return links[rank];
    }

    RcEndpoint endpoint(final int rank)
    {
        return endpoints[rank];
    }

    /** What one all-reduce call did on every rank. */
    record Outcome(AllReduceException[] failures, long elapsedNs)
    {
        boolean allSucceeded()
        {
            for (final AllReduceException failure : failures)
            {
                if (failure != null)
                {
                    return false;
                }
            }
            return true;
        }

        String describe()
        {
            final StringBuilder text = new StringBuilder();
            for (int r = 0; r < failures.length; r++)
            {
                if (failures[r] != null)
                {
                    text.append("\n  rank ").append(r).append(": ").append(failures[r].getMessage());
                }
            }
            return text.toString();
        }
    }

    /**
     * One all-reduce on every rank, driven until every rank is done or has failed.
     *
     * @param extraWork  run once per round (e.g. an intruder's sender); its return value counts as work.
     * @param deadlineNs hard bound on the call: past it the test fails with every link's state (a hang is a bug).
     */
    Outcome allReduce(final AllReduce[] ops, final Tensor[] tensors, final IntSupplier extraWork, final long deadlineNs)
    {
        final AllReduceException[] failures = new AllReduceException[world];
        final boolean[] finished = new boolean[world];
        final long start = System.nanoTime();
        for (int r = 0; r < world; r++)
        {
            ops[r].begin(tensors[r]);
        }
        int remaining = world;
        int idleRounds = 0;
        while (remaining > 0)
        {
            int work = extraWork.getAsInt();
            for (final RcEndpoint endpoint : endpoints)
            {
                work += endpoint.doWork();
            }
            for (int r = 0; r < world; r++)
            {
                if (finished[r])
                {
                    continue;
                }
                try
                {
                    work += ops[r].poll();
                    if (ops[r].isDone())
                    {
                        finished[r] = true;
                        remaining--;
                    }
                }
                catch (final AllReduceException ex)
                {
                    failures[r] = ex;
                    finished[r] = true;
                    remaining--;
                }
            }
            if (System.nanoTime() - start > deadlineNs)
            {
                final StringBuilder state = new StringBuilder("all-reduce still running after " +
                    deadlineNs / 1_000_000 + " ms:");
                for (final RingLink link : links)
                {
                    state.append("\n  ").append(link.describe());
                }
                for (final RingLink[] ring : addedRings)
                {
                    for (final RingLink link : ring)
                    {
                        state.append("\n  ").append(link.describe());
                    }
                }
                throw new AssertionError(state.toString());
            }
            if (work == 0 && ++idleRounds > 16)
            {
                Thread.yield();
            }
            else if (work > 0)
            {
                idleRounds = 0;
            }
        }
        // Keep the endpoints answering for a moment, so that the last ACKs reach senders of the next call.
        return new Outcome(failures, System.nanoTime() - start);
    }

    /**
     * Fresh tensors for iteration {@code iteration}: rank r's input pattern.
     */
    Tensor[] inputs(final ElementType type, final int elements, final int iteration)
    {
        final Tensor[] tensors = new Tensor[world];
        for (int r = 0; r < world; r++)
        {
            tensors[r] = new Tensor(type, new UnsafeBuffer(ByteBuffer.allocateDirect(elements * type.size())), 0,
                elements);
            TensorPattern.fill(tensors[r], SEED, r, iteration);
        }
        return tensors;
    }

    /**
     * @return null if every rank holds the appliance's exact rank-order sum, else the first difference.
     */
    String checkRankOrderSum(final Tensor[] tensors, final int iteration)
    {
        return checkSum(tensors, iteration, null);
    }

    /**
     * @param rackFirst the first rank of each rack of a multi-rack ring, or null for a flat ring.
     * @return null if every rank holds the exact sum (the hierarchy's, {@link Arithmetic#hierarchicalSum}, for a
     * multi-rack ring), else the first difference.
     */
    String checkSum(final Tensor[] tensors, final int iteration, final int[] rackFirst)
    {
        final ElementType type = tensors[0].type();
        final Arithmetic.Inputs inputs = (rank, index) -> TensorPattern.bits(type, SEED, rank, iteration, index);
        for (int i = 0; i < tensors[0].elements(); i++)
        {
            final int expected = rackFirst == null ? Arithmetic.rankOrderSum(type, world, inputs, i) :
                Arithmetic.hierarchicalSum(type, world, rackFirst, inputs, i);
            for (int r = 0; r < world; r++)
            {
                final int actual = Arithmetic.get(tensors[r], i);
                if (actual != expected)
                {
                    return "rank " + r + " iteration " + iteration + " element " + i + ": expected 0x" +
                        Integer.toHexString(expected) + " got 0x" + Integer.toHexString(actual) + " (seed " + SEED +
                        ")";
                }
            }
        }
        return null;
    }

    /**
     * @return packets the endpoints' fault injectors dropped (requests and ACKs), all ranks.
     */
    long endpointDrops()
    {
        long drops = 0;
        for (final RingLink link : links)
        {
            drops += link.sendQp().counters().sendDrops() + link.receiveQp().counters().sendDrops();
        }
        return drops;
    }

    @Override
    public void close()
    {
        for (final RcEndpoint endpoint : endpoints)
        {
            if (endpoint != null)
            {
                endpoint.close();
            }
        }
    }
}
