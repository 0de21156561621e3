package io.netreduce.dataplane.agent;

import io.netreduce.dataplane.capture.CaptureTap;
import io.netreduce.dataplane.clt.ConnectionTable;
import io.netreduce.dataplane.counters.DataplaneCounter;
import io.netreduce.dataplane.counters.DataplaneCounters;
import io.netreduce.dataplane.frame.ArrivingFrame;
import io.netreduce.dataplane.frame.CaptureTaps;
import io.netreduce.dataplane.frame.FaultInjection;
import io.netreduce.dataplane.frame.FrameOutput;
import io.netreduce.dataplane.netreduce.ForeignTagEvents;
import io.netreduce.dataplane.netreduce.NetReduceProtocol;
import io.netreduce.dataplane.switchml.SwitchMlProtocol;
import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.PacketPort;
import org.HdrHistogram.SingleWriterRecorder;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The per-packet path's entry and its one dispatch by protocol: each received frame is parsed once, shown to the
 * port's capture tap, classified by {@link FrameClass} and handed to its protocol's package:
 * <ul>
 *   <li>{@link FrameClass#ROCE_WRITE}, {@link FrameClass#OTHER_ROCE}: RoCEv2, NetReduce's
 *       ({@link NetReduceProtocol}: its rings, CLT and aggregators decide what is ring traffic; the rest of RoCEv2
 *       passes through);</li>
 *   <li>{@link FrameClass#SWITCHML}: UDP to 0xBEE0/0xFFF0, SwitchML's ({@link SwitchMlProtocol}: its jobs' slot
 *       pools);</li>
 *   <li>{@link FrameClass#PASS_THROUGH}: anything else, sent on unchanged by {@link FrameOutput} (L4 checksum
 *       completed if the port flagged it partial).</li>
 * </ul>
 * The protocols share what this class builds once per lane: the frame in hand ({@link ArrivingFrame}), the output
 * with its counters and drop captures ({@link FrameOutput}, {@link CaptureTaps}) and the fault injection; each
 * keeps its own tables. A new protocol is a package with a handler, a class in {@link FrameClass} and one case
 * below. The calls are direct calls on final classes, so the JIT inlines each protocol's path as before.
 * <p>
 * Single-threaded and allocation-free per packet. Not thread-safe.
 */
public final class PacketProcessor implements FrameHandler
{
    private final DataplaneTables tables;
    private final ArrivingFrame arriving = new ArrivingFrame();
    private final CaptureTaps taps;
    private final FrameOutput output;
    private final NetReduceProtocol netReduce;
    private final SwitchMlProtocol switchMl;
    private final AtomicCounter framesReceived;
    private FaultInjection faults = new FaultInjection(0.0, 0);

    /**
     * @param ports   the ports, by index.
     * @param peers   for each port index, the index of the port its frames leave on (itself for one-armed,
     *                the other port for bump-in-the-wire).
     * @param latency recorder of first-packet-in to results-out times, in nanoseconds.
     * @param foreignTags where connections on a ring edge without the ring's InetTag are reported.
     */
    public PacketProcessor(
        final DataplaneTables tables,
        final DataplaneCounters counters,
        final PacketPort[] ports,
        final int[] peers,
        final SingleWriterRecorder latency,
        final long highestLatency,
        final ForeignTagEvents foreignTags)
    {
        final PacketPort[] ownPorts = ports.clone();
        this.tables = tables;
        this.taps = new CaptureTaps(ownPorts, counters);
        this.output = new FrameOutput(ownPorts, peers, counters, taps);
        this.netReduce = new NetReduceProtocol(tables.rings(), tables.clt(), tables.edges(), counters,
            output, latency, highestLatency, foreignTags);
        this.switchMl = new SwitchMlProtocol(tables.switchMl(), counters, output);
        this.framesReceived = counters.counter(DataplaneCounter.FRAMES_RECEIVED);
    }

    /**
     * Drop each arriving frame of an aggregation protocol with the given probability before looking at it (tests
     * and drills).
     */
    /**
     * @return the NetReduce rings' test of a replaced CLT entry (for the agent's sweep).
     */
    ConnectionTable.StaleTest staleTest()
    {
        return netReduce.staleTest();
    }

    public void faultInjection(final double probability, final long seed)
    {
        this.faults = new FaultInjection(probability, seed);
    }

    public DataplaneTables tables()
    {
        return tables;
    }

    /**
     * Install a capture tap (between batches).
     *
     * @throws IllegalArgumentException if the tap's port does not exist, is already tapped, drops are already
     *                                  tapped, or a tap with the same id is installed.
     */
    public void installTap(final CaptureTap tap)
    {
        taps.install(tap);
    }

    /**
     * Remove a capture tap (between batches): no frame is copied into it afterwards.
     *
     * @return the removed tap.
     * @throws IllegalArgumentException if no tap has that id.
     */
    public CaptureTap removeTap(final int captureId)
    {
        return taps.remove(captureId);
    }

    /**
     * Set the port the next frames come from, the time stamp for their arrival and the port's marking threshold
     * (once per batch; {@link ArrivingFrame#queueMarks}).
     */
    public void beginBatch(final int portIndex, final long nowNs, final PacketPort port, final int markAt)
    {
        arriving.beginBatch(portIndex, nowNs, port, markAt);
    }

    @Override
    public void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        framesReceived.incrementRelease();
        final int status = arriving.arrive(buffer, offset, length, flags);
        taps.onArrival(arriving);
        final int frameClass = FrameClass.of(arriving.frame(), status);
        if (frameClass == FrameClass.PASS_THROUGH)
        {
            output.forward(arriving);
            return;
        }
        if (faults.shouldDrop())
        {
            output.drop(arriving, DataplaneCounter.DROP_INJECTED);
            return;
        }
        switch (frameClass)
        {
            case FrameClass.ROCE_WRITE -> netReduce.onWrite(arriving);
            case FrameClass.OTHER_ROCE -> netReduce.onOtherRoce(arriving, status);
            case FrameClass.SWITCHML -> switchMl.onFrame(arriving);
        }
    }
}
