package io.netreduce.controlplane.config;

import java.util.List;

/**
 * A SwitchML job declared in the configuration ({@code jobs[].switchml}): its pool and its workers, so that workers
 * that do not register through the controller (ours: {@code netreduce worker allreduce --protocol switchml}) find it
 * installed.
 *
 * @param elementsPerPacket int32 elements every packet of the job carries: 64 or 256 as the published client sends,
 *                          or any even count up to 2048 (ours; no Tofino limit applies).
 * @param poolSize          slots in the job's pool, each with two shadow sets: at least the packets a worker keeps in
 *                          flight.
 * @param workers           the workers by rank (the bit of the slot bitmap): address, and MAC if it is to be checked.
 */
public record SwitchMlJobConfig(int elementsPerPacket, int poolSize, List<Worker> workers)
{
    /** What the published client sends by default ({@code packet_numel}). */
    public static final int DEFAULT_ELEMENTS_PER_PACKET = 256;
    /** Enough for our worker's default of 128 packets in flight, and the client's 256 with two threads. */
    public static final int DEFAULT_POOL_SIZE = 512;

    /**
     * @param rank the worker's id, 0..W-1.
     * @param ip   its IPv4 address: the source of its packets, the destination of its results.
     * @param mac  its MAC, or null: then results go to the source MAC of its latest packet.
     */
    public record Worker(int rank, String ip, String mac)
    {
    }

    public SwitchMlJobConfig
    {
        workers = List.copyOf(workers);
    }

    /**
     * @return bytes of aggregator memory the job's pool takes (as the dataplane counts them).
     */
    public long aggregatorBytes()
    {
        return io.netreduce.dataplane.switchml.SwitchMlJobDefinition.memoryBytes(poolSize, elementsPerPacket);
    }
}
