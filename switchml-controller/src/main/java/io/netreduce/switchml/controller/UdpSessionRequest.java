package io.netreduce.switchml.controller;

import java.net.InetSocketAddress;

/**
 * A worker's request to open a UDP session, as the published client sends it.
 *
 * @param sessionId the session id rank 0 chose and broadcast to the others (the client uses its clock in
 *     nanoseconds; never 0, which the protocol uses for "refused").
 * @param rank the worker's rank, {@code 0 <= rank < numWorkers}.
 * @param numWorkers the number of workers in the session, 1 to {@link SwitchMlController#MAX_WORKERS}.
 * @param mac the worker's Ethernet address in the low 48 bits, its first octet the most significant of them
 *     (02:77:00:00:00:01 is {@code 0x0277_0000_0001L}); see {@link SwitchMlAddresses}. The client calls this
 *     "little endian": it holds the address as the six octets in memory of a little-endian {@code uint64_t} and
 *     reverses them before sending, which gives the big-endian reading of the address.
 * @param ipv4 the worker's IPv4 address as a host-order integer (10.0.0.1 is {@code 0x0A00_0001}).
 * @param packetSizeCode the proto's {@code PacketSize}: 0 to 3 for 64, 128, 256 and 512 elements per packet
 *     (named MTU_128 to MTU_1024 upstream), passed on as received.
 * @param peer the TCP address the request came from, or {@code null} when the transport did not tell.
 */
public record UdpSessionRequest(
    long sessionId, int rank, int numWorkers, long mac, int ipv4, int packetSizeCode, InetSocketAddress peer)
{
    /**
     * @return the worker's MAC as text, {@code 02:77:00:00:00:01}.
     */
    public String macText()
    {
        return SwitchMlAddresses.formatMac(mac);
    }

    /**
     * @return the worker's IPv4 address as text, {@code 10.0.0.1}.
     */
    public String ipv4Text()
    {
        return SwitchMlAddresses.formatIpv4(ipv4);
    }
}
