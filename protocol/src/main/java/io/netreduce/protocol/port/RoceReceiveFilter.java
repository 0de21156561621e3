package io.netreduce.protocol.port;

/**
 * The socket filter of a port that serves RoCEv2 endpoints only (a worker's, standing for an RDMA NIC): the kernel
 * puts into its receive ring only UDP datagrams to port 4791 over IPv4 or IPv6, and nothing of the host's other
 * traffic on the interface.
 * <p>
 * Why: an AF_PACKET socket bound with ETH_P_ALL gets a copy of every frame on its interface. On a worker that
 * shares the interface with the host's own TCP (a trainer's data loading, another job, the short and long flows of
 * {@code scripts/bench-shared.sh}), every one of those frames was copied into the endpoint's ring and read and
 * dropped there; at a few Gbit/s of other traffic the ring filled, and RoCE frames behind them were lost (the
 * bench's ranks beside a long TCP flow counted 430,000-660,000 {@code rx_ring_dropped} in a run, and RC timeouts).
 * An RDMA NIC never hands the host's TCP to a queue pair; with the filter the kernel does not either, before it
 * copies anything, and the endpoint spends no CPU on the other traffic.
 * <p>
 * A socket filter on a SOCK_RAW packet socket sees the frame from its Ethernet header, with any 802.1Q tag
 * already taken into the skb's metadata (so the IP header is always at 14); the EtherType is read with the
 * ancillary protocol load:
 * <pre>
 *   ld proto; jeq #0x0800 → IPv4; jeq #0x86dd → IPv6; else drop
 *   IPv4: ldb [23] (protocol); jeq #17 else drop; ldxb 4*([14]&amp;0xf); ldh [x+16] (destination port)
 *   IPv6: ldb [20] (next header); jeq #17 else drop; ldh [56] (destination port)
 *   jeq #4791 → ret #-1 (the whole frame), else ret #0
 * </pre>
 * RoCEv2 uses neither IPv6 extension headers nor fragments, so a frame that needs them to be read is not RoCEv2 to
 * this filter. Frames the filter refuses are not counted by the ring (the kernel drops them before the socket).
 */
public final class RoceReceiveFilter
{
    /** The RoCEv2 UDP destination port (IANA). */
    public static final int ROCEV2_UDP_PORT = 4791;

    private static final int ETHER_TYPE_IPV4 = 0x0800;
    private static final int ETHER_TYPE_IPV6 = 0x86DD;
    private static final int IP_PROTOCOL_UDP = 17;
    private static final int ETHERNET_HEADER_LENGTH = 14;
    private static final int IPV4_PROTOCOL_OFFSET = ETHERNET_HEADER_LENGTH + 9;
    private static final int IPV6_NEXT_HEADER_OFFSET = ETHERNET_HEADER_LENGTH + 6;
    private static final int IPV6_HEADER_LENGTH = 40;
    private static final int UDP_DESTINATION_PORT_OFFSET = 2;
    /** A socket filter's return value is the number of bytes to keep; all of them. */
    private static final int WHOLE_FRAME = -1;

    private static final ClassicBpfProgram PROGRAM = build();

    private RoceReceiveFilter()
    {
    }

    /**
     * @return the filter's program (14 instructions).
     */
    public static ClassicBpfProgram program()
    {
        return PROGRAM;
    }

    private static ClassicBpfProgram build()
    {
        final int accept = 12;
        final int drop = 13;
        final ClassicBpfProgram.Builder b = ClassicBpfProgram.builder();
        b.loadProtocol();                                                                  // 0
        b.jumpIfEqual(ETHER_TYPE_IPV4, 2, 7);                                              // 1
        b.loadByteAbsolute(IPV4_PROTOCOL_OFFSET);                                          // 2
        b.jumpIfEqual(IP_PROTOCOL_UDP, 4, drop);                                           // 3
        b.loadIpv4HeaderLengthIntoX(ETHERNET_HEADER_LENGTH);                               // 4
        b.loadHalfIndexed(ETHERNET_HEADER_LENGTH + UDP_DESTINATION_PORT_OFFSET);           // 5
        b.jumpIfEqual(ROCEV2_UDP_PORT, accept, drop);                                      // 6
        b.jumpIfEqual(ETHER_TYPE_IPV6, 8, drop);                                           // 7
        b.loadByteAbsolute(IPV6_NEXT_HEADER_OFFSET);                                       // 8
        b.jumpIfEqual(IP_PROTOCOL_UDP, 10, drop);                                          // 9
        b.loadHalfAbsolute(ETHERNET_HEADER_LENGTH + IPV6_HEADER_LENGTH + UDP_DESTINATION_PORT_OFFSET); // 10
        b.jumpIfEqual(ROCEV2_UDP_PORT, accept, drop);                                      // 11
        b.returnConstant(WHOLE_FRAME);                                                     // 12: accept
        b.returnConstant(0);                                                               // 13: drop
        return b.build();
    }
}
