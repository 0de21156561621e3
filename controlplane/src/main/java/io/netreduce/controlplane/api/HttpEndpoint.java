package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ConfigFaultException;
import io.netreduce.controlplane.config.ListenAddress;
import io.netreduce.controlplane.config.ListenCheck;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerDomainSocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpResponse;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpResponseStatus;
import io.netty.handler.codec.http.HttpServerCodec;
import io.netty.handler.codec.http.HttpUtil;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.handler.codec.http.QueryStringDecoder;
import io.netty.util.concurrent.DefaultEventExecutorGroup;
import io.netty.util.concurrent.DefaultThreadFactory;
import io.netty.util.concurrent.EventExecutorGroup;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A small HTTP/1.1 server on Netty for the control API and the metrics endpoint, listening on TCP or on a Unix
 * domain socket (Netty's NIO domain-socket channel over the JDK's {@code UnixDomainSocketAddress}, so no native
 * transport library is needed). One I/O thread; requests are handled on a separate single thread so a handler
 * that takes a lock or reads a file never stalls the I/O loop. Bodies over {@link #MAX_BODY_BYTES} get 413.
 * <p>
 * Against a client that holds connections ({@link Limits}): each request has a deadline from the connection's start
 * or its previous answer, however slowly its bytes come; connections are capped in total and per peer, and the
 * owner's (those that showed the token; every one on a Unix socket, which only the owner can open) are never
 * closed to make room, while a new connection closes the oldest one that has not; too many pipelined requests are
 * answered as far as they fit, then refused.
 */
public final class HttpEndpoint implements AutoCloseable
{
    /** Largest request body accepted. */
    public static final int MAX_BODY_BYTES = 1 << 20;

    /**
     * What one client may hold.
     *
     * @param requestDeadlineMillis a connection must deliver a whole request (head and body) within this long of its
     *                              start or of its previous answer, or it is closed: a request trickled a byte at a
     *                              time cannot hold its connection (an idle timeout that each byte restarts could).
     * @param maxConnections        connections open at once.
     * @param maxConnectionsPerPeer connections of one peer address that have not shown the owner's token; a new one
     *                              beyond it closes that peer's oldest.
     * @param maxPipelined          requests read but not yet answered on one connection; the next one is answered
     *                              429 and the connection closes.
     */
    public record Limits(int requestDeadlineMillis, int maxConnections, int maxConnectionsPerPeer, int maxPipelined)
    {
        /** 10 s per request, 64 connections, 16 per peer, 128 pipelined requests. */
        public static final Limits DEFAULT = new Limits(10_000, 64, 16, 128);

        public Limits withRequestDeadlineMillis(final int millis)
        {
            return new Limits(millis, maxConnections, maxConnectionsPerPeer, maxPipelined);
        }
    }
    /**
     * Threads that handle requests: more than one, so health and reads answer while another request (a reload,
     * an install waiting for the dataplane) takes its time.
     */
    public static final int HANDLER_THREADS = 4;
    private static final Logger LOG = LoggerFactory.getLogger(HttpEndpoint.class);

    private final String name;
    private final ListenAddress requested;
    private final EventLoopGroup group;
    private final EventExecutorGroup handlerExecutor;
    private final Channel channel;
    private final ConnectionSlots slots;

    /**
     * A socket file left by a previous run would make bind fail, and the path is ours by configuration; anything
     * else at that path (a regular file, a directory) is not ours to delete.
     */
    private static void removeStaleSocket(final String name, final ListenAddress address) throws IOException
    {
        final java.nio.file.Path path = address.unixPath();
        if (!Files.exists(path, java.nio.file.LinkOption.NOFOLLOW_LINKS))
        {
            if (path.getParent() != null && !Files.isDirectory(path.getParent()))
            {
                throw new IOException("directory " + path.getParent() + " does not exist");
            }
            return;
        }
        if (!isSocket(path))
        {
            throw new IOException(path + " exists and is not a socket; refusing to delete it");
        }
        Files.delete(path);
    }

    /**
     * @return whether {@code path} is a Unix domain socket (file type bits S_IFSOCK).
     */
    public static boolean isSocket(final java.nio.file.Path path) throws IOException
    {
        final int mode = (Integer)Files.getAttribute(path, "unix:mode", java.nio.file.LinkOption.NOFOLLOW_LINKS);
        return (mode & 0170000) == 0140000;
    }

    private HttpEndpoint(
        final String name,
        final ListenAddress address,
        final RequestHandler handler,
        final AccessPolicy policy,
        final Limits limits)
        throws InterruptedException
    {
        this.name = name;
        this.slots = new ConnectionSlots(limits.maxConnections(), limits.maxConnectionsPerPeer());
        this.requested = address;
        this.group = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("netreduce-" + name + "-io", true),
            NioIoHandler.newFactory());
        this.handlerExecutor = new DefaultEventExecutorGroup(HANDLER_THREADS,
            new DefaultThreadFactory("netreduce-" + name, true));
        final Class<? extends ServerChannel> channelType =
            address.isUnix() ? NioServerDomainSocketChannel.class : NioServerSocketChannel.class;
        try
        {
            if (address.isUnix())
            {
                removeStaleSocket(name, address);
            }
            final ServerBootstrap bootstrap = new ServerBootstrap()
                .group(group)
                .channel(channelType)
                .childHandler(new ChannelInitializer<>()
                {
                    @Override
                    protected void initChannel(final Channel ch)
                    {
                        // On a Unix socket (mode 0600) every connection is the owner's.
                        if (!slots.admit(ch, address.isUnix()))
                        {
                            ch.close();
                            return;
                        }
                        ch.closeFuture().addListener(future -> slots.closed(ch));
                        ch.pipeline()
                            // The codec's own pipelining limit closes the connection with every answer unsent;
                            // the dispatcher keeps the limit instead, and answers what fits.
                            .addLast(new HttpServerCodec(new io.netty.handler.codec.http.HttpDecoderConfig(),
                                Integer.MAX_VALUE))
                            .addLast(new HttpObjectAggregator(MAX_BODY_BYTES))
                            .addLast(new Dispatcher(handler, policy, handlerExecutor, slots, limits));
                    }
                });
            this.channel = bootstrap.bind(address.toSocketAddress()).sync().channel();
            if (address.isUnix())
            {
                // Owner only: the socket is the API's only access control when it is not on TCP.
                Files.setPosixFilePermissions(address.unixPath(), PosixFilePermissions.fromString("rw-------"));
            }
        }
        catch (final IOException ex)
        {
            shutdownThreads();
            // Name the setting and the address: "Address already in use" alone does not say which of the two.
            final String message = "appliance." + name + ".listen: cannot listen on " + address + ": " +
                ex.getMessage();
            if (ListenCheck.inUse(ex))
            {
                throw new UncheckedIOException(message, ex);
            }
            // Anything else (no such directory, not a socket, no permission, not this host's address) is what the
            // configuration says: starting again will not help.
            throw new ConfigFaultException(message, ex);
        }
        catch (final RuntimeException | InterruptedException ex)
        {
            shutdownThreads();
            throw ex;
        }
    }

    /**
     * Bind and start serving.
     *
     * @param name    a short name for threads and logs, e.g. {@code api}.
     * @param address where to listen; TCP port 0 picks a free port.
     * @param handler answers requests.
     * @return the running endpoint.
     * @throws InterruptedException if interrupted while binding.
     */
    public static HttpEndpoint start(final String name, final ListenAddress address, final RequestHandler handler)
        throws InterruptedException
    {
        return start(name, address, handler, null);
    }

    /**
     * Bind and start serving requests the policy admits.
     *
     * @param policy who may use the endpoint, or null to admit every request.
     */
    public static HttpEndpoint start(
        final String name, final ListenAddress address, final RequestHandler handler, final AccessPolicy policy)
        throws InterruptedException
    {
        return start(name, address, handler, policy, Limits.DEFAULT);
    }

    /**
     * Bind and start serving requests the policy admits, within the given limits.
     */
    public static HttpEndpoint start(
        final String name,
        final ListenAddress address,
        final RequestHandler handler,
        final AccessPolicy policy,
        final Limits limits)
        throws InterruptedException
    {
        final HttpEndpoint endpoint = new HttpEndpoint(name, address, handler, policy, limits);
        LOG.info("{} listening on {}", name, endpoint.boundAddress());
        return endpoint;
    }

    /**
     * @return the address actually bound (with the real port when port 0 was requested).
     */
    public ListenAddress boundAddress()
    {
        if (requested.isUnix())
        {
            return requested;
        }
        final SocketAddress local = channel.localAddress();
        final int port = local instanceof InetSocketAddress inet ? inet.getPort() : requested.port();
        return new ListenAddress(requested.host(), port, null);
    }

    @Override
    public void close()
    {
        channel.close().syncUninterruptibly();
        shutdownThreads();
        if (requested.isUnix())
        {
            try
            {
                Files.deleteIfExists(requested.unixPath());
            }
            catch (final IOException ex)
            {
                LOG.warn("{}: could not remove socket {}: {}", name, requested.unixPath(), ex.toString());
            }
        }
    }

    private void shutdownThreads()
    {
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
        handlerExecutor.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }

    /**
     * Reads requests on the connection's event loop (which keeps pipelined requests whole and in order) and answers
     * them on the handler threads, one after the other per connection: a slow request (a reload) does not hold the
     * event loop, other connections are answered meanwhile, and a connection's answers keep their order.
     * <p>
     * It also keeps the connection's limits: the request deadline (armed while no request is being handled: from the
     * connection's start and from each last answer), the pipelining limit, and the owner's mark on the connection
     * once a request shows the token. Its state is touched on the event loop only.
     */
    private static final class Dispatcher extends SimpleChannelInboundHandler<FullHttpRequest>
    {
        private final RequestHandler handler;
        private final AccessPolicy policy;
        private final java.util.concurrent.Executor handlerThreads;
        private final ConnectionSlots slots;
        private final Limits limits;
        private java.util.concurrent.CompletableFuture<Void> previous =
            java.util.concurrent.CompletableFuture.completedFuture(null);
        private int inFlight;
        private boolean refusing;
        private io.netty.util.concurrent.ScheduledFuture<?> deadline;

        Dispatcher(final RequestHandler handler, final AccessPolicy policy,
            final java.util.concurrent.Executor handlerThreads, final ConnectionSlots slots, final Limits limits)
        {
            this.handler = handler;
            this.policy = policy;
            this.handlerThreads = handlerThreads;
            this.slots = slots;
            this.limits = limits;
        }

        @Override
        public void channelActive(final ChannelHandlerContext ctx) throws Exception
        {
            armDeadline(ctx);
            super.channelActive(ctx);
        }

        @Override
        public void channelInactive(final ChannelHandlerContext ctx) throws Exception
        {
            disarmDeadline();
            super.channelInactive(ctx);
        }

        private void armDeadline(final ChannelHandlerContext ctx)
        {
            disarmDeadline();
            deadline = ctx.executor().schedule(() ->
            {
                if (inFlight == 0)
                {
                    // No whole request within the deadline: idle, or a request trickled in too slowly.
                    ctx.close();
                }
            }, limits.requestDeadlineMillis(), TimeUnit.MILLISECONDS);
        }

        private void disarmDeadline()
        {
            if (deadline != null)
            {
                deadline.cancel(false);
                deadline = null;
            }
        }

        /**
         * An answer has been written (event loop): the next request's deadline starts when none is left to answer.
         */
        private void answered(final ChannelHandlerContext ctx)
        {
            inFlight--;
            if (inFlight == 0 && !refusing && ctx.channel().isActive())
            {
                armDeadline(ctx);
            }
        }

        @Override
        protected void channelRead0(final ChannelHandlerContext ctx, final FullHttpRequest request)
        {
            if (refusing)
            {
                return;
            }
            disarmDeadline();
            inFlight++;
            if (inFlight > limits.maxPipelined())
            {
                // Answer the requests that fit, then say why the rest are not, rather than close in silence.
                refusing = true;
                ctx.channel().config().setAutoRead(false);
                final HttpResponseData tooMany = HttpResponseData.json(429, "{\"error\":\"too many pipelined " +
                    "requests: at most " + limits.maxPipelined() + " may wait for their answers on one connection; " +
                    "this request and those after it were not handled, and the connection closes\"}");
                previous = previous.thenRunAsync(() -> respond(ctx, tooMany, false), handlerThreads);
                return;
            }
            // Everything the answer needs is copied out here: the request's buffer is released on return.
            final boolean keepAlive = HttpUtil.isKeepAlive(request);
            final HttpResponseData refusal;
            final HttpRequestData data;
            if (!request.decoderResult().isSuccess())
            {
                refusal = HttpResponseData.json(400, "{\"error\":\"malformed HTTP request\"}");
                data = null;
            }
            else if (request.headers().getAll(HttpHeaderNames.HOST).size() > 1)
            {
                // RFC 9112, 3.2: a request with more than one Host field must be answered 400 (else the first one
                // decides, and "Host: 127.0.0.1" then "Host: evil.example" passes the DNS-rebinding check).
                refusal = HttpResponseData.json(400, "{\"error\":\"more than one Host header\"}");
                data = null;
            }
            else
            {
                final QueryStringDecoder decoder = new QueryStringDecoder(request.uri());
                refusal = policy == null ? null : policy.check(request.method().name(), decoder.path(),
                    request.headers().get(HttpHeaderNames.HOST), request.headers().get(HttpHeaderNames.ORIGIN),
                    request.headers().get(HttpHeaderNames.AUTHORIZATION),
                    request.headers().get(HttpHeaderNames.CONTENT_TYPE), request.content().readableBytes());
                data = refusal != null ? null : new HttpRequestData(
                    request.method().name(),
                    decoder.path(),
                    decoder.parameters(),
                    request.headers().get(HttpHeaderNames.CONTENT_TYPE),
                    request.content().toString(StandardCharsets.UTF_8));
                if (refusal == null && policy != null &&
                    policy.isOwner(request.headers().get(HttpHeaderNames.AUTHORIZATION)))
                {
                    slots.prove(ctx.channel());
                }
            }
            previous = previous.thenRunAsync(() -> respond(ctx, refusal != null ? refusal : answer(data), keepAlive),
                handlerThreads);
        }

        private HttpResponseData answer(final HttpRequestData data)
        {
            try
            {
                return handler.handle(data);
            }
            catch (final RuntimeException ex)
            {
                LOG.warn("{} {} failed", data.method(), data.path(), ex);
                return HttpResponseData.json(500, "{\"error\":\"internal error: " +
                    String.valueOf(ex.getMessage()).replace("\\", "\\\\").replace("\"", "'") + "\"}");
            }
        }

        private void respond(final ChannelHandlerContext ctx, final HttpResponseData answer, final boolean keepAlive)
        {
            final FullHttpResponse response = new DefaultFullHttpResponse(HttpVersion.HTTP_1_1,
                HttpResponseStatus.valueOf(answer.status()), Unpooled.wrappedBuffer(answer.body()));
            response.headers().set(HttpHeaderNames.CONTENT_TYPE, answer.contentType());
            for (final Map.Entry<String, String> header : answer.headers().entrySet())
            {
                response.headers().set(header.getKey(), header.getValue());
            }
            HttpUtil.setContentLength(response, answer.body().length);
            HttpUtil.setKeepAlive(response, keepAlive);
            final io.netty.channel.ChannelFuture written = ctx.writeAndFlush(response);
            written.addListener(future -> answered(ctx));
            if (!keepAlive)
            {
                written.addListener(ChannelFutureListener.CLOSE);
            }
        }

        @Override
        public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
        {
            LOG.debug("connection error", cause);
            ctx.close();
        }
    }
}
