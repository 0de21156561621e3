package io.netreduce.dataplane.switchml;

import io.netreduce.protocol.wire.Ecn;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * An installed SwitchML job: its pool of slots, each with two shadow sets, laid out as p4app-switchML's registers
 * are, and the job's workers.
 * <ul>
 *   <li>per slot: one worker bitmap per set ({@code worker_bitmap}: setting a worker's bit in one set clears it in
 *       the other, which is what lets a slot be reused two rounds later without a reset);</li>
 *   <li>per slot and set: the count of contributions still missing ({@code workers_count}: 0 means free or complete),
 *       the two exponents ({@code exponents}: the first contribution's, then the maximum) and the elements
 *       ({@code processor}: the first contribution written, later ones added, wrapping int32).</li>
 * </ul>
 * Elements are held in native byte order off-heap; the wire's are big-endian. A completed set keeps its sum until
 * the set's next first contribution overwrites it, so a retransmission can be answered from it.
 * <p>
 * Owned by the dataplane thread; the per-job figures are plain fields read by snapshot commands on that thread.
 */
final class SwitchMlJob
{
    private final SwitchMlJobDefinition definition;
    private final int workers;
    private final int elements;
    private final int poolSize;
    private final int[] workerIp;
    private final long[] configuredMac;
    private final long[] workerMac;
    private final int[] workerPort;
    private final long[] bitmaps;
    private final int[] missing;
    private final int[] exponents;
    /** Per slot and set: bit (1 << codepoint) for every ECN codepoint the set's contributions carried. */
    private final byte[] ecnSeen;
    private final UnsafeBuffer values;
    private final UnsafeBuffer resultScratch;
    long packets;
    long completions;
    long resultsSent;
    long resultsResent;
    long pendingDrops;
    long notMemberDrops;
    long wrongSizeDrops;
    long badPoolIndexDrops;

    SwitchMlJob(final SwitchMlJobDefinition definition)
    {
        this.definition = definition;
        this.workers = definition.workers().size();
        this.elements = definition.elementsPerPacket();
        this.poolSize = definition.poolSize();
        this.workerIp = new int[workers];
        this.configuredMac = new long[workers];
        for (int w = 0; w < workers; w++)
        {
            workerIp[w] = definition.workers().get(w).ip();
            configuredMac[w] = definition.workers().get(w).mac();
        }
        this.workerMac = configuredMac.clone();
        this.workerPort = new int[workers];
        this.bitmaps = new long[2 * poolSize];
        this.missing = new int[2 * poolSize];
        this.exponents = new int[2 * poolSize];
        this.ecnSeen = new byte[2 * poolSize];
        this.values = new UnsafeBuffer(ByteBuffer.allocateDirect(2 * poolSize * elements * Integer.BYTES)
            .order(ByteOrder.nativeOrder()));
        this.resultScratch = new UnsafeBuffer(ByteBuffer.allocateDirect(elements * Integer.BYTES));
    }

    SwitchMlJobDefinition definition()
    {
        return definition;
    }

    int workers()
    {
        return workers;
    }

    int elements()
    {
        return elements;
    }

    int poolSize()
    {
        return poolSize;
    }

    int workerIp(final int worker)
    {
        return workerIp[worker];
    }

    /**
     * @return whether {@code mac} may send for the worker: any MAC when none is configured.
     */
    boolean macAllowed(final int worker, final long mac)
    {
        return configuredMac[worker] == SwitchMlJobDefinition.ANY_MAC || configuredMac[worker] == mac;
    }

    /**
     * The worker's accepted packet came from {@code mac} on {@code port}: its results go there.
     */
    void seen(final int worker, final long mac, final int port)
    {
        workerMac[worker] = mac;
        workerPort[worker] = port;
    }

    long workerMac(final int worker)
    {
        return workerMac[worker];
    }

    int workerPort(final int worker)
    {
        return workerPort[worker];
    }

    /**
     * Set the worker's bit in set {@code set} of the slot and clear it in the other set.
     *
     * @return the set's bitmap before: non-zero at the worker's bit when the packet is a retransmission.
     */
    long updateBitmap(final int slot, final int set, final long bit)
    {
        final int index = 2 * slot + set;
        final long before = bitmaps[index];
        bitmaps[index] = before | bit;
        bitmaps[index ^ 1] &= ~bit;
        return before;
    }

    int missing(final int slot, final int set)
    {
        return missing[2 * slot + set];
    }

    void missing(final int slot, final int set, final int count)
    {
        missing[2 * slot + set] = count;
    }

    int exponent0(final int slot, final int set)
    {
        return (byte)(exponents[2 * slot + set] >> 8);
    }

    int exponent1(final int slot, final int set)
    {
        return (byte)exponents[2 * slot + set];
    }

    void exponents(final int slot, final int set, final int e0, final int e1)
    {
        exponents[2 * slot + set] = ((e0 & 0xFF) << 8) | (e1 & 0xFF);
    }

    /**
     * The set's first contribution: its ECN codepoint is the set's only one so far.
     */
    void firstEcn(final int slot, final int set, final int codepoint)
    {
        ecnSeen[2 * slot + set] = (byte)(1 << (codepoint & 0x3));
    }

    /**
     * A later contribution (or a retransmission to a complete set): its ECN codepoint joins the set's.
     */
    void addEcn(final int slot, final int set, final int codepoint)
    {
        ecnSeen[2 * slot + set] |= (byte)(1 << (codepoint & 0x3));
    }

    /**
     * @return the ECN codepoint of the set's results: CE when any contribution was marked (PANAMA §4.2: the fields
     * OR-ed), else ECT(0) when any contribution was ECT(0), else ECT(1) when any was ECT(1), else Not-ECT; so
     * results are ECN-capable when the workers' packets were, and never mix ECT(0) and ECT(1) into a false CE.
     */
    int resultEcn(final int slot, final int set)
    {
        final int seen = ecnSeen[2 * slot + set];
        if ((seen & (1 << Ecn.CE)) != 0)
        {
            return Ecn.CE;
        }
        if ((seen & (1 << Ecn.ECT_0)) != 0)
        {
            return Ecn.ECT_0;
        }
        return (seen & (1 << Ecn.ECT_1)) != 0 ? Ecn.ECT_1 : Ecn.NOT_ECT;
    }

    /**
     * @return the offset of the set's elements in {@link #values()}.
     */
    int valuesOffset(final int slot, final int set)
    {
        return (2 * slot + set) * elements * Integer.BYTES;
    }

    UnsafeBuffer values()
    {
        return values;
    }

    UnsafeBuffer resultScratch()
    {
        return resultScratch;
    }

    /**
     * @return sets (of all slots) holding some but not all contributions.
     */
    int setsInFlight()
    {
        int inFlight = 0;
        for (final int count : missing)
        {
            if (count != 0)
            {
                inFlight++;
            }
        }
        return inFlight;
    }

    /**
     * Forget every slot's state, as the controller's reset of the job's registers does (rank 0's UdpSession).
     */
    void reset()
    {
        Arrays.fill(bitmaps, 0L);
        Arrays.fill(missing, 0);
        Arrays.fill(exponents, 0);
        Arrays.fill(ecnSeen, (byte)0);
        values.setMemory(0, values.capacity(), (byte)0);
    }
}
