package io.netreduce.controlplane.config;

import com.fasterxml.jackson.annotation.JsonIgnore;
import com.fasterxml.jackson.annotation.JsonInclude;

import java.net.InetAddress;

/**
 * One rank of a ring: the worker whose RDMA connection carries that rank's contributions.
 *
 * @param rank the rank within the ring, 0..worldSize-1.
 * @param ip   the worker's address as written in the configuration (an IPv4 or IPv6 literal).
 * @param mac  the worker's MAC address (lower case, colon separated) or null if not given.
 * @param qpn  the worker's destination queue pair number (24 bits) or null if learned from traffic.
 */
@JsonInclude(JsonInclude.Include.NON_NULL)
public record MemberConfig(int rank, String ip, String mac, Integer qpn)
{
    /** Largest queue pair number: QPNs are 24 bits in the BTH. */
    public static final int MAX_QPN = 0xFF_FFFF;

    /**
     * @return the member's address parsed as a literal (never a DNS lookup), or null if {@link #ip()} is not one.
     */
    @JsonIgnore
    public InetAddress address()
    {
        return Addresses.parseIpLiteral(ip);
    }
}
