package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.ListenAddress;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioDomainSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import io.netty.handler.codec.http.DefaultFullHttpRequest;
import io.netty.handler.codec.http.FullHttpRequest;
import io.netty.handler.codec.http.FullHttpResponse;
import io.netty.handler.codec.http.HttpClientCodec;
import io.netty.handler.codec.http.HttpHeaderNames;
import io.netty.handler.codec.http.HttpHeaderValues;
import io.netty.handler.codec.http.HttpMethod;
import io.netty.handler.codec.http.HttpObjectAggregator;
import io.netty.handler.codec.http.HttpVersion;
import io.netty.util.concurrent.DefaultThreadFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A blocking HTTP/1.1 client for the control API over TCP or a Unix domain socket (the JDK's HttpClient speaks
 * TCP only). One connection per request: the CLI makes a handful of calls and exits.
 */
public final class ApiClient implements AutoCloseable
{
    /** Largest response accepted. */
    public static final int MAX_RESPONSE_BYTES = 16 << 20;

    private final ListenAddress address;
    private final Duration timeout;
    private final String token;
    private final EventLoopGroup group;

    /**
     * A response: status and body text.
     *
     * @param status the HTTP status.
     * @param body   the body as UTF-8 text.
     */
    public record Response(int status, String body)
    {
    }

    /**
     * @param address the API address ({@code host:port} or {@code unix:/path}).
     * @param timeout how long one request may take, connect included.
     */
    public ApiClient(final ListenAddress address, final Duration timeout)
    {
        this(address, timeout, null);
    }

    /**
     * @param token the API's bearer token (needed on TCP), or null.
     */
    public ApiClient(final ListenAddress address, final Duration timeout, final String token)
    {
        this.address = address;
        this.timeout = timeout;
        this.token = token;
        this.group = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("netreduce-ctl", true),
            NioIoHandler.newFactory());
    }

    /**
     * @param method      HTTP method.
     * @param path        request path, e.g. {@code /v1/jobs}.
     * @param body        request body or null.
     * @param contentType body content type or null.
     * @return the response.
     * @throws IOException on connection failure or timeout.
     */
    public Response send(final String method, final String path, final String body, final String contentType)
        throws IOException
    {
        final CompletableFuture<Response> result = new CompletableFuture<>();
        final Bootstrap bootstrap = new Bootstrap()
            .group(group)
            .channel(address.isUnix() ? NioDomainSocketChannel.class : NioSocketChannel.class)
            .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int)Math.min(Integer.MAX_VALUE, timeout.toMillis()))
            .handler(new ChannelInitializer<>()
            {
                @Override
                protected void initChannel(final Channel ch)
                {
                    ch.pipeline()
                        .addLast(new HttpClientCodec())
                        .addLast(new HttpObjectAggregator(MAX_RESPONSE_BYTES))
                        .addLast(new SimpleChannelInboundHandler<FullHttpResponse>()
                        {
                            @Override
                            protected void channelRead0(final ChannelHandlerContext ctx, final FullHttpResponse msg)
                            {
                                result.complete(new Response(msg.status().code(),
                                    msg.content().toString(StandardCharsets.UTF_8)));
                                ctx.close();
                            }

                            @Override
                            public void channelInactive(final ChannelHandlerContext ctx)
                            {
                                result.completeExceptionally(new IOException("connection closed before a response"));
                            }

                            @Override
                            public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
                            {
                                result.completeExceptionally(cause);
                                ctx.close();
                            }
                        });
                }
            });
        Channel channel = null;
        try
        {
            channel = bootstrap.connect(address.toSocketAddress()).sync().channel();
            final byte[] bytes = body == null ? new byte[0] : body.getBytes(StandardCharsets.UTF_8);
            final FullHttpRequest request = new DefaultFullHttpRequest(HttpVersion.HTTP_1_1,
                HttpMethod.valueOf(method), path, Unpooled.wrappedBuffer(bytes));
            request.headers().set(HttpHeaderNames.HOST, address.isUnix() ? "localhost" : address.toString());
            request.headers().set(HttpHeaderNames.CONNECTION, HttpHeaderValues.CLOSE);
            request.headers().set(HttpHeaderNames.CONTENT_LENGTH, bytes.length);
            if (token != null)
            {
                request.headers().set(HttpHeaderNames.AUTHORIZATION, "Bearer " + token);
            }
            if (contentType != null)
            {
                request.headers().set(HttpHeaderNames.CONTENT_TYPE, contentType);
            }
            channel.writeAndFlush(request);
            return result.get(timeout.toMillis(), TimeUnit.MILLISECONDS);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", ex);
        }
        catch (final ExecutionException ex)
        {
            throw new IOException(ex.getCause().getMessage(), ex.getCause());
        }
        catch (final TimeoutException ex)
        {
            throw new IOException("no answer from " + address + " within " + timeout.toMillis() + " ms", ex);
        }
        catch (final RuntimeException ex)
        {
            // Netty rethrows connect failures (e.g. ConnectException) from sync() unchecked.
            throw new IOException("cannot reach " + address + ": " + ex.getMessage(), ex);
        }
        catch (final Exception ex)
        {
            throw new IOException("cannot reach " + address + ": " + ex.getMessage(), ex);
        }
        finally
        {
            if (channel != null)
            {
                channel.close();
            }
        }
    }

    @Override
    public void close()
    {
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }
}
