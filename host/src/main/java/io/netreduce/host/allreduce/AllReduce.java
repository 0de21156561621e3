package io.netreduce.host.allreduce;

import org.agrona.concurrent.IdleStrategy;

/**
 * An in-place all-reduce over one {@link RingLink}, usable two ways:
 * <ul>
 *   <li>blocking, as a training framework calls it: {@link #allreduce(Tensor)} drives the endpoint until every
 *       rank's sum is in the tensor, or throws {@link AllReduceException};</li>
 *   <li>non-blocking, for callers that run several endpoints on one thread (tests, simulations):
 *       {@link #begin(Tensor)}, then {@link #poll()} after each endpoint duty cycle until {@link #isDone()}.</li>
 * </ul>
 * One object per ring, created once and reused for every call; calls must be made in the same order with tensors
 * of the same type and length on every rank. Not thread-safe: the endpoint's thread only.
 */
public interface AllReduce
{
    /**
     * Start reducing {@code tensor} in place. The tensor must not be touched until {@link #isDone()}.
     *
     * @throws IllegalStateException if a previous call has not finished or the operation has failed.
     * @throws IllegalArgumentException if the tensor does not fit the operation's configuration.
     */
    void begin(Tensor tensor);

    /**
     * Consume completions, post the sends they allow, check the timeout. Call after the endpoint's
     * {@code doWork()}.
     *
     * @return work done (0 when idle).
     * @throws AllReduceException if the all-reduce cannot complete.
     */
    int poll();

    /**
     * @return true once the tensor holds the result (and before the first {@link #begin}).
     */
    boolean isDone();

    /**
     * @return the link the operation runs on.
     */
    RingLink link();

    /**
     * @return RDMA payload bytes this worker has posted so far, all calls (headers and padding included).
     */
    long bytesPosted();

    /**
     * Reduce {@code tensor} in place, driving the endpoint on the calling thread.
     *
     * @throws AllReduceException if the all-reduce cannot complete (with the reason).
     */
    default void allreduce(final Tensor tensor, final IdleStrategy idle)
    {
        begin(tensor);
        while (!isDone())
        {
            final int work = link().endpoint().doWork() + poll();
            idle.idle(work);
        }
    }

    /**
     * {@link #allreduce(Tensor, IdleStrategy)} with the endpoint's own idle strategy: spin briefly, then block in
     * poll(2) until a frame or the endpoint's next deadline, so a rank does not take a core it shares.
     */
    default void allreduce(final Tensor tensor)
    {
        allreduce(tensor, link().endpoint().idleStrategy());
    }
}
