package io.netreduce.switchml.controller;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.ForwardingServerCall;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.concurrent.atomic.AtomicReference;

/**
 * What a handler learns about its call beyond the request: the peer's address (from the transport's attributes),
 * and a place to put a refusal reason that leaves with the reply's trailers. An interceptor on the whole server
 * puts both into the gRPC {@link Context} the handler runs in.
 */
final class CallContext implements ServerInterceptor
{
    /**
     * The trailer that carries a refused session's reason (the published protocol's reply has no field for it;
     * the published client ignores trailers it does not know). ASCII only; other characters are sent as '?'.
     */
    static final Metadata.Key<String> REFUSAL_TRAILER =
        Metadata.Key.of("netreduce-session-refused", Metadata.ASCII_STRING_MARSHALLER);

    private static final Context.Key<InetSocketAddress> PEER = Context.key("switchml-peer");
    private static final Context.Key<AtomicReference<String>> REFUSAL = Context.key("switchml-refusal");

    /**
     * @return the address the current call came from, or {@code null} when the transport did not say (or it is
     *     not an IP address).
     */
    static InetSocketAddress peer()
    {
        return PEER.get();
    }

    /**
     * Sends {@code reason} in the current call's trailers when it closes.
     */
    static void refuse(final String reason)
    {
        final AtomicReference<String> holder = REFUSAL.get();
        if (holder != null)
        {
            holder.set(reason);
        }
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(
        final ServerCall<Q, R> call, final Metadata headers, final ServerCallHandler<Q, R> next)
    {
        final SocketAddress remote = call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR);
        final InetSocketAddress peer = remote instanceof InetSocketAddress inet ? inet : null;
        final AtomicReference<String> refusal = new AtomicReference<>();
        final ServerCall<Q, R> withTrailers = new ForwardingServerCall.SimpleForwardingServerCall<>(call)
        {
            @Override
            public void close(final Status status, final Metadata trailers)
            {
                final String reason = refusal.get();
                if (reason != null)
                {
                    trailers.put(REFUSAL_TRAILER, ascii(reason));
                }
                super.close(status, trailers);
            }
        };
        final Context context = Context.current().withValues(PEER, peer, REFUSAL, refusal);
        return Contexts.interceptCall(context, withTrailers, headers, next);
    }

    private static String ascii(final String text)
    {
        final StringBuilder out = new StringBuilder(Math.min(text.length(), 1024));
        for (int i = 0; i < text.length() && out.length() < 1024; i++)
        {
            final char c = text.charAt(i);
            out.append(c >= 0x20 && c < 0x7F ? c : '?');
        }
        return out.toString();
    }
}
