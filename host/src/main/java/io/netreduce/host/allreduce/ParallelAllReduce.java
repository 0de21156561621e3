package io.netreduce.host.allreduce;

import io.netreduce.host.rc.RcEndpoint;
import io.netreduce.protocol.element.ElementType;
import org.agrona.concurrent.IdleStrategy;

import java.util.ArrayList;
import java.util.List;

/**
 * Parallel NetReduce (paper §3.4) on one host with n local workers (GPUs): the job has n rings, local worker i is
 * this host's rank in ring i. One call all-reduces the n local workers' tensors (same type and length) in place:
 * <ol>
 *   <li><b>intra-host reduce-scatter</b> through shared memory: each tensor is split into n contiguous parts
 *       (part i = elements [i·E/n, (i+1)·E/n)); local worker i sums part i of all n local tensors, in local order,
 *       into its own tensor (floats accumulated in fp32 and rounded once, as a leaf appliance does);</li>
 *   <li><b>inter-host all-reduce</b>: local worker i all-reduces its part i on ring i (any {@link AllReduce}: the
 *       appliance's NetReduce, or the ring baseline), all n rings at once;</li>
 *   <li><b>intra-host all-gather</b> through shared memory: local worker i's part i is copied into every other
 *       local tensor.</li>
 * </ol>
 * With the appliance the result is the two-level sum of {@link Arithmetic#hierarchicalSum} with one "rack" per
 * host (host h's local worker j being global rank h·n + j): bit for bit the same on every local worker of every
 * host.
 * <p>
 * The local workers here are n tensors in one process's memory (threads or processes standing for GPUs would map
 * the same memory); the reduce-scatter and all-gather run on the calling thread, and the n rings' queue pairs may
 * share one {@link RcEndpoint} (distinct QPNs) or have one each. Not thread-safe; non-blocking like
 * {@link AllReduce}: {@link #begin}, then {@link #poll} after the endpoints' duty cycles until {@link #isDone}.
 */
public final class ParallelAllReduce
{
    private final AllReduce[] rings;
    private final RcEndpoint[] endpoints;
    private Tensor[] local;
    private boolean running;
    private long startNs;
    private long ringsStartNs;
    private long ringsDoneNs;
    private long reduceScatterNs;
    private long ringNs;
    private long allGatherNs;

    /**
     * @param rings ring i's operation, whose link is local worker i's (rank = this host's index in every ring).
     */
    public ParallelAllReduce(final AllReduce... rings)
    {
        if (rings.length < 1)
        {
            throw new IllegalArgumentException("need at least one ring");
        }
        this.rings = rings.clone();
        final List<RcEndpoint> distinct = new ArrayList<>();
        for (final AllReduce ring : rings)
        {
            final RcEndpoint endpoint = ring.link().endpoint();
            if (!distinct.contains(endpoint))
            {
                distinct.add(endpoint);
            }
        }
        endpoints = distinct.toArray(new RcEndpoint[0]);
    }

    /**
     * @return n, the local workers (= rings).
     */
    public int localWorkers()
    {
        return rings.length;
    }

    /**
     * @return the first element of part {@code i} of a tensor of {@code elements} elements split n ways
     * ({@code i = n} gives {@code elements}).
     */
    public static int partStart(final int elements, final int n, final int i)
    {
        return (int)((long)i * elements / n);
    }

    /**
     * Run the intra-host reduce-scatter and start the n rings. The tensors must not be touched until
     * {@link #isDone()}.
     *
     * @param localTensors local worker j's tensor at index j; n tensors of one type and length, at least n elements.
     */
    public void begin(final Tensor... localTensors)
    {
        if (running)
        {
            throw new IllegalStateException("a parallel all-reduce is still running");
        }
        final int n = rings.length;
        if (localTensors.length != n)
        {
            throw new IllegalArgumentException(localTensors.length + " tensors for " + n + " local workers");
        }
        final ElementType type = localTensors[0].type();
        final int elements = localTensors[0].elements();
        for (final Tensor tensor : localTensors)
        {
            if (tensor.type() != type || tensor.elements() != elements)
            {
                throw new IllegalArgumentException("local tensors differ in type or length");
            }
        }
        if (elements < n)
        {
            throw new IllegalArgumentException(elements + " elements cannot be split across " + n + " rings");
        }
        local = localTensors.clone();
        startNs = System.nanoTime();
        for (int i = 0; i < n; i++)
        {
            reduceInto(i);
        }
        ringsStartNs = System.nanoTime();
        reduceScatterNs = ringsStartNs - startNs;
        running = true;
        for (int i = 0; i < n; i++)
        {
            rings[i].begin(part(local[i], i));
        }
    }

    /**
     * Poll every ring; once all are done, run the intra-host all-gather.
     *
     * @return work done.
     * @throws AllReduceException if a ring fails (the tensors' contents are then undefined).
     */
    public int poll()
    {
        if (!running)
        {
            return 0;
        }
        int work = 0;
        boolean done = true;
        for (final AllReduce ring : rings)
        {
            if (!ring.isDone())
            {
                work += ring.poll();
                done &= ring.isDone();
            }
        }
        if (done)
        {
            ringsDoneNs = System.nanoTime();
            ringNs = ringsDoneNs - ringsStartNs;
            allGather();
            allGatherNs = System.nanoTime() - ringsDoneNs;
            running = false;
            local = null;
            work++;
        }
        return work;
    }

    public boolean isDone()
    {
        return !running;
    }

    /**
     * All-reduce in place, driving every ring's endpoint on the calling thread.
     */
    public void allreduce(final IdleStrategy idle, final Tensor... localTensors)
    {
        begin(localTensors);
        while (running)
        {
            int work = 0;
            for (final RcEndpoint endpoint : endpoints)
            {
                work += endpoint.doWork();
            }
            work += poll();
            idle.idle(work);
        }
    }

    /** Nanoseconds the last call spent in the intra-host reduce-scatter. */
    public long reduceScatterNs()
    {
        return reduceScatterNs;
    }

    /** Nanoseconds from the rings' start until the last of them finished, last call. */
    public long ringNs()
    {
        return ringNs;
    }

    /** Nanoseconds the last call spent in the intra-host all-gather. */
    public long allGatherNs()
    {
        return allGatherNs;
    }

    /** Ring i's operation. */
    public AllReduce ring(final int i)
    {
        return rings[i];
    }

    private Tensor part(final Tensor tensor, final int i)
    {
        final int n = rings.length;
        final int first = partStart(tensor.elements(), n, i);
        final int count = partStart(tensor.elements(), n, i + 1) - first;
        return new Tensor(tensor.type(), tensor.buffer(), tensor.offset() + first * tensor.type().size(), count);
    }

    /** Local worker i: part i of every local tensor summed, in local order, into local[i]. */
    private void reduceInto(final int i)
    {
        final int n = rings.length;
        if (n == 1)
        {
            return;
        }
        final Tensor dst = local[i];
        final ElementType type = dst.type();
        final int first = partStart(dst.elements(), n, i);
        final int end = partStart(dst.elements(), n, i + 1);
        // Fast path, whole runs with Arithmetic.addInto (one rounding per add): exact to the local-order sum when
        // the adds are associative (int32), or when dst = x_i with i <= 1 (x_i + x_(1-i) = x0 + x1, then x2, x3, ...
        // in order) and each add rounds to the accumulator's own type (fp32; fp16/bf16 only with two inputs).
        if (type == ElementType.INT32 || i <= 1 && (type == ElementType.FP32 || n == 2))
        {
            for (int j = 0; j < n; j++)
            {
                if (j != i)
                {
                    final Tensor src = local[j];
                    Arithmetic.addInto(type, dst.buffer(), dst.offset() + first * type.size(), src.buffer(),
                        src.offset() + first * type.size(), (end - first) * type.size());
                }
            }
            return;
        }
        // General case: element by element in local order 0..n-1, fp32 accumulator, one rounding.
        for (int e = first; e < end; e++)
        {
            if (type == ElementType.INT32)
            {
                int acc = 0;
                for (int j = 0; j < n; j++)
                {
                    acc += Arithmetic.get(local[j], e);
                }
                Arithmetic.put(dst, e, acc);
            }
            else
            {
                float acc = Arithmetic.toFloat(type, Arithmetic.get(local[0], e));
                for (int j = 1; j < n; j++)
                {
                    acc += Arithmetic.toFloat(type, Arithmetic.get(local[j], e));
                }
                Arithmetic.put(dst, e, Arithmetic.fromFloat(type, acc));
            }
        }
    }

    private void allGather()
    {
        final int n = rings.length;
        for (int i = 0; i < n; i++)
        {
            final Tensor src = local[i];
            final int size = src.type().size();
            final int first = partStart(src.elements(), n, i);
            final int bytes = (partStart(src.elements(), n, i + 1) - first) * size;
            for (int j = 0; j < n; j++)
            {
                if (j != i)
                {
                    local[j].buffer().putBytes(local[j].offset() + first * size, src.buffer(),
                        src.offset() + first * size, bytes);
                }
            }
        }
    }
}
