package io.netreduce.host.allreduce;

import io.netreduce.protocol.port.FrameHandler;
import io.netreduce.protocol.port.MemoryPort;
import io.netreduce.protocol.wire.Ecn;
import io.netreduce.protocol.wire.EthernetHeader;
import io.netreduce.protocol.wire.RoceFrame;
import io.netreduce.protocol.wire.UdpHeader;
import org.agrona.MutableDirectBuffer;
import org.agrona.collections.Int2IntHashMap;
import org.agrona.collections.Long2LongHashMap;

import java.util.ArrayList;
import java.util.List;

/**
 * An in-test Ethernet switch over {@link MemoryPort}s: forwards by destination MAC (static table), and can
 * redirect RoCEv2 (UDP 4791) frames arriving on worker ports to one "appliance" port, as the test bed's tc
 * u32 + mirred ACL does. Frames from the appliance port are forwarded by MAC. MemoryPort.wire joins only two
 * ports, hence this.
 */
final class TestSwitch
{
    private final List<MemoryPort> ports = new ArrayList<>();
    private final Long2LongHashMap macToPort = new Long2LongHashMap(-1);
    private final RoceFrame frame = new RoceFrame();
    private final FrameHandler handler = this::onFrame;
    private int redirectPort = -1;
    /** UDP source port -> appliance port: one aggregation tree's RoCEv2 to its own appliance (testbed.sh --trees). */
    private final Int2IntHashMap redirectBySourcePort = new Int2IntHashMap(-1);
    long redirectedBySourcePort;
    private int inPort;
    private Marker marker;
    long unknownMac;
    long redirected;
    long marked;

    /**
     * Decides which RoCEv2 frames the switch marks ECN = CE on their way (a congested egress's AQM).
     */
    @FunctionalInterface
    interface Marker
    {
        /**
         * @param inPort the switch port the frame arrived on.
         * @param frame  the frame, parsed.
         */
        boolean mark(int inPort, RoceFrame frame);
    }

    void marker(final Marker marker)
    {
        this.marker = marker;
    }

    /**
     * Add a port facing {@code device} (wired to it) for a host with MAC {@code mac} (0: no MAC, e.g. the
     * appliance).
     *
     * @return the switch-side port index.
     */
    int attach(final MemoryPort device, final long mac)
    {
        final MemoryPort port = new MemoryPort("sw" + ports.size(), MemoryPort.DEFAULT_MAX_FRAME_LENGTH, 1024, 1 << 23);
        MemoryPort.wire(port, device);
        ports.add(port);
        if (mac != 0)
        {
            macToPort.put(mac, ports.size() - 1);
        }
        return ports.size() - 1;
    }

    void redirectRoceTo(final int portIndex)
    {
        redirectPort = portIndex;
    }

    /**
     * RoCEv2 frames from UDP source port {@code udpSourcePort} arriving on any port but an appliance's go to
     * {@code portIndex} instead of the {@link #redirectRoceTo} port: the bed's per-tree ACL.
     */
    void redirectRoceFromSourcePort(final int udpSourcePort, final int portIndex)
    {
        redirectBySourcePort.put(udpSourcePort, portIndex);
    }

    int doWork()
    {
        int work = 0;
        for (int i = 0; i < ports.size(); i++)
        {
            inPort = i;
            work += ports.get(i).receive(handler, 64);
            for (final MemoryPort port : ports)
            {
                port.flush();
            }
        }
        return work;
    }

    private void onFrame(final MutableDirectBuffer buffer, final int offset, final int length, final int flags)
    {
        if (marker != null && frame.wrap(buffer, offset, length) == RoceFrame.OK && marker.mark(inPort, frame))
        {
            Ecn.markCe(buffer, frame.l3Offset());
            marked++;
        }
        final boolean fromAppliance = inPort == redirectPort || redirectBySourcePort.containsValue(inPort);
        if (redirectPort >= 0 && !fromAppliance && frame.wrap(buffer, offset, length) != RoceFrame.NOT_ROCE)
        {
            final int tree = redirectBySourcePort.get(UdpHeader.srcPort(buffer, frame.udpOffset()));
            if (tree >= 0)
            {
                redirectedBySourcePort++;
                ports.get(tree).send(buffer, offset, length);
                return;
            }
            redirected++;
            ports.get(redirectPort).send(buffer, offset, length);
            return;
        }
        final long out = macToPort.get(EthernetHeader.dstMac(buffer, offset));
        if (out < 0)
        {
            unknownMac++;
            return;
        }
        ports.get((int)out).send(buffer, offset, length);
    }
}
