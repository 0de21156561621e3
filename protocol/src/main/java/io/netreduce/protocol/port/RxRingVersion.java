package io.netreduce.protocol.port;

/**
 * Which PACKET_MMAP receive ring layout an {@link AfPacketPort} uses. The choice trades per-frame latency at low
 * rates against how the kernel packs frames; see docs/performance.md, "AF_PACKET receive latency".
 */
public enum RxRingVersion
{
    /**
     * TPACKET_V2: fixed-size frame slots, each with its own status word. The kernel hands every frame to user
     * space the moment it has written it, so a lone frame (an RC ACK, one rank's packet) is visible at once.
     * Each slot must hold the largest frame, so the ring holds fewer small frames than V3 in the same memory.
     */
    V2,

    /**
     * TPACKET_V3: frames packed by their real length into blocks that the kernel hands over whole, when full or
     * when the block timer fires (at least 1 ms, rounded up to a kernel tick: 4 ms at HZ=250). Dense, but at low
     * rates a frame can wait for the timer.
     */
    V3
}
