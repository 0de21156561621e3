package io.netreduce.daemon;

import io.netreduce.controlplane.config.PortConfig;
import io.netreduce.controlplane.config.PortType;
import io.netreduce.protocol.port.AfPacketConfiguration;
import io.netreduce.protocol.port.AfPacketPort;
import io.netreduce.protocol.port.PacketPort;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class DataplanePortsTest
{
    /**
     * One transmit socket carries the results to every worker behind the port; with the kernel's default buffer
     * the queues of their links filled it and the kernel refused the lane's kicks. The daemon's sockets hold as
     * much as their ring, with segmentation offload (68 KiB slots) or without.
     */
    @Test
    void shouldOpenEveryLanesTransmitSocketWithABufferAsLargeAsItsRing()
    {
        assumeTrue("root".equals(System.getProperty("user.name")), "needs root for AF_PACKET");
        for (final boolean offload : new boolean[] {true, false})
        {
            final List<PacketPort> lanes =
                DataplanePorts.openLanePorts(new PortConfig("lo", 1500, PortType.AF_PACKET, offload), 2);
            try
            {
                for (final PacketPort lane : lanes)
                {
                    final AfPacketConfiguration configuration = ((AfPacketPort)lane).configuration();
                    final long ring = (long)configuration.txFrameSize() * configuration.txFrameCount();
                    assertThat(configuration.txSocketBuffer()).isEqualTo((int)ring);
                    // The kernel keeps twice the value set, for its bookkeeping.
                    assertThat(((AfPacketPort)lane).transmitSocketBuffer()).as("offload %s", offload)
                        .isEqualTo((int)(2 * ring));
                }
            }
            finally
            {
                lanes.forEach(PacketPort::close);
            }
        }
    }
}
