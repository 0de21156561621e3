package io.netreduce.worker;

import io.netreduce.host.allreduce.RingLink;
import io.netreduce.host.rc.Bootstrap;
import io.netreduce.host.rc.ConnectionInfo;
import io.netreduce.host.rc.RcEndpoint;
import org.agrona.concurrent.IdleStrategy;

import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * One rank's bootstrap connections on one ring (TCP): to its successor and from its predecessor. Over them the
 * ranks exchange queue pair numbers, PSNs, addresses, MACs and the receive region (VA, R_Key, length), hold a
 * barrier before each call, and tell each other when they are done.
 */
final class RingNeighbours
{
    private final Bootstrap toSuccessor;
    private final Bootstrap fromPredecessor;
    private final int rank;
    private final int world;
    private final int timeoutSeconds;

    private RingNeighbours(
        final Bootstrap toSuccessor, final Bootstrap fromPredecessor, final int rank, final int world,
        final int timeoutSeconds)
    {
        this.toSuccessor = toSuccessor;
        this.fromPredecessor = fromPredecessor;
        this.rank = rank;
        this.world = world;
        this.timeoutSeconds = timeoutSeconds;
    }

    /**
     * Listen on {@code base + rank} for the predecessor, connect to the successor's {@code base + successor},
     * exchange the link's connection parameters, connect the link, and wait until both neighbours are ready.
     *
     * @param opened where each connection goes as soon as it is open, for the caller to close (also when this fails).
     */
    static RingNeighbours connect(
        final RingLink link, final List<String> hosts, final int base, final int rank, final int world,
        final int timeoutSeconds, final Duration setupTimeout, final List<Bootstrap> opened)
        throws IOException, InterruptedException
    {
        final CompletableFuture<Bootstrap> fromPredecessor = new CompletableFuture<>();
        final Thread listener = Thread.ofPlatform().daemon().name("allreduce-listen").start(() ->
        {
            try
            {
                fromPredecessor.complete(Bootstrap.listen(base + rank, setupTimeout));
            }
            catch (final Throwable ex)
            {
                fromPredecessor.completeExceptionally(ex);
            }
        });
        final int successor = (rank + 1) % world;
        final Bootstrap toSuccessor = Bootstrap.connect(hosts.get(successor), base + successor, setupTimeout);
        opened.add(toSuccessor);
        final Bootstrap predecessorChannel = awaitBootstrap(fromPredecessor, setupTimeout);
        opened.add(predecessorChannel);
        listener.join();
        // Send on both channels before reading either: with sequential exchanges the ring would deadlock.
        toSuccessor.sendLine(link.sendInfo().toLine());
        predecessorChannel.sendLine(link.receiveInfo().toLine());
        final ConnectionInfo successorInfo = ConnectionInfo.parse(requireLine(toSuccessor, setupTimeout));
        final ConnectionInfo predecessorInfo = ConnectionInfo.parse(requireLine(predecessorChannel, setupTimeout));
        link.connect(successorInfo, predecessorInfo);
        toSuccessor.sendLine("ready");
        predecessorChannel.sendLine("ready");
        expectLine(toSuccessor, "ready", setupTimeout);
        expectLine(predecessorChannel, "ready", setupTimeout);
        return new RingNeighbours(toSuccessor, predecessorChannel, rank, world, timeoutSeconds);
    }

    /**
     * Tell both neighbours this rank is done, and keep the endpoint running until they are too.
     *
     * @param idleStrategy how to wait, made once the neighbours have been told.
     */
    void finish(final RcEndpoint endpoint, final Supplier<IdleStrategy> idleStrategy)
    {
        // Keep answering (ACKing retransmissions, forwarding nothing) until both neighbours are done too.
        final CompletableFuture<Void> successorDone = readAsync(toSuccessor);
        final CompletableFuture<Void> predecessorDone = readAsync(fromPredecessor);
        try
        {
            toSuccessor.sendLine("done");
            fromPredecessor.sendLine("done");
        }
        catch (final IOException ignored)
        {
            // a neighbour already gone: nothing left to wait for on that side
        }
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Math.max(timeoutSeconds, 10));
        final IdleStrategy idle = idleStrategy.get();
        while (!(successorDone.isDone() && predecessorDone.isDone()) && System.nanoTime() - deadline < 0)
        {
            idle.idle(endpoint.doWork());
        }
    }

    /**
     * A barrier over the ring's bootstrap connections: an "arrive" token from rank 0 round the ring and back, then a
     * "go" from rank 0 to rank W - 1. While waiting the endpoint keeps running, so a neighbour's last ACKs and
     * retransmissions are still answered.
     */
    void barrier(final RcEndpoint endpoint, final IdleStrategy idle, final int iteration) throws IOException
    {
        final String arrive = "arrive " + iteration;
        final String go = "go " + iteration;
        if (rank == 0)
        {
            toSuccessor.sendLine(arrive);
            awaitLine(endpoint, idle, fromPredecessor, arrive);
            toSuccessor.sendLine(go);
        }
        else
        {
            awaitLine(endpoint, idle, fromPredecessor, arrive);
            toSuccessor.sendLine(arrive);
            awaitLine(endpoint, idle, fromPredecessor, go);
            if (rank < world - 1)
            {
                toSuccessor.sendLine(go);
            }
        }
    }

    private void awaitLine(final RcEndpoint endpoint, final IdleStrategy idle, final Bootstrap from,
        final String expected) throws IOException
    {
        final CompletableFuture<String> line = new CompletableFuture<>();
        Thread.ofVirtual().name("allreduce-barrier").start(() ->
        {
            try
            {
                line.complete(from.readLine(Duration.ofSeconds(Math.max(timeoutSeconds, 30))));
            }
            catch (final IOException ex)
            {
                line.completeExceptionally(ex);
            }
        });
        while (!line.isDone())
        {
            idle.idle(endpoint.doWork());
        }
        final String got;
        try
        {
            got = line.join();
        }
        catch (final CompletionException ex)
        {
            throw new IOException("barrier: waiting for '" + expected + "' from the predecessor: " +
                ex.getCause().getMessage(), ex.getCause());
        }
        if (!expected.equals(got))
        {
            throw new IOException("barrier: expected '" + expected + "' from the predecessor, got " +
                (got == null ? "end of stream (or no line in time)" : "'" + got + "'"));
        }
    }

    private static CompletableFuture<Void> readAsync(final Bootstrap bootstrap)
    {
        final CompletableFuture<Void> done = new CompletableFuture<>();
        Thread.ofPlatform().daemon().name("allreduce-done").start(() ->
        {
            try
            {
                bootstrap.readLine();
            }
            catch (final IOException ignored)
            {
                // closed: the neighbour is gone
            }
            done.complete(null);
        });
        return done;
    }

    private static Bootstrap awaitBootstrap(final CompletableFuture<Bootstrap> future, final Duration timeout)
        throws IOException, InterruptedException
    {
        try
        {
            return future.get(timeout.toMillis() + 1000, TimeUnit.MILLISECONDS);
        }
        catch (final ExecutionException ex)
        {
            throw new IOException("predecessor did not connect: " + ex.getCause().getMessage(), ex.getCause());
        }
        catch (final TimeoutException ex)
        {
            throw new IOException("predecessor did not connect within " + timeout, ex);
        }
    }

    private static String requireLine(final Bootstrap bootstrap, final Duration timeout) throws IOException
    {
        final String line = bootstrap.readLine(timeout);
        if (line == null)
        {
            throw new IOException("a neighbour closed the bootstrap connection before sending its parameters");
        }
        return line;
    }

    private static void expectLine(final Bootstrap bootstrap, final String expected, final Duration timeout)
        throws IOException
    {
        final String line = bootstrap.readLine(timeout);
        if (!expected.equals(line))
        {
            throw new IOException("expected '" + expected + "' from a neighbour, got: " + line);
        }
    }
}
