package io.netreduce.controlplane.api;

import java.util.List;

/**
 * A SwitchML job as the API and {@code ctl switchml} show it: where it came from, its pool and workers, and what
 * its slots have done.
 *
 * @param name          the job's name: its configuration name, or {@code session-<id>} for one opened through the
 *                      controller.
 * @param id            the job's id on the dataplane (0..255).
 * @param origin        {@code config} or {@code controller}.
 * @param workers       the workers' addresses by rank.
 * @param elementsPerPacket int32 elements per packet.
 * @param poolSize      slots in the pool.
 * @param memoryBytes   aggregator memory the pool takes.
 * @param setsInFlight  slot sets holding some but not all contributions.
 * @param packets       worker packets added to a slot.
 * @param completions   slot sets completed.
 * @param resultsSent   results sent on completion.
 * @param resultsResent retransmissions answered with a stored result.
 * @param pendingDrops  retransmissions to an incomplete set, dropped.
 * @param notMemberDrops packets from a worker's address with another MAC than configured.
 * @param wrongSizeDrops packets with another element count than the job's.
 * @param badPoolIndexDrops packets for a slot outside the pool.
 */
public record SwitchMlJobStatus(
    String name,
    int id,
    String origin,
    List<String> workers,
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
    public SwitchMlJobStatus
    {
        workers = List.copyOf(workers);
    }
}
