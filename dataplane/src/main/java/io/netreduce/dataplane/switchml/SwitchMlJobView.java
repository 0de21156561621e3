package io.netreduce.dataplane.switchml;

/**
 * A SwitchML job as the control plane shows it ({@code ctl switchml}, the API, metrics): read on the dataplane
 * thread by a snapshot command.
 *
 * @param setsInFlight  slot sets holding some but not all of their contributions.
 * @param packets       worker packets added to a slot.
 * @param completions   slot sets completed.
 * @param resultsSent   result packets sent on completion (one per worker).
 * @param resultsResent retransmissions to a completed set answered with the stored result.
 * @param drops         the job's dropped packets (pending, not a member, wrong size, bad pool index).
 */
public record SwitchMlJobView(
    int job,
    int workers,
    int elementsPerPacket,
    int poolSize,
    long memoryBytes,
    int setsInFlight,
    long packets,
    long completions,
    long resultsSent,
    long resultsResent,
    long pendingDrops,
    long notMemberDrops,
    long wrongSizeDrops,
    long badPoolIndexDrops)
{
}
