package io.netreduce.dataplane.agent;

import java.net.InetAddress;

/**
 * One CLT entry as a snapshot reports it.
 *
 * @param source      source IP of the connection.
 * @param destination destination IP.
 * @param destQp      destination QP.
 * @param foreign     true for a non-ring RDMA connection between ring members (its packets pass through).
 * @param ringId      ring, for ring connections (else -1).
 * @param rank        sender's rank, for ring connections (else -1).
 * @param msgId       MsgID of the newest message started on the connection.
 * @param psn0        PSN of that message's first packet.
 * @param current     false when a newer connection of the same rank has replaced this one (stale).
 */
public record ConnectionEntry(
    InetAddress source,
    InetAddress destination,
    int destQp,
    boolean foreign,
    int ringId,
    int rank,
    int msgId,
    int psn0,
    boolean current)
{
}
