package io.netreduce.switchml.controller;

import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.MultiThreadIoEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.nio.NioIoHandler;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.netty.shaded.io.netty.util.concurrent.DefaultThreadFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The gRPC service of p4app-switchML's controller ({@code dev_root/controller/grpc_server.py}), so that the
 * unmodified SwitchML client library registers with this appliance as it would with the Tofino's Python
 * controller: services {@code switchml_proto.Session} (UdpSession; RdmaSession answers UNIMPLEMENTED) and
 * {@code switchml_proto.Sync} (Barrier, Broadcast), over plaintext HTTP/2 (the client uses insecure credentials).
 * <p>
 * <b>What it does.</b> Barrier and broadcast are answered here, with the Tofino controller's semantics (see
 * {@link SyncService}); a UDP session request is checked (1 to {@link #MAX_WORKERS} workers, rank below them, a
 * 48-bit MAC, a session id other than 0) and handed to the daemon's {@link UdpSessions}, whose answer (the
 * appliance's MAC and address, or a refusal) goes back to the worker. A refusal is answered as upstream answers
 * one: session id, MAC and address 0 with status OK (the published client does not look at them: it goes on and
 * sends to address 0, so the reason in the log matters); the reason also travels in the trailer
 * {@code netreduce-session-refused}, which {@link SwitchMlControllerClient} reads.
 * <p>
 * <b>Threads.</b> One Netty event loop thread ({@code netreduce-switchml-grpc-io}) does the I/O; the handlers run
 * on {@link #HANDLER_THREADS} threads ({@code netreduce-switchml-grpc}). Nothing waits on a thread: a barrier or
 * broadcast caller that must wait is held as its response observer and answered by the call that completes its
 * round. Only {@link UdpSessions#open} may block a handler thread. All threads are daemon threads.
 * <p>
 * <b>Security.</b> Anything that reaches the listen address can call: open sessions, enter barriers (and so
 * release or stall other workers' barriers) and answer broadcasts. There is no authentication in the protocol.
 * This module does not decide who may open a session; the daemon does, in {@link UdpSessions#open}, which is given
 * the caller's TCP address ({@link UdpSessionRequest#peer()}) for that purpose. Listen on the job network's address
 * only, not on every interface.
 */
public final class SwitchMlController implements AutoCloseable
{
    /** Workers per barrier, broadcast or session: the protocol's bitmaps here are 64 bits. */
    public static final int MAX_WORKERS = 64;
    /** Handler threads. */
    public static final int HANDLER_THREADS = 4;
    /** Largest request accepted, in bytes (the protocol's requests are a few dozen bytes). */
    public static final int MAX_REQUEST_BYTES = 64 * 1024;

    private static final Logger LOG = LoggerFactory.getLogger(SwitchMlController.class.getPackageName());

    private final Server server;
    private final EventLoopGroup eventLoop;
    private final ExecutorService handlers;
    private final SyncService sync;
    private final SessionService session;
    private final InetSocketAddress address;
    private final AtomicBoolean closed = new AtomicBoolean();

    private SwitchMlController(
        final Server server, final EventLoopGroup eventLoop, final ExecutorService handlers,
        final SyncService sync, final SessionService session)
    {
        this.server = server;
        this.eventLoop = eventLoop;
        this.handlers = handlers;
        this.sync = sync;
        this.session = session;
        final SocketAddress bound = server.getListenSockets().getFirst();
        this.address = (InetSocketAddress)bound;
    }

    /**
     * Binds {@code listen} and starts serving.
     *
     * @param listen the address to listen on; port 0 picks a free port ({@link #address()} tells which).
     * @param sessions what to do when a worker opens a UDP session.
     * @return the running controller.
     * @throws IOException when the address cannot be bound.
     */
    public static SwitchMlController start(final InetSocketAddress listen, final UdpSessions sessions)
        throws IOException
    {
        Objects.requireNonNull(listen, "listen");
        final SessionService session = new SessionService(sessions);
        final SyncService sync = new SyncService();
        final EventLoopGroup eventLoop = new MultiThreadIoEventLoopGroup(
            1, new DefaultThreadFactory("netreduce-switchml-grpc-io", true), NioIoHandler.newFactory());
        final ExecutorService handlers = Executors.newFixedThreadPool(
            HANDLER_THREADS, Thread.ofPlatform().name("netreduce-switchml-grpc-", 0).daemon(true).factory());
        final Server server = NettyServerBuilder.forAddress(listen, InsecureServerCredentials.create())
            .channelType(NioServerSocketChannel.class)
            .bossEventLoopGroup(eventLoop)
            .workerEventLoopGroup(eventLoop)
            .executor(handlers)
            .maxInboundMessageSize(MAX_REQUEST_BYTES)
            .intercept(new CallContext())
            .addService(session)
            .addService(sync)
            .build();
        try
        {
            server.start();
        }
        catch (final IOException e)
        {
            release(server, eventLoop, handlers);
            throw new IOException("SwitchML controller: cannot listen on " + listen + ": " + e.getMessage(), e);
        }
        catch (final RuntimeException e)
        {
            release(server, eventLoop, handlers);
            throw e;
        }
        final SwitchMlController controller = new SwitchMlController(server, eventLoop, handlers, sync, session);
        LOG.info("SwitchML controller listening on {}", controller.address());
        return controller;
    }

    private static void release(final Server server, final EventLoopGroup eventLoop, final ExecutorService handlers)
    {
        server.shutdownNow();
        handlers.shutdownNow();
        eventLoop.shutdownGracefully(0, 1, TimeUnit.SECONDS);
    }

    /**
     * @return the address the controller listens on (the actual port when port 0 was asked for).
     */
    public InetSocketAddress address()
    {
        return address;
    }

    /**
     * @return barrier rounds completed (every caller of the round answered).
     */
    public long barriersCompleted()
    {
        return sync.barriersCompleted();
    }

    /**
     * @return broadcast rounds completed (every rank of the round has called).
     */
    public long broadcastsCompleted()
    {
        return sync.broadcastsCompleted();
    }

    /**
     * @return UDP sessions opened (requests {@link UdpSessions#open} accepted).
     */
    public long sessionsOpened()
    {
        return session.sessionsOpened();
    }

    /**
     * @return UDP session requests not opened: malformed, refused by {@link UdpSessions#open}, or failed in it.
     */
    public long sessionsRefused()
    {
        return session.sessionsRefused();
    }

    /** For tests: callers held in the barrier round in progress. */
    int barrierWaiting()
    {
        return sync.barrierWaiting();
    }

    /** For tests: callers held waiting for a broadcast root. */
    int broadcastWaiting()
    {
        return sync.broadcastWaiting();
    }

    /**
     * Stops serving: callers held in a barrier or broadcast get UNAVAILABLE, new calls are refused, the listening
     * socket is closed and the threads end. Waits up to a few seconds for calls in progress. Idempotent.
     */
    @Override
    public void close()
    {
        if (!closed.compareAndSet(false, true))
        {
            return;
        }
        sync.close();
        server.shutdown();
        try
        {
            if (!server.awaitTermination(2, TimeUnit.SECONDS))
            {
                server.shutdownNow();
                server.awaitTermination(2, TimeUnit.SECONDS);
            }
        }
        catch (final InterruptedException e)
        {
            server.shutdownNow();
            Thread.currentThread().interrupt();
        }
        handlers.shutdown();
        eventLoop.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(5, TimeUnit.SECONDS);
        LOG.info("SwitchML controller on {} stopped", address);
    }
}
