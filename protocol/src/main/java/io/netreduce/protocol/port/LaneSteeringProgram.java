package io.netreduce.protocol.port;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The classifier of an AF_PACKET fanout group whose members are dataplane lanes: it returns, for each frame, the
 * index of the lane (member) that must receive it. Frames of a listed (source IP, destination IP) pair go to the
 * pair's lane; every other frame to {@code flowHash % members} (the skb's flow hash, 0 when none was computed),
 * so unlisted traffic is spread by flow and each flow stays in order on one lane.
 * <p>
 * The pairs are a ring's edges (rank r's address to rank r + 1's): every RoCEv2 frame of a ring, first packet or
 * not, carries one in its IP header, where the ring's id is only in first packets.
 * <p>
 * A fanout classifier runs on the skb as the protocol handlers see it: its data starts at the network header, and
 * the kernel has already moved an 802.1Q tag into the skb's metadata. So the program reads the EtherType with the
 * ancillary protocol load and the addresses at their offsets in the IP header:
 * <pre>
 *   ld proto; jeq #0x0800 → IPv4 pairs; jeq #0x86dd → IPv6 pairs; else → default
 *   IPv4 pair: ld [12]; jeq #src, 0, next; ld [16]; jeq #dst, 0, next; ret #lane
 *   IPv6 pair: four words of source at [8], four of destination at [24], then ret #lane
 *   default:   ld rxhash; ret a
 * </pre>
 * 5 instructions per IPv4 pair and 17 per IPv6 pair: the kernel's limit of 4096 instructions allows about 800
 * IPv4 pairs; {@link #build()} refuses more with the count.
 */
public final class LaneSteeringProgram
{
    private static final int ETHER_TYPE_IPV4 = 0x0800;
    private static final int ETHER_TYPE_IPV6 = 0x86DD;
    private static final int IPV4_SOURCE_OFFSET = 12;
    private static final int IPV4_DESTINATION_OFFSET = 16;
    private static final int IPV6_SOURCE_OFFSET = 8;
    private static final int IPV6_DESTINATION_OFFSET = 24;

    private final List<Route> v4 = new ArrayList<>();
    private final List<Route> v6 = new ArrayList<>();

    /**
     * @param source      the frame's IP source address.
     * @param destination the frame's IP destination address (same family as the source).
     * @param lane        the member index the frame goes to.
     */
    public record Route(InetAddress source, InetAddress destination, int lane)
    {
        public Route
        {
            Objects.requireNonNull(source, "source");
            Objects.requireNonNull(destination, "destination");
            if ((source instanceof Inet4Address) != (destination instanceof Inet4Address))
            {
                throw new IllegalArgumentException("route " + source.getHostAddress() + " -> " +
                    destination.getHostAddress() + " mixes IPv4 and IPv6");
            }
            if (lane < 0)
            {
                throw new IllegalArgumentException("lane must be >= 0: " + lane);
            }
        }
    }

    public LaneSteeringProgram route(final InetAddress source, final InetAddress destination, final int lane)
    {
        return route(new Route(source, destination, lane));
    }

    public LaneSteeringProgram route(final Route route)
    {
        (route.source() instanceof Inet4Address ? v4 : v6).add(route);
        return this;
    }

    /**
     * @return how many instructions {@link #build()} will emit.
     */
    public int instructions()
    {
        return 8 + 5 * v4.size() + 17 * v6.size();
    }

    /**
     * @throws IllegalArgumentException if the routes need more than the kernel's {@value ClassicBpfProgram#MAX_INSTRUCTIONS}
     *                                  instructions.
     */
    public ClassicBpfProgram build()
    {
        if (instructions() > ClassicBpfProgram.MAX_INSTRUCTIONS)
        {
            throw new IllegalArgumentException("steering " + v4.size() + " IPv4 and " + v6.size() +
                " IPv6 address pairs to lanes takes " + instructions() + " classic BPF instructions, more than the " +
                "kernel's " + ClassicBpfProgram.MAX_INSTRUCTIONS + ": fewer ring edges per appliance, or one lane");
        }
        final ClassicBpfProgram.Builder b = ClassicBpfProgram.builder();
        b.loadProtocol();                                                       // 0
        b.jumpIfEqual(ETHER_TYPE_IPV4, 3, 2);                                   // 1
        final int toIpv6 = b.label();
        b.jumpTo(3);                                                            // 2, patched below
        for (final Route route : v4)
        {
            final int next = b.label() + 5;
            b.loadWordAbsolute(IPV4_SOURCE_OFFSET);
            b.jumpIfEqual(word(route.source(), 0), b.label() + 1, next);
            b.loadWordAbsolute(IPV4_DESTINATION_OFFSET);
            b.jumpIfEqual(word(route.destination(), 0), b.label() + 1, next);
            b.returnConstant(route.lane());
        }
        final int v4ToDefault = b.label();
        b.jumpTo(v4ToDefault + 1);                                              // patched below
        b.patchJumpTo(toIpv6, b.label());
        final int isIpv6 = b.label();
        b.jumpIfEqual(ETHER_TYPE_IPV6, isIpv6 + 2, isIpv6 + 1);
        final int v6ToDefault = b.label();
        b.jumpTo(v6ToDefault + 1);                                              // patched below
        for (final Route route : v6)
        {
            final int next = b.label() + 17;
            for (int w = 0; w < 4; w++)
            {
                b.loadWordAbsolute(IPV6_SOURCE_OFFSET + 4 * w);
                b.jumpIfEqual(word(route.source(), w), b.label() + 1, next);
            }
            for (int w = 0; w < 4; w++)
            {
                b.loadWordAbsolute(IPV6_DESTINATION_OFFSET + 4 * w);
                b.jumpIfEqual(word(route.destination(), w), b.label() + 1, next);
            }
            b.returnConstant(route.lane());
        }
        final int unlisted = b.label();
        b.patchJumpTo(v4ToDefault, unlisted);
        b.patchJumpTo(v6ToDefault, unlisted);
        b.loadFlowHash();
        b.returnAccumulator();
        return b.build();
    }

    private static int word(final InetAddress address, final int index)
    {
        final byte[] bytes = address.getAddress();
        final int at = 4 * index;
        return ((bytes[at] & 0xFF) << 24) | ((bytes[at + 1] & 0xFF) << 16) | ((bytes[at + 2] & 0xFF) << 8) |
            (bytes[at + 3] & 0xFF);
    }
}
