package io.netreduce.dataplane.ring;

import java.net.InetAddress;
import java.util.Objects;

/**
 * One worker of a ring as the control plane registers it.
 *
 * @param rank      the worker's rank, 0 .. worldSize-1.
 * @param address   the IP address (v4 or v6) the worker sends ring traffic from and receives it on.
 * @param receiveQp the QP number on which this worker receives ring traffic from its predecessor (the BTH DestQP
 *                  of its predecessor's packets), or {@link #ANY} when not known; when known, a first packet
 *                  towards this worker on another QP is treated as spoofed.
 * @param mac       the worker's MAC address (48 bits), or {@link #ANY_MAC}; when known, a first packet claiming
 *                  this rank from another source MAC is treated as spoofed.
 */
public record RingMember(int rank, InetAddress address, int receiveQp, long mac)
{
    public static final int ANY = -1;
    public static final long ANY_MAC = -1L;

    public RingMember
    {
        Objects.requireNonNull(address, "address");
    }

    public RingMember(final int rank, final InetAddress address)
    {
        this(rank, address, ANY, ANY_MAC);
    }
}
