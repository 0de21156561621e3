package io.netreduce.dataplane.switchml;

import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.frame.ArrivingFrame;
import io.netreduce.dataplane.frame.FrameOutput;
import io.netreduce.protocol.wire.Ecn;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.Ipv4Header;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.SwitchMlHeader;
import io.netreduce.protocol.wire.UdpHeader;
import io.netreduce.protocol.writer.SwitchMlPacketWriter;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;

import static java.nio.ByteOrder.BIG_ENDIAN;

/**
 * SwitchML (NSDI '21) on the appliance: the UDP frames the dispatch classed as SwitchML (destination port
 * 0xBEE0/0xFFF0), aggregated in their job's slot pool with p4app-switchML's P4 semantics:
 * <ol>
 *   <li>the job and the worker are found by the packet's source address (and source MAC, when configured), as the
 *       P4 program's {@code receive_udp} table finds them; the header's job number is the client's per-call id,
 *       echoed. A packet from no job's worker is a counted drop when it is addressed to one of the appliance's
 *       SwitchML addresses (a stranger's packet never reaches a slot), and passes through, counted, otherwise;</li>
 *   <li>the worker's bit is set in the bitmap of the packet's set (pool index bit 15) of its slot (bits 13..0) and
 *       cleared in the other set ({@code bitmap_checker.p4});</li>
 *   <li>a new contribution: the set's first is written, later ones added (wrapping int32), exponents the first's
 *       then the maximum ({@code processor.p4}, {@code exponents.p4}); the count of missing contributions reaching 0
 *       completes the set ({@code workers_counter.p4}): one result per worker, unicast, standing for the Tofino's
 *       multicast;</li>
 *   <li>a retransmission (the worker's bit already set): to a complete set, answered with the stored result to its
 *       sender only; to an incomplete set, dropped: a contribution is never added twice.</li>
 * </ol>
 * A result is built as {@code udp_sender.p4} builds it: from the appliance's MAC and IPv4 address, to the worker's
 * MAC and address, IPv4 without options or flags (TTL 64, identification 0), UDP source port the triggering
 * packet's destination port, destination port its source port, checksum 0; the SwitchML header with message type
 * 1, the packet's size code, job number and TSI, the pool index's slot and set; the exponents; the elements,
 * big-endian. Its ECN field is the contributions' OR (PANAMA §4.2): CE when any was marked, else ECN-capable when
 * they were ({@link SwitchMlJob#resultEcn}).
 * <p>
 * Single-threaded and allocation-free per packet.
 */
public final class SwitchMlProtocol
{
    private static final int IPV4_TTL = 64;

    private final SwitchMlJobs jobs;
    private final FrameOutput output;
    private final AtomicCounter packets;
    private final AtomicCounter completions;
    private final AtomicCounter results;
    private final AtomicCounter resultsResent;
    private final AtomicCounter unknownJob;
    private final AtomicCounter ceQueue;

    public SwitchMlProtocol(final SwitchMlJobs jobs, final DataplaneCounters counters, final FrameOutput output)
    {
        this.jobs = jobs;
        this.output = output;
        this.packets = counters.counter(DataplaneCounter.SWITCHML_PACKETS);
        this.completions = counters.counter(DataplaneCounter.SWITCHML_COMPLETIONS);
        this.results = counters.counter(DataplaneCounter.SWITCHML_RESULTS);
        this.resultsResent = counters.counter(DataplaneCounter.SWITCHML_RESULTS_RESENT);
        this.unknownJob = counters.counter(DataplaneCounter.PASS_THROUGH_SWITCHML_NO_JOB);
        this.ceQueue = counters.counter(DataplaneCounter.ECN_CE_QUEUE);
    }

    /**
     * A UDP frame to a SwitchML port ({@link RoceFrame#udpDstPort()} in 0xBEE0..0xBEEF).
     */
    public void onFrame(final ArrivingFrame arriving)
    {
        final RoceFrame frame = arriving.frame();
        if (frame.ipVersion() != 4)
        {
            // SwitchML is IPv4 only: this is someone else's traffic on that port.
            output.forward(arriving);
            return;
        }
        final MutableDirectBuffer buffer = arriving.buffer();
        final int l3 = frame.l3Offset();
        final int udp = frame.udpOffset();
        final int frameEnd = arriving.offset() + arriving.length();
        final int udpLength = UdpHeader.length(buffer, udp);
        if (l3 + Ipv4Header.totalLength(buffer, l3) > frameEnd || udp + udpLength > frameEnd ||
            udpLength < UdpHeader.LENGTH + SwitchMlHeader.ELEMENTS_OFFSET)
        {
            output.drop(arriving, DataplaneCounter.DROP_SWITCHML_MALFORMED);
            return;
        }
        final int header = udp + UdpHeader.LENGTH;
        final int jobAndWorker = jobs.workerOf(Ipv4Header.src(buffer, l3));
        if (jobAndWorker < 0)
        {
            if (jobs.isApplianceAddress(Ipv4Header.dst(buffer, l3)))
            {
                output.drop(arriving, DataplaneCounter.DROP_SWITCHML_NOT_MEMBER);
                return;
            }
            // Someone else's traffic on a SwitchML port, or one of our results passing by (bump-in-the-wire, or a
            // switch that redirects it back to us).
            unknownJob.incrementRelease();
            output.forward(arriving);
            return;
        }
        final SwitchMlJob job = jobs.job(SwitchMlJobs.jobOf(jobAndWorker));
        final int worker = SwitchMlJobs.workerIndexOf(jobAndWorker);
        final long srcMac = EthernetHeader.srcMac(buffer, arriving.offset());
        if (!job.macAllowed(worker, srcMac))
        {
            job.notMemberDrops++;
            output.drop(arriving, DataplaneCounter.DROP_SWITCHML_NOT_MEMBER);
            return;
        }
        if (udpLength - UdpHeader.LENGTH - SwitchMlHeader.ELEMENTS_OFFSET != job.elements() * Integer.BYTES)
        {
            job.wrongSizeDrops++;
            output.drop(arriving, DataplaneCounter.DROP_SWITCHML_WRONG_SIZE);
            return;
        }
        final int poolIndex = SwitchMlHeader.poolIndex(buffer, header);
        final int slot = poolIndex & SwitchMlHeader.SLOT_MASK;
        final int set = (poolIndex & SwitchMlHeader.SHADOW_SET_BIT) != 0 ? 1 : 0;
        if (slot >= job.poolSize())
        {
            job.badPoolIndexDrops++;
            output.drop(arriving, DataplaneCounter.DROP_SWITCHML_BAD_POOL_INDEX);
            return;
        }
        job.seen(worker, srcMac, arriving.port());
        final long bit = 1L << worker;
        final long before = job.updateBitmap(slot, set, bit);
        final int ecn = ecnOf(arriving, buffer, l3);
        if ((before & bit) != 0)
        {
            onRetransmission(arriving, job, worker, slot, set, header, ecn);
            return;
        }
        packets.incrementRelease();
        job.packets++;
        final int missing = job.missing(slot, set);
        final int elements = header + SwitchMlHeader.ELEMENTS_OFFSET;
        final int e0 = SwitchMlHeader.exponent0(buffer, header);
        final int e1 = SwitchMlHeader.exponent1(buffer, header);
        if (missing == 0)
        {
            store(buffer, elements, job, slot, set);
            job.exponents(slot, set, e0, e1);
            job.firstEcn(slot, set, ecn);
            job.missing(slot, set, job.workers() - 1);
            if (job.workers() == 1)
            {
                complete(arriving, job, slot, set, header);
            }
            return;
        }
        add(buffer, elements, job, slot, set);
        job.exponents(slot, set, Math.max(e0, job.exponent0(slot, set)), Math.max(e1, job.exponent1(slot, set)));
        job.addEcn(slot, set, ecn);
        job.missing(slot, set, missing - 1);
        if (missing == 1)
        {
            complete(arriving, job, slot, set, header);
        }
    }

    /**
     * The packet's ECN codepoint, CE where the appliance marks it itself ({@link ArrivingFrame#queueMarks}, as for
     * NetReduce's aggregators).
     */
    private int ecnOf(final ArrivingFrame arriving, final MutableDirectBuffer buffer, final int l3)
    {
        final int ecn = Ipv4Header.ecn(buffer, l3);
        if (arriving.queueMarks(ecn))
        {
            ceQueue.incrementRelease();
            return Ecn.CE;
        }
        return ecn;
    }

    private void onRetransmission(
        final ArrivingFrame arriving, final SwitchMlJob job, final int worker, final int slot, final int set,
        final int header, final int ecn)
    {
        if (job.missing(slot, set) != 0)
        {
            job.pendingDrops++;
            output.drop(arriving, DataplaneCounter.DROP_SWITCHML_PENDING);
            return;
        }
        job.addEcn(slot, set, ecn);
        resultsResent.incrementRelease();
        job.resultsResent++;
        final UnsafeBuffer scratch = job.resultScratch();
        toWire(job, slot, set, scratch);
        sendResult(arriving, job, worker, slot, set, header, scratch);
    }

    private void complete(
        final ArrivingFrame arriving, final SwitchMlJob job, final int slot, final int set, final int header)
    {
        completions.incrementRelease();
        job.completions++;
        final UnsafeBuffer scratch = job.resultScratch();
        toWire(job, slot, set, scratch);
        for (int w = 0; w < job.workers(); w++)
        {
            sendResult(arriving, job, w, slot, set, header, scratch);
        }
    }

    private void sendResult(
        final ArrivingFrame arriving,
        final SwitchMlJob job,
        final int worker,
        final int slot,
        final int set,
        final int header,
        final UnsafeBuffer elementsOnWire)
    {
        final MutableDirectBuffer in = arriving.buffer();
        final int payload = elementsOnWire.capacity();
        final int length = SwitchMlPacketWriter.frameLength(job.elements());
        final int port = job.workerPort(worker);
        final int index = output.claim(port, length);
        if (index < 0)
        {
            return;
        }
        final MutableDirectBuffer out = output.claimBuffer(port);
        final SwitchMlJobDefinition definition = job.definition();
        final int inUdp = header - UdpHeader.LENGTH;
        SwitchMlPacketWriter.writeHeaders(out, index, definition.applianceMac(), job.workerMac(worker),
            definition.applianceIp(), job.workerIp(worker), IPV4_TTL, UdpHeader.dstPort(in, inUdp),
            UdpHeader.srcPort(in, inUdp), SwitchMlHeader.size(in, header), SwitchMlHeader.job(in, header),
            SwitchMlHeader.tsi(in, header), slot | (set != 0 ? SwitchMlHeader.SHADOW_SET_BIT : 0),
            job.exponent0(slot, set), job.exponent1(slot, set), job.elements());
        Ecn.set(out, index + EthernetHeader.LENGTH, job.resultEcn(slot, set));
        out.putBytes(SwitchMlPacketWriter.elementsOffset(index), elementsOnWire, 0, payload);
        output.commit(port);
        results.incrementRelease();
        job.resultsSent++;
    }

    private static void store(
        final MutableDirectBuffer buffer, final int elements, final SwitchMlJob job, final int slot, final int set)
    {
        final UnsafeBuffer values = job.values();
        final int base = job.valuesOffset(slot, set);
        final int count = job.elements();
        for (int i = 0; i < count; i++)
        {
            values.putInt(base + i * Integer.BYTES, buffer.getInt(elements + i * Integer.BYTES, BIG_ENDIAN));
        }
    }

    private static void add(
        final MutableDirectBuffer buffer, final int elements, final SwitchMlJob job, final int slot, final int set)
    {
        final UnsafeBuffer values = job.values();
        final int base = job.valuesOffset(slot, set);
        final int count = job.elements();
        for (int i = 0; i < count; i++)
        {
            final int at = base + i * Integer.BYTES;
            values.putInt(at, values.getInt(at) + buffer.getInt(elements + i * Integer.BYTES, BIG_ENDIAN));
        }
    }

    private static void toWire(final SwitchMlJob job, final int slot, final int set, final UnsafeBuffer wire)
    {
        final UnsafeBuffer values = job.values();
        final int base = job.valuesOffset(slot, set);
        final int count = job.elements();
        for (int i = 0; i < count; i++)
        {
            wire.putInt(i * Integer.BYTES, values.getInt(base + i * Integer.BYTES), BIG_ENDIAN);
        }
    }
}
