package io.netreduce.controlplane.api;

import io.netreduce.controlplane.config.MemberConfig;
import io.netreduce.controlplane.config.RingConfig;

import java.util.List;

/**
 * What a client of a ring must agree with before it sends: the parameters the appliance aggregates with. A client
 * whose window, MsgLen, payload size, element type or tag differ from these only stalls (its packets are dropped
 * and counted on the appliance, which the client never sees), so clients read this at session start
 * ({@code GET /v1/rings/{id}/parameters}) and refuse to start on a mismatch, with the reason.
 *
 * @param ringId      the RingID of the INA header.
 * @param elementType fp32, fp16, bf16 or int32.
 * @param window      N: messages in flight per rank.
 * @param msgLen      packets per message.
 * @param payloadSize RC payload bytes of every packet (the first one starts with the 8-byte INA header).
 * @param pmtu        the path MTU the members' queue pairs must use.
 * @param inetTag     the InetTag clients write (4 ASCII characters).
 * @param resultTag   the InetTag results carry; equal to {@code inetTag} when results are not marked.
 * @param worldSize   number of ranks.
 * @param members     rank and address of every member, rank r sending to rank (r + 1) % worldSize.
 */
public record RingParameters(
    int ringId,
    String elementType,
    int window,
    int msgLen,
    int payloadSize,
    int pmtu,
    String inetTag,
    String resultTag,
    int worldSize,
    List<Member> members)
{
    /**
     * @param rank the member's rank.
     * @param ip   the member's address.
     */
    public record Member(int rank, String ip)
    {
    }

    public static RingParameters of(final RingConfig ring)
    {
        return new RingParameters(ring.id(), ring.elementType().cliName(), ring.window(), ring.msgLen(),
            ring.payloadSize(), ring.pmtu(), ring.inetTag(), ring.resultTag(), ring.worldSize(),
            ring.members().stream().map(RingParameters::member).toList());
    }

    private static Member member(final MemberConfig member)
    {
        return new Member(member.rank(), member.ip());
    }
}
