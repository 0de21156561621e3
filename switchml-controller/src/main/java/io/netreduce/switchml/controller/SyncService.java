package io.netreduce.switchml.controller;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.netreduce.switchml.controller.proto.BarrierRequest;
import io.netreduce.switchml.controller.proto.BarrierResponse;
import io.netreduce.switchml.controller.proto.BroadcastRequest;
import io.netreduce.switchml.controller.proto.BroadcastResponse;
import io.netreduce.switchml.controller.proto.SyncGrpc;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The {@code Sync} service: barrier and broadcast among the workers of a job, with the Tofino controller's
 * semantics.
 * <ul>
 *   <li><b>Barrier.</b> One round at a time, for every caller (the protocol names no session): a round's callers
 *   are held until {@code num_workers} of them are in, then all are answered together and the next call begins
 *   the next round. A call whose {@code num_workers} differs from its round's is refused, and the round goes on
 *   without it.</li>
 *   <li><b>Broadcast.</b> Rounds are counted per rank: a rank's call belongs to the oldest round it has not yet
 *   called in (so its second call belongs to the next round). The root's value (the call whose rank equals
 *   {@code root}) answers every call of its round: those that came before it are held until it comes, those after
 *   it are answered at once. A round is forgotten when all its ranks have called.</li>
 * </ul>
 * Held calls wait as {@link StreamObserver}s, not threads: the call that completes a round answers them. A held
 * call that is cancelled (its worker gave up or died) leaves its round, so its retry counts once; a call cancelled
 * before it is handled does not join (a root's still gives its round the value). State is guarded
 * by one lock (the control plane, a few calls per job); calls are answered outside it.
 */
final class SyncService extends SyncGrpc.SyncImplBase
{
    /** Broadcast rounds open at once; a call that would open one more is refused (RESOURCE_EXHAUSTED). */
    static final int MAX_OPEN_BROADCASTS = 256;

    private static final Logger LOG = LoggerFactory.getLogger(SyncService.class.getPackageName());
    /** Refusals: any host that reaches the service can call it, so their lines are limited per caller. */
    private final RefusalLog refusals = new RefusalLog(System::nanoTime, LOG::warn);
    private static final Status SHUTTING_DOWN =
        Status.UNAVAILABLE.withDescription("the SwitchML controller is shutting down");

    private final ReentrantLock lock = new ReentrantLock();
    private final List<ServerCallStreamObserver<BarrierResponse>> barrierWaiting = new ArrayList<>();
    private int barrierWorkers;
    private final List<BroadcastRound> broadcasts = new ArrayList<>();
    private boolean closed;
    private final AtomicLong barriersCompleted = new AtomicLong();
    private final AtomicLong broadcastsCompleted = new AtomicLong();

    /** One broadcast round: who has called (a bit per rank), the root's value once it came, who waits for it. */
    private static final class BroadcastRound
    {
        final int numWorkers;
        final int root;
        long called;
        boolean hasValue;
        long value;
        final List<ServerCallStreamObserver<BroadcastResponse>> waiting = new ArrayList<>();

        BroadcastRound(final int numWorkers, final int root)
        {
            this.numWorkers = numWorkers;
            this.root = root;
        }

        boolean complete()
        {
            return called == allRanks(numWorkers);
        }
    }

    long barriersCompleted()
    {
        return barriersCompleted.get();
    }

    long broadcastsCompleted()
    {
        return broadcastsCompleted.get();
    }

    /**
     * @return callers held in the barrier round in progress.
     */
    int barrierWaiting()
    {
        lock.lock();
        try
        {
            return barrierWaiting.size();
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * @return callers held waiting for their broadcast round's root, all rounds together.
     */
    int broadcastWaiting()
    {
        lock.lock();
        try
        {
            int held = 0;
            for (final BroadcastRound round : broadcasts)
            {
                held += round.waiting.size();
            }
            return held;
        }
        finally
        {
            lock.unlock();
        }
    }

    @Override
    public void barrier(final BarrierRequest request, final StreamObserver<BarrierResponse> responseObserver)
    {
        final ServerCallStreamObserver<BarrierResponse> call = serverCall(responseObserver);
        final String invalid = checkWorkers(request.getNumWorkers());
        if (invalid != null)
        {
            fail(call, Status.INVALID_ARGUMENT.withDescription("Barrier: " + invalid));
            return;
        }
        final int numWorkers = request.getNumWorkers();
        List<ServerCallStreamObserver<BarrierResponse>> release = null;
        Status refusal = null;
        lock.lock();
        try
        {
            if (closed)
            {
                refusal = SHUTTING_DOWN;
            }
            else if (call.isCancelled())
            {
                return;
            }
            else if (!barrierWaiting.isEmpty() && numWorkers != barrierWorkers)
            {
                refusal = Status.INVALID_ARGUMENT.withDescription("Barrier: num_workers " + numWorkers +
                    " disagrees with the barrier in progress, which " + barrierWaiting.size() + " caller(s) entered" +
                    " with num_workers " + barrierWorkers);
            }
            else if (barrierWaiting.size() + 1 == numWorkers)
            {
                release = new ArrayList<>(barrierWaiting);
                release.add(call);
                barrierWaiting.clear();
                barrierWorkers = 0;
                barriersCompleted.incrementAndGet();
            }
            else
            {
                barrierWorkers = numWorkers;
                barrierWaiting.add(call);
                call.setOnCancelHandler(() -> barrierCancelled(call));
            }
        }
        finally
        {
            lock.unlock();
        }
        if (refusal != null)
        {
            final Status refused = refusal;
            refusals.refused(CallContext.peer(), () -> "SwitchML barrier call from " + CallContext.peer() +
                " refused: " + refused.getDescription());
            fail(call, refusal);
        }
        else if (release != null)
        {
            LOG.debug("SwitchML barrier of {} worker(s) complete", numWorkers);
            for (final ServerCallStreamObserver<BarrierResponse> waiter : release)
            {
                answer(waiter, BarrierResponse.getDefaultInstance());
            }
        }
    }

    private void barrierCancelled(final ServerCallStreamObserver<BarrierResponse> call)
    {
        lock.lock();
        try
        {
            if (barrierWaiting.remove(call))
            {
                LOG.debug("A SwitchML barrier caller left before the barrier completed ({} still waiting)",
                    barrierWaiting.size());
                if (barrierWaiting.isEmpty())
                {
                    barrierWorkers = 0;
                }
            }
        }
        finally
        {
            lock.unlock();
        }
    }

    @Override
    public void broadcast(final BroadcastRequest request, final StreamObserver<BroadcastResponse> responseObserver)
    {
        final ServerCallStreamObserver<BroadcastResponse> call = serverCall(responseObserver);
        final String invalid = checkBroadcast(request);
        if (invalid != null)
        {
            fail(call, Status.INVALID_ARGUMENT.withDescription("Broadcast: " + invalid));
            return;
        }
        final int rank = request.getRank();
        final long bit = 1L << rank;
        List<ServerCallStreamObserver<BroadcastResponse>> release = List.of();
        Status refusal = null;
        long value = 0;
        boolean answerNow = false;
        lock.lock();
        try
        {
            BroadcastRound round = null;
            for (final BroadcastRound open : broadcasts)
            {
                if ((open.called & bit) == 0)
                {
                    round = open;
                    break;
                }
            }
            if (closed)
            {
                refusal = SHUTTING_DOWN;
            }
            else if (call.isCancelled() && request.getRank() != request.getRoot())
            {
                return;
            }
            else if (round != null && (round.numWorkers != request.getNumWorkers() || round.root != request.getRoot()))
            {
                refusal = Status.INVALID_ARGUMENT.withDescription("Broadcast: rank " + rank + " calls with" +
                    " num_workers " + request.getNumWorkers() + " and root " + request.getRoot() +
                    ", but its round is a broadcast among " + round.numWorkers + " worker(s) from root " + round.root);
            }
            else if (round == null && broadcasts.size() >= MAX_OPEN_BROADCASTS)
            {
                refusal = Status.RESOURCE_EXHAUSTED.withDescription("Broadcast: " + MAX_OPEN_BROADCASTS +
                    " broadcast rounds are open already, none of them waiting for rank " + rank);
            }
            else
            {
                if (round == null)
                {
                    round = new BroadcastRound(request.getNumWorkers(), request.getRoot());
                    broadcasts.add(round);
                }
                round.called |= bit;
                if (rank == round.root)
                {
                    round.hasValue = true;
                    round.value = request.getValue();
                    release = new ArrayList<>(round.waiting);
                    round.waiting.clear();
                }
                if (round.hasValue)
                {
                    value = round.value;
                    answerNow = true;
                }
                else
                {
                    round.waiting.add(call);
                    final BroadcastRound joined = round;
                    call.setOnCancelHandler(() -> broadcastCancelled(joined, call, bit));
                }
                if (round.complete())
                {
                    broadcasts.remove(round);
                    broadcastsCompleted.incrementAndGet();
                }
            }
        }
        finally
        {
            lock.unlock();
        }
        if (refusal != null)
        {
            final Status refused = refusal;
            refusals.refused(CallContext.peer(), () -> "SwitchML broadcast call from " + CallContext.peer() +
                " refused: " + refused.getDescription());
            fail(call, refusal);
            return;
        }
        if (answerNow)
        {
            final BroadcastResponse response = BroadcastResponse.newBuilder().setValue(value).build();
            for (final ServerCallStreamObserver<BroadcastResponse> waiter : release)
            {
                answer(waiter, response);
            }
            answer(call, response);
        }
    }

    private void broadcastCancelled(
        final BroadcastRound round, final ServerCallStreamObserver<BroadcastResponse> call, final long bit)
    {
        lock.lock();
        try
        {
            if (round.waiting.remove(call))
            {
                round.called &= ~bit;
                if (round.called == 0)
                {
                    broadcasts.remove(round);
                }
                LOG.debug("A SwitchML broadcast caller left before its root's value came");
            }
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * Refuses new calls and fails every held one with UNAVAILABLE.
     */
    void close()
    {
        final List<ServerCallStreamObserver<?>> held = new ArrayList<>();
        lock.lock();
        try
        {
            closed = true;
            held.addAll(barrierWaiting);
            barrierWaiting.clear();
            barrierWorkers = 0;
            for (final BroadcastRound round : broadcasts)
            {
                held.addAll(round.waiting);
            }
            broadcasts.clear();
        }
        finally
        {
            lock.unlock();
        }
        for (final ServerCallStreamObserver<?> call : held)
        {
            fail(call, SHUTTING_DOWN);
        }
    }

    private static String checkWorkers(final int numWorkers)
    {
        if (numWorkers == 0 || Integer.compareUnsigned(numWorkers, SwitchMlController.MAX_WORKERS) > 0)
        {
            return "num_workers must be 1 to " + SwitchMlController.MAX_WORKERS + ", not " +
                Integer.toUnsignedString(numWorkers);
        }
        return null;
    }

    private static String checkBroadcast(final BroadcastRequest request)
    {
        final String workers = checkWorkers(request.getNumWorkers());
        if (workers != null)
        {
            return workers;
        }
        if (Integer.compareUnsigned(request.getRank(), request.getNumWorkers()) >= 0)
        {
            return "rank " + Integer.toUnsignedString(request.getRank()) + " is not below num_workers " +
                request.getNumWorkers();
        }
        if (Integer.compareUnsigned(request.getRoot(), request.getNumWorkers()) >= 0)
        {
            return "root " + Integer.toUnsignedString(request.getRoot()) + " is not below num_workers " +
                request.getNumWorkers();
        }
        return null;
    }

    private static long allRanks(final int numWorkers)
    {
        return numWorkers == 64 ? -1L : (1L << numWorkers) - 1;
    }

    static <T> ServerCallStreamObserver<T> serverCall(final StreamObserver<T> observer)
    {
        return (ServerCallStreamObserver<T>)observer;
    }

    static <T> void answer(final ServerCallStreamObserver<T> call, final T response)
    {
        try
        {
            call.onNext(response);
            call.onCompleted();
        }
        catch (final RuntimeException e)
        {
            // The caller went away between joining its round and the round completing.
            LOG.debug("Could not answer a SwitchML call (cancelled?): {}", e.toString());
        }
    }

    static void fail(final ServerCallStreamObserver<?> call, final Status status)
    {
        try
        {
            call.onError(status.asRuntimeException());
        }
        catch (final RuntimeException e)
        {
            LOG.debug("Could not fail a SwitchML call (cancelled?): {}", e.toString());
        }
    }
}
