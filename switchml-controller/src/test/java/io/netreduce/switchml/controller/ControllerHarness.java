package io.netreduce.switchml.controller;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.BooleanSupplier;

/**
 * A controller on 127.0.0.1 with a port of its own, a recording {@link UdpSessions}, and threads to make calls on
 * (virtual threads: a blocked gRPC call costs no platform thread).
 */
final class ControllerHarness implements AutoCloseable
{
    static final UdpSessionReply APPLIANCE = new UdpSessionReply(0x0277_0000_00FEL, 0x0A00_00FE);

    final Recording sessions = new Recording();
    final SwitchMlController controller;
    private final ExecutorService threads = Executors.newVirtualThreadPerTaskExecutor();
    private final List<SwitchMlControllerClient> clients = new ArrayList<>();

    ControllerHarness() throws Exception
    {
        controller = SwitchMlController.start(new InetSocketAddress("127.0.0.1", 0), sessions);
    }

    /** A new client (own channel, as each worker has), closed with the harness. */
    SwitchMlControllerClient client()
    {
        final SwitchMlControllerClient client =
            new SwitchMlControllerClient("127.0.0.1", controller.address().getPort());
        synchronized (clients)
        {
            clients.add(client);
        }
        return client;
    }

    <T> Future<T> async(final Callable<T> call)
    {
        return threads.submit(call);
    }

    static void await(final BooleanSupplier condition, final String what) throws InterruptedException
    {
        final long deadline = System.nanoTime() + 5_000_000_000L;
        while (!condition.getAsBoolean())
        {
            if (System.nanoTime() > deadline)
            {
                throw new AssertionError("timed out waiting until " + what);
            }
            Thread.sleep(2);
        }
    }

    @Override
    public void close()
    {
        controller.close();
        synchronized (clients)
        {
            clients.forEach(SwitchMlControllerClient::close);
        }
        threads.shutdownNow();
    }

    /** Records every request; refuses the ranks it is told to; rank 0's open takes a while. */
    static final class Recording implements UdpSessions
    {
        final List<UdpSessionRequest> requests = new ArrayList<>();
        volatile int refuseRank = -1;
        volatile long rankZeroDelayMillis;

        @Override
        public UdpSessionReply open(final UdpSessionRequest request) throws SessionRefusedException
        {
            if (request.rank() == 0 && rankZeroDelayMillis > 0)
            {
                try
                {
                    Thread.sleep(rankZeroDelayMillis);
                }
                catch (final InterruptedException e)
                {
                    Thread.currentThread().interrupt();
                }
            }
            synchronized (requests)
            {
                requests.add(request);
            }
            if (request.rank() == refuseRank)
            {
                throw new SessionRefusedException("rank " + request.rank() + " is not a member of job 7");
            }
            return APPLIANCE;
        }

        List<UdpSessionRequest> requests()
        {
            synchronized (requests)
            {
                return List.copyOf(requests);
            }
        }
    }
}
