package io.netreduce.dataplane.counters;

/**
 * Every counter the dataplane publishes. Each drop reason has its own counter; a dropped frame is counted
 * under exactly one {@code DROP_*} reason.
 */
public enum DataplaneCounter
{
    FRAMES_RECEIVED("frames received"),
    FRAMES_SENT("frames sent"),
    TX_FULL("frames lost: transmit ring full"),
    PASS_THROUGH("frames passed through"),
    PASS_THROUGH_CHECKSUM_COMPLETED("pass-through frames whose L4 checksum was completed"),
    PASS_THROUGH_UNKNOWN_RING("first packets tagged for a ring that is not installed (passed through)"),
    RING_PACKETS("ring packets accepted for aggregation"),
    AGGREGATIONS_COMPLETED("aggregations completed"),
    RESULT_PACKETS("result packets sent"),
    DUPLICATES_ANSWERED("duplicates of completed aggregations answered with the stored result"),
    DUPLICATES_PENDING("duplicates of incomplete aggregations (no effect on the result)"),
    ECN_CE_RECEIVED("packets that reached an aggregator (or a leaf's spine result) marked ECN CE"),
    ECN_CE_QUEUE("ECN-capable packets that reached an aggregator while the appliance's own receive queue held at least its marking threshold (dataplane.ecnBacklog): their position's results go out marked CE, as a switch's AQM marks"),
    ECN_CE_SENT("packets sent marked ECN CE because a packet of their position was (results, partials, answers)"),
    AGGREGATORS_RELEASED("aggregators freed one window later"),
    RING_RESTARTS("ring restarts: a rank connected again, the previous run's aggregators discarded"),
    RING_CONNECTIONS_REPLACED("a rank's connection replaced by another before its run's first completed sum (the run's partial sums discarded, its other connections kept)"),
    RING_ABANDONED_PARTIALS_DISCARDED("a rank joined a run stalled for the abandoned-run time with no completed sum (its partial sums discarded, as a killed job's may be)"),
    UP_PACKETS("leaf: rack partial sums sent up on the rack's leaving cross-rack connection"),
    UP_REPEATED("leaf: partial sums sent up again for a rank's retransmission (the spine answers from its stored result)"),
    DOWN_RESULTS("leaf: spine results received on the entering cross-rack connection and translated onto the rack's connections"),
    DOWN_REPEATED("leaf: repeated spine results (answers to a partial sent up again) forwarded to the rack's first rank only"),
    DOWN_CONNECTIONS("leaf: entering cross-rack connections learned from their first result packet (CTT populated)"),
    SWITCHML_PACKETS("SwitchML: worker packets added to a slot"),
    SWITCHML_COMPLETIONS("SwitchML: slots completed (every worker's packet added)"),
    SWITCHML_RESULTS("SwitchML: result packets sent (one per worker per completion)"),
    SWITCHML_RESULTS_RESENT("SwitchML: retransmissions to a completed slot answered with the stored result"),
    PASS_THROUGH_SWITCHML_NO_JOB("SwitchML: packets to a SwitchML port from an address that is no job's worker, not addressed to the appliance (passed through)"),
    CLT_INSERTS("CLT inserts"),
    CLT_UPDATES("CLT updates"),
    CLT_MISSES("CLT misses"),
    CLT_FOREIGN("CLT foreign connections learned"),
    FOREIGN_TAG_ON_RING_EDGE("connections on a ring edge whose first message lacks the ring's InetTag (passed through)"),
    FOREIGN_TAG_EVENTS_LOST("connections on a ring edge without the ring's InetTag not reported to the log: the event buffer was full"),
    CLT_FULL("CLT full"),
    CLT_FOREIGN_EXPIRED("CLT foreign connections (on a ring edge, not a ring's) removed after 60 s without a packet " +
        "(a fixed time, not a setting; how many the CLT holds: dataplane.cltForeignEntries, " +
        "dataplane.cltForeignPerSource)"),
    CLT_STALE_EXPIRED("CLT entries of connections their rank has replaced, removed after 60 s without a packet (the same fixed time)"),
    CLT_EVICTED("CLT entries (foreign, or a rank's replaced connection) removed to make room for a ring connection"),
    DROP_CLT_FULL("drop: CLT full, connection not recorded"),
    DROP_CLT_FOREIGN_LIMIT("drop: first packet of a connection on a ring edge that is not a ring's, while such (foreign) connections hold their whole share of the CLT"),
    DROP_CLT_FOREIGN_SOURCE_LIMIT("drop: first packet of a foreign connection on a ring edge, while its source address holds its whole share of the CLT's foreign connections"),
    DROP_UNKNOWN_CONNECTION("drop: unknown connection on a ring edge"),
    DROP_STALE_CONNECTION("drop: connection superseded by a newer one of the same rank (CLT stale)"),
    DROP_FIRST_PACKET_LOST("drop: first packet of the message not seen (PSN - PSN0 >= MsgLen)"),
    DROP_STALE_PACKET("drop: packet of a message whose aggregator has been released"),
    DROP_AGGREGATOR_BUSY("drop: aggregator still held by an older message (window exceeded)"),
    DROP_SPOOFED("drop: first packet not from the member of the rank it claims"),
    DROP_MAC_MISMATCH("drop: ring packet from another MAC than the member's (configured, or bound by its completed sums; at a leaf, spine results from another MAC than the previous rack's last rank's)"),
    DROP_VLAN_TAGGED("drop: ring traffic that arrived with a VLAN tag (a member's frames reach the appliance untagged)"),
    DROP_NOT_UNICAST("drop: ring traffic to a broadcast or multicast MAC (a member's frames go to its successor's MAC)"),
    DROP_RUN_IN_PROGRESS("drop: new connection of a rank while the ring's current run has messages in flight"),
    DROP_RANK_TAKEN_OVER("drop: first packet of a connection that took its rank over before the run's first sum (not summed: its retransmission is)"),
    DROP_NOT_A_RETRANSMISSION("drop: first packet of an older message on a connection's PSN sequence with other bytes than that message had"),
    DROP_BAD_RANK("drop: rank outside the ring, or not one this appliance sums"),
    DROP_DOWN_NOT_AWAITED("drop: spine result for a position whose rack sum this leaf does not hold"),
    DROP_DOWN_MISMATCH("drop: repeated spine result that differs from the one the leaf stored"),
    DROP_DOWN_OFF_SEQUENCE("drop: spine result off its entering connection's PSN sequence while the leaf's ranks are in the run the connection was learned in (a replay, not a new job)"),
    DROP_WRONG_MSG_LEN("drop: MsgLen differs from the ring's"),
    DROP_WRONG_SIZE("drop: payload size differs from the ring's"),
    DROP_BAD_ICRC("drop: ICRC check failed"),
    DROP_UNEXPECTED_OPCODE("drop: opcode not allowed on a ring connection"),
    DROP_OPCODE_MISMATCH("drop: opcode does not fit the packet's position in its message"),
    DROP_MISSING_INA_HEADER("drop: first packet on a ring connection without INA header"),
    DROP_MALFORMED("drop: malformed or truncated packet on a ring connection"),
    DROP_SWITCHML_MALFORMED("drop: SwitchML packet that is not IPv4, truncated or shorter than its headers"),
    DROP_SWITCHML_NOT_MEMBER("drop: SwitchML packet from an address (or MAC) that is not a worker of its job"),
    DROP_SWITCHML_WRONG_SIZE("drop: SwitchML packet whose element count differs from its job's"),
    DROP_SWITCHML_BAD_POOL_INDEX("drop: SwitchML pool index outside its job's pool"),
    DROP_SWITCHML_PENDING("drop: SwitchML retransmission to a slot not yet complete (already added, never twice)"),
    DROP_INJECTED("drop: fault injection (dataplane.dropProbability)"),
    CAPTURED("frames copied to a capture"),
    CAPTURE_LOST("frames not captured: capture ring full (the writer fell behind)");

    private static final String DROP_PREFIX = "DROP_";

    private final String label;
    private final String reason;

    DataplaneCounter(final String label)
    {
        this.label = label;
        final String lower = name().toLowerCase(java.util.Locale.ROOT);
        this.reason = isDrop() ? lower.substring(DROP_PREFIX.length()) : lower;
    }

    public String label()
    {
        return label;
    }

    /**
     * @return whether this counter is a drop reason: every dropped frame is counted under exactly one of them.
     */
    public boolean isDrop()
    {
        return name().startsWith(DROP_PREFIX);
    }

    /**
     * @return the short name of a drop reason, e.g. {@code first_packet_lost} for {@link #DROP_FIRST_PACKET_LOST}
     * (the {@code reason} label of the Prometheus drop counter); the lower-case name for other counters.
     */
    public String reason()
    {
        return reason;
    }
}
