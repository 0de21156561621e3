package io.netreduce.daemon;

import io.netreduce.controlplane.config.PortConfig;
import io.netreduce.controlplane.config.PortType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.AfXdpConfiguration;
import io.netreduce.protocol.port.AfXdpPort;
import io.netreduce.protocol.port.KernelRelease;
import io.netreduce.protocol.port.PacketPort;
import io.netreduce.protocol.wire.EthernetHeader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;

/**
 * How the daemon opens a configured port: AF_PACKET with default ring sizes (jumbo transmit slots when the MTU needs
 * them), once per lane as a fanout group with lanes, or AF_XDP when the port's type says so.
 */
final class DataplanePorts
{
    /** The dataplane's one logger, as before its parts had classes of their own: operators grep its name. */
    private static final Logger LOG = LoggerFactory.getLogger(PacketDataplane.class);

    private DataplanePorts()
    {
    }

    /**
     * @see PacketDataplane#openLanePorts(PortConfig, int)
     */
    static List<PacketPort> openLanePorts(final PortConfig port, final int lanes)
    {
        if (port.type() != PortType.AF_PACKET)
        {
            throw new IllegalArgumentException("port " + port.name() + ": lanes need an af_packet port");
        }
        final List<AfPacketPort> members = AfPacketPort.openFanout(afPacketConfiguration(port), lanes);
        noteOffload(port, members.getFirst());
        return List.copyOf(members);
    }

    /**
     * @see PacketDataplane#openPort(PortConfig)
     */
    static PacketPort openPort(final PortConfig port)
    {
        if (port.type() == PortType.AF_XDP)
        {
            return openAfXdpPort(port);
        }
        final AfPacketPort opened = AfPacketPort.open(afPacketConfiguration(port));
        noteOffload(port, opened);
        return opened;
    }

    private static void noteOffload(final PortConfig port, final AfPacketPort opened)
    {
        final String note = KernelRelease.offloadNote(port.name(), port.segmentationOffload(),
            opened.configuration().segmentationOffload());
        if (note != null)
        {
            LOG.warn(note);
        }
    }

    /**
     * @return the settings the dataplane's warm-up opens its port with on the loopback interface (its first
     *         AF_PACKET port's, so that the warm-up compiles the code that port runs), or null where the first port is
     *         not AF_PACKET (an AF_XDP port's code is not AF_PACKET's: the warm-up then runs in memory).
     */
    static AfPacketConfiguration warmUpPortSettings(final List<PortConfig> ports)
    {
        return ports.isEmpty() || ports.getFirst().type() != PortType.AF_PACKET ? null :
            afPacketConfiguration(ports.getFirst());
    }

    private static AfPacketConfiguration afPacketConfiguration(final PortConfig port)
    {
        AfPacketConfiguration configuration = AfPacketConfiguration.defaults(port.name());
        if (port.mtu() + EthernetHeader.LENGTH + EthernetHeader.VLAN_TAG_LENGTH >
            AfPacketConfiguration.DEFAULT_TX_FRAME_SIZE - 64)
        {
            configuration = configuration.withTxRing(
                AfPacketConfiguration.JUMBO_TX_FRAME_SIZE, AfPacketConfiguration.DEFAULT_TX_FRAME_COUNT);
        }
        // The appliance's neighbours send wire frames (NICs; the bed's workers segment in their own kernels): its
        // offload is on the transmit side, and its receive ring has MTU-sized slots, 32 MiB of them
        // (withRxForWireFrames).
        if (port.segmentationOffload())
        {
            configuration = configuration.withSegmentationOffload(true).withRxForWireFrames();
        }
        return configuration.withTxSocketBuffer(transmitSocketBuffer(configuration));
    }

    /**
     * The transmit socket's buffer: as many bytes as the transmit ring holds. The kernel charges the socket for
     * every frame it has taken from the ring and not yet sent, and one socket carries the results to every worker
     * behind the port: with the kernel's default (208 KiB, three offload batches) the queues of the workers' links
     * filled it and the kernel refused the rest of every kick, one link's backlog holding up the others' results,
     * while the lane kicked again in a loop. What the appliance sends is bounded by the rings' windows (a result
     * answers a request), so a buffer as large as the ring never holds more than the windows; the ring's slots
     * stay the limit, as a NIC's transmit descriptors are. Set with SO_SNDBUFFORCE (the daemon has CAP_NET_ADMIN);
     * without it the kernel caps it at net.core.wmem_max and the lane waits for room in poll(2) (PortPoller).
     */
    static int transmitSocketBuffer(final AfPacketConfiguration configuration)
    {
        return (int)Math.min(Integer.MAX_VALUE / 2, (long)configuration.txFrameSize() * configuration.txFrameCount());
    }

    /**
     * A port of type {@code af_xdp}: the XDP program attached (native hook where the driver has one), the socket
     * bound zero-copy where the driver allows, default ring sizes; how it was bound is logged.
     */
    private static PacketPort openAfXdpPort(final PortConfig port)
    {
        final AfXdpPort xdp = AfXdpPort.open(AfXdpConfiguration.defaults(port.name()));
        LOG.info("port {}: AF_XDP queue {} bound {} (MTU {})", port.name(), xdp.configuration().queueId(),
            xdp.mode(), xdp.mtu());
        return xdp;
    }
}
