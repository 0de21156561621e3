package io.netreduce.controlplane.api;

import io.netty.channel.Channel;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;

/**
 * An endpoint's connection slots, kept so that strangers cannot take the owner's: at most {@code maxConnections}
 * open at once. A connection is the <em>owner's</em> once a request on it has shown the token (on a Unix socket,
 * which only the owner can open, from the start); the owner's are never closed to make room. Any other connection is
 * closed, oldest first, when a new one needs its slot: a stranger holding every slot with half-sent requests loses
 * them to the next connection, the owner's included, which then shows its token. One peer address's connections
 * that are not the owner's are held to {@code maxPerPeer}: beyond it a new one closes that peer's oldest, so one peer
 * only churns its own. When every slot is the owner's, a new connection is refused.
 * <p>
 * Called on the endpoint's event loop; synchronized all the same.
 */
final class ConnectionSlots
{
    private final int maxConnections;
    private final int maxPerPeer;
    private final Set<Channel> owners = new HashSet<>();
    /** Connections not (yet) the owner's, oldest first. */
    private final LinkedHashSet<Channel> others = new LinkedHashSet<>();
    private final Map<InetAddress, ArrayDeque<Channel>> byPeer = new HashMap<>();

    ConnectionSlots(final int maxConnections, final int maxPerPeer)
    {
        if (maxConnections < 1 || maxPerPeer < 1)
        {
            throw new IllegalArgumentException("connection limits must be positive");
        }
        this.maxConnections = maxConnections;
        this.maxPerPeer = maxPerPeer;
    }

    /**
     * Take a slot for a new connection, closing another connection that is not the owner's if need be.
     *
     * @return false when every slot is the owner's: the connection is to be closed.
     */
    synchronized boolean admit(final Channel channel, final boolean owner)
    {
        final InetAddress peer = owner ? null : peer(channel);
        if (peer != null)
        {
            final ArrayDeque<Channel> ofPeer = byPeer.get(peer);
            if (ofPeer != null && ofPeer.size() >= maxPerPeer)
            {
                evict(ofPeer.peekFirst());
            }
        }
        if (owners.size() + others.size() >= maxConnections)
        {
            if (others.isEmpty())
            {
                return false;
            }
            evict(others.getFirst());
        }
        if (owner)
        {
            owners.add(channel);
        }
        else
        {
            others.add(channel);
            if (peer != null)
            {
                byPeer.computeIfAbsent(peer, p -> new ArrayDeque<>()).addLast(channel);
            }
        }
        return true;
    }

    /**
     * A request on the connection showed the owner's token: it keeps its slot from now on.
     */
    synchronized void prove(final Channel channel)
    {
        if (others.contains(channel))
        {
            forget(channel);
            owners.add(channel);
        }
    }

    /**
     * The connection closed: its slot is free.
     */
    synchronized void closed(final Channel channel)
    {
        owners.remove(channel);
        forget(channel);
    }

    synchronized int open()
    {
        return owners.size() + others.size();
    }

    private void evict(final Channel channel)
    {
        forget(channel);
        channel.close();
    }

    private void forget(final Channel channel)
    {
        if (others.remove(channel))
        {
            final InetAddress peer = peer(channel);
            final ArrayDeque<Channel> ofPeer = peer == null ? null : byPeer.get(peer);
            if (ofPeer != null)
            {
                ofPeer.remove(channel);
                if (ofPeer.isEmpty())
                {
                    byPeer.remove(peer);
                }
            }
        }
    }

    private static InetAddress peer(final Channel channel)
    {
        return channel.remoteAddress() instanceof InetSocketAddress inet ? inet.getAddress() : null;
    }
}
