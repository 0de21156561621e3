package io.netreduce.controlplane.api;

/**
 * One connection lookup table entry: a member's RC connection as the dataplane learned it from its first packets.
 *
 * @param srcIp  source address of the connection's packets.
 * @param dstIp  destination address.
 * @param dstQpn destination queue pair (24 bits).
 * @param ringId the ring the connection belongs to.
 * @param rank   the rank it carries.
 * @param msgId  the current message id.
 * @param psn0   the PSN of the current message's first packet.
 */
public record CltEntry(String srcIp, String dstIp, int dstQpn, int ringId, int rank, int msgId, long psn0)
{
}
