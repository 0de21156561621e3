package io.netreduce.protocol.port;

import java.util.Arrays;

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
 * <p>
 * {@link #forQueuePairs} narrows it to the queue pairs of one endpoint, as an RDMA NIC hands a QP only the packets
 * addressed to it: the BTH's destination QP (its low 24 bits of the word 4 bytes into the BTH, the UDP payload's
 * first 12 bytes) must fall in one of the endpoint's ranges of QP numbers. Why: every endpoint on a host opens its
 * own packet socket on the same interface (a sidecar per trainer, an agent's sessions, two jobs on the same
 * workers), and without it each one copied, woke for and parsed every RoCE frame for every other endpoint there,
 * and a busy neighbour could fill its ring.
 * <pre>
 *   ... as above, to the destination port; then
 *   IPv4: ld [x+26]; IPv6: ld [66]           (the BTH's reserved byte and destination QP)
 *   and #0xffffff
 *   per range [lo, hi]: jge #lo else next range; jgt #hi → next range; ja accept
 *   ret #0 (another endpoint's); accept: ret #-1
 * </pre>
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
    private static final int UDP_HEADER_LENGTH = 8;
    /** The BTH word that holds the reserved byte and the 24-bit destination QP. */
    private static final int BTH_DEST_QP_WORD_OFFSET = 4;
    private static final int QPN_MASK = 0xFF_FFFF;
    /** Instructions of the queue-pair program before its ranges, and per range. */
    private static final int QP_PROGRAM_HEAD = 18;
    private static final int QP_PROGRAM_PER_RANGE = 3;
    /**
     * Most ranges of QP numbers one program checks: within the kernel's 4,096 instructions with room to spare.
     * An endpoint's QP numbers are given out in order, so they form a handful of ranges at most.
     */
    public static final int MAX_QP_RANGES = 1024;

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

    /**
     * The RoCEv2 filter for one endpoint: frames to the queue pairs {@code qpns[0..count)} only.
     *
     * @param qpns  QP numbers (24-bit), in any order, duplicates allowed; the array is not changed.
     * @param count how many of {@code qpns} to take; 0 accepts no RoCE frame at all (an endpoint without queue
     *              pairs has nothing to receive).
     * @return the program, or null when the numbers form more than {@link #MAX_QP_RANGES} ranges (then keep
     *         {@link #program()}).
     */
    public static ClassicBpfProgram forQueuePairs(final int[] qpns, final int count)
    {
        final int[] sorted = new int[count];
        for (int i = 0; i < count; i++)
        {
            sorted[i] = qpns[i] & QPN_MASK;
        }
        Arrays.sort(sorted);
        final int[] ranges = new int[2 * Math.max(1, count)];
        int n = 0;
        for (int i = 0; i < count; i++)
        {
            final int qpn = sorted[i];
            if (n > 0 && qpn <= ranges[2 * n - 1] + 1)
            {
                ranges[2 * n - 1] = Math.max(ranges[2 * n - 1], qpn);
            }
            else
            {
                if (n == MAX_QP_RANGES)
                {
                    return null;
                }
                ranges[2 * n] = qpn;
                ranges[2 * n + 1] = qpn;
                n++;
            }
        }
        final int earlyDrop = QP_PROGRAM_HEAD - 1;
        final int end = QP_PROGRAM_HEAD + n * QP_PROGRAM_PER_RANGE;
        final int accept = end + 1;
        final ClassicBpfProgram.Builder b = ClassicBpfProgram.builder();
        b.loadProtocol();                                                                  // 0
        b.jumpIfEqual(ETHER_TYPE_IPV4, 2, 9);                                              // 1
        b.loadByteAbsolute(IPV4_PROTOCOL_OFFSET);                                          // 2
        b.jumpIfEqual(IP_PROTOCOL_UDP, 4, earlyDrop);                                      // 3
        b.loadIpv4HeaderLengthIntoX(ETHERNET_HEADER_LENGTH);                               // 4
        b.loadHalfIndexed(ETHERNET_HEADER_LENGTH + UDP_DESTINATION_PORT_OFFSET);           // 5
        b.jumpIfEqual(ROCEV2_UDP_PORT, 7, earlyDrop);                                      // 6
        b.loadWordIndexed(ETHERNET_HEADER_LENGTH + UDP_HEADER_LENGTH + BTH_DEST_QP_WORD_OFFSET); // 7
        b.jumpTo(15);                                                                      // 8
        b.jumpIfEqual(ETHER_TYPE_IPV6, 10, earlyDrop);                                     // 9
        b.loadByteAbsolute(IPV6_NEXT_HEADER_OFFSET);                                       // 10
        b.jumpIfEqual(IP_PROTOCOL_UDP, 12, earlyDrop);                                     // 11
        b.loadHalfAbsolute(ETHERNET_HEADER_LENGTH + IPV6_HEADER_LENGTH + UDP_DESTINATION_PORT_OFFSET); // 12
        b.jumpIfEqual(ROCEV2_UDP_PORT, 14, earlyDrop);                                     // 13
        b.loadWordAbsolute(ETHERNET_HEADER_LENGTH + IPV6_HEADER_LENGTH + UDP_HEADER_LENGTH +
            BTH_DEST_QP_WORD_OFFSET);                                                      // 14
        b.andConstant(QPN_MASK);                                                           // 15
        b.jumpTo(QP_PROGRAM_HEAD);                                                         // 16
        b.returnConstant(0);                                                               // 17: not RoCEv2
        for (int r = 0; r < n; r++)
        {
            // conditional jumps reach 255 instructions: each range's go to its neighbours, "ja" to the accept
            final int at = b.label();
            final int next = at + QP_PROGRAM_PER_RANGE;
            b.jumpIfAtLeast(ranges[2 * r], at + 1, next);
            b.jumpIfAbove(ranges[2 * r + 1], next, at + 2);
            b.jumpTo(accept);
        }
        b.returnConstant(0);                                                               // end: another QP's
        b.returnConstant(WHOLE_FRAME);                                                     // accept
        return b.build();
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
