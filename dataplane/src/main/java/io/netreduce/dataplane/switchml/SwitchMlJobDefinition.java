package io.netreduce.dataplane.switchml;

import java.util.List;

/**
 * What the control plane installs for one SwitchML job (paper: SwitchML, NSDI '21; reference semantics:
 * p4app-switchML's P4 program).
 *
 * @param job               the job's id on the appliance (0..255), for the control commands. Packets are matched
 *                          to their job by source address, as the P4 program's {@code receive_udp} table does; the
 *                          header's job number is the client's per-call id, echoed in results.
 * @param workers           the workers, by worker id (the bit of the slot bitmap): at least 1, at most
 *                          {@link #MAX_WORKERS}; a worker address may belong to one installed job only.
 * @param elementsPerPacket int32 elements each packet carries: 64 and 256 are what the published client sends;
 *                          any multiple of 2 from 2 to {@link #MAX_ELEMENTS} is accepted (ours: up to 1024, no Tofino
 *                          limit applies), and every packet of the job must carry exactly this many.
 * @param poolSize          slots in the job's pool (each with two shadow sets): the client uses
 *                          {@code 2 * outstanding packets * worker threads} pool indices, half in each set, so
 *                          {@code poolSize >= outstanding * threads}.
 * @param applianceMac      the source MAC of results (the "switch MAC" the controller hands the workers).
 * @param applianceIp       the source IPv4 address of results, as an int.
 */
public record SwitchMlJobDefinition(
    int job, List<Worker> workers, int elementsPerPacket, int poolSize, long applianceMac, int applianceIp)
{
    public static final int MAX_WORKERS = 64;
    public static final int MAX_ELEMENTS = 2048;
    /** Pool indices carry the slot in 14 bits. */
    public static final int MAX_POOL_SIZE = 1 << 14;
    /** {@link Worker#mac()} when the MAC is learnt from the worker's own packets. */
    public static final long ANY_MAC = -1L;

    /**
     * A worker of the job.
     *
     * @param ip  its IPv4 address, as an int: the source of its packets and the destination of its results.
     * @param mac its MAC, or {@link #ANY_MAC}: then results go to the source MAC of its latest accepted packet.
     */
    public record Worker(int ip, long mac)
    {
    }

    public static String ipString(final int ip)
    {
        return (ip >>> 24) + "." + (ip >>> 16 & 0xFF) + "." + (ip >>> 8 & 0xFF) + "." + (ip & 0xFF);
    }

    public SwitchMlJobDefinition
    {
        workers = List.copyOf(workers);
        if (job < 0 || job > 255)
        {
            throw new IllegalArgumentException("SwitchML job number must be 0..255: " + job);
        }
        if (workers.isEmpty() || workers.size() > MAX_WORKERS)
        {
            throw new IllegalArgumentException("SwitchML job " + job + " needs 1.." + MAX_WORKERS + " workers, has " +
                workers.size());
        }
        if (elementsPerPacket < 2 || elementsPerPacket > MAX_ELEMENTS || (elementsPerPacket & 1) != 0)
        {
            throw new IllegalArgumentException("SwitchML job " + job + ": elements per packet must be an even number " +
                "from 2 to " + MAX_ELEMENTS + ": " + elementsPerPacket);
        }
        if (poolSize < 1 || poolSize > MAX_POOL_SIZE)
        {
            throw new IllegalArgumentException("SwitchML job " + job + ": pool size must be 1.." + MAX_POOL_SIZE + ": " +
                poolSize);
        }
        for (int i = 0; i < workers.size(); i++)
        {
            for (int j = 0; j < i; j++)
            {
                if (workers.get(i).ip() == workers.get(j).ip())
                {
                    throw new IllegalArgumentException("SwitchML job " + job + ": workers " + j + " and " + i +
                        " have the same address (workers are told apart by address)");
                }
            }
        }
    }

    /**
     * @return bytes of aggregator memory the job's pool takes: per slot and set the elements, the count and the
     *         exponents; per slot the two bitmaps.
     */
    public long memoryBytes()
    {
        return memoryBytes(poolSize, elementsPerPacket);
    }

    /**
     * @return bytes of aggregator memory a pool of {@code poolSize} slots of {@code elementsPerPacket} takes.
     */
    public static long memoryBytes(final int poolSize, final int elementsPerPacket)
    {
        return (long)Math.max(0, poolSize) *
            (2L * (Math.max(0, elementsPerPacket) * (long)Integer.BYTES + 2 * Integer.BYTES) + 2 * Long.BYTES);
    }
}
